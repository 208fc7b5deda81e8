"""The host's own unsteadiness, second by second: steal time and the lab threads' involuntary switches.

A soak runs long enough to meet the host's bad moments. On a host that is itself a virtual machine (this
one is a 2-vCPU guest) two things stop the lab's busy-polling threads without the setting under test having
anything to do with it, and both are counted by Linux:

- steal time: the time the hypervisor ran something else while this VM's vCPU wanted to run (the 8th field
  of the ``cpu`` lines of ``/proc/stat``, in USER_HZ ticks; proc(5));
- involuntary context switches of the lab's threads: a poller never yields, so each one is the scheduler
  taking its CPU for another task (``nonvoluntary_ctxt_switches`` in ``/proc/PID/task/TID/status``; proc(5)).

:class:`StallSampler` reads both once a second (on labctl's clock, ``time.monotonic_ns()``) for the processes
a lab runs; a second is a *host stall* (:func:`mark_stalls`) when at least :data:`STEAL_STALL_MS` of CPU time
was stolen in it, or the lab's threads were switched out involuntarily at least :data:`INVOL_STALL_MIN` times
and :data:`INVOL_STALL_FACTOR` times as often as in the soak's median second. There is no PMU in these VMs
("PMU not available due to virtualization"), so no cycle counters stand in for either.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: A second with this much CPU time stolen (summed over CPUs) is a host stall: 5% of one CPU.
STEAL_STALL_MS = 50.0
#: ... or with the lab threads switched out at least this often,
INVOL_STALL_MIN = 20
#: ... and this many times as often as in the soak's median second.
INVOL_STALL_FACTOR = 4.0
USER_HZ = os.sysconf("SC_CLK_TCK")


def steal_ticks(text: str | None = None) -> tuple[int, int]:
    """(steal, all) ticks of the host's ``cpu`` line in ``/proc/stat`` (``text``: its contents)."""
    text = Path("/proc/stat").read_text() if text is None else text
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            steal = values[7] if len(values) > 7 else 0
            # guest and guest_nice are already counted in user and nice (proc(5))
            return steal, sum(values[:8])
    raise ValueError("/proc/stat has no cpu line")


def involuntary_switches(pids: list[int]) -> dict[str, int]:
    """``nonvoluntary_ctxt_switches`` of every thread of ``pids``, by ``pid/tid name``; threads that ended
    are left out."""
    out: dict[str, int] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                status = Path(f"/proc/{pid}/task/{tid}/status").read_text()
            except OSError:
                continue
            name, count = "", None
            for line in status.splitlines():
                if line.startswith("Name:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    count = int(line.split(":", 1)[1])
            if count is not None:
                out[f"{pid}/{tid} {name}"] = count
    return out


@dataclass(frozen=True)
class HostSecond:
    """One second of the host: when it ended (``mono_ns``), CPU time stolen in it (ms, summed over CPUs), the
    lab threads' involuntary switches in it and the thread switched out most."""

    mono_ns: int
    steal_ms: float
    invol: int
    top_thread: str | None


@dataclass
class StallSampler:
    """Once a second, in a thread of its own: the host's steal time and the involuntary switches of the
    threads of ``pids``. :meth:`seconds` is what it saw so far."""

    pids: list[int]
    period_s: float = 1.0
    _samples: list[HostSecond] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> "StallSampler":
        self._thread = threading.Thread(target=self._run, name="labctl-stalls", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        steal, _all = steal_ticks()
        switches = involuntary_switches(self.pids)
        deadline = time.monotonic() + self.period_s
        while not self._stop.wait(max(deadline - time.monotonic(), 0.0)):
            deadline += self.period_s
            now_steal, _all = steal_ticks()
            now_switches = involuntary_switches(self.pids)
            deltas = {k: v - switches[k] for k, v in now_switches.items() if k in switches}
            top = max(deltas, key=lambda k: deltas[k], default=None)
            second = HostSecond(time.monotonic_ns(), (now_steal - steal) * 1000.0 / USER_HZ,
                                sum(max(d, 0) for d in deltas.values()), top if top and deltas[top] > 0 else None)
            with self._lock:
                self._samples.append(second)
            steal, switches = now_steal, now_switches

    def seconds(self) -> list[HostSecond]:
        with self._lock:
            return list(self._samples)

    def stop(self) -> list[HostSecond]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * self.period_s)
        return self.seconds()


def mark_stalls(seconds: list[HostSecond]) -> list[bool]:
    """Which seconds were host stalls (see the module's docstring for the rule)."""
    median = statistics.median([s.invol for s in seconds]) if seconds else 0
    limit = max(INVOL_STALL_MIN, INVOL_STALL_FACTOR * median)
    return [s.steal_ms >= STEAL_STALL_MS or s.invol >= limit for s in seconds]
