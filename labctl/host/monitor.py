"""Per-thread CPU of the workload (testpmd, QEMU) from /proc: CPU %, affinity, context switches.

Sampling reads only the monitored processes' threads, once a second by default, so it costs far
less than 1% of a core; ``cost_pct`` reports what it really cost.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


from labctl import signals

POLLER_PCT = 30.0  # a thread using at least this share of a core in an interval is polling


@dataclass
class ThreadSample:
    role: str
    pid: int
    tid: int
    name: str
    cpu_pct: float
    affinity: list[int]
    last_cpu: int | None
    voluntary_ctx: int
    involuntary_ctx: int


@dataclass
class MonitorReport:
    threads: list[ThreadSample] = field(default_factory=list)
    shared_busy_cpus: dict[int, list[str]] = field(default_factory=dict)  # cpu -> busy threads on it
    cost_pct: float = 0.0
    window_s: float = 0.0

    def cpu_by_role(self) -> dict[str, float]:
        """Busy share per thread, keyed 'role/name(tid)' for threads that used at least 1% of a core."""
        return {f"{t.role}/{t.name}.{t.tid}": round(t.cpu_pct, 1) for t in self.threads if t.cpu_pct >= 1.0}

    def warnings(self) -> list[str]:
        return [f"two busy pollers share CPU {cpu}: {', '.join(names)}"
                for cpu, names in sorted(self.shared_busy_cpus.items())]


def _ctx_switches(pid: int, tid: int) -> tuple[int, int]:
    voluntary = involuntary = 0
    try:
        with open(f"/proc/{pid}/task/{tid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary = int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary = int(line.split()[1])
    except OSError:
        pass
    return voluntary, involuntary


def _thread_stat(pid: int, tid: int) -> tuple[str, float, int | None] | None:
    """(comm, utime+stime seconds, last CPU) of one thread from /proc."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as handle:
            raw = handle.read()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1: raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2:].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return comm, (int(fields[11]) + int(fields[12])) / ticks, int(fields[36])


class ThreadMonitor:
    """Samples the threads of the given processes between start() and stop()."""

    def __init__(self, processes: dict[str, int], interval_s: float = 1.0):
        self.processes = processes  # role -> pid
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first: dict[tuple[int, int], float] = {}
        self._last: dict[tuple[int, int], tuple[str, float, int | None]] = {}
        self._shared_hits: dict[int, dict[tuple[int, int], int]] = {}  # cpu -> poller -> samples
        self._samples = 0
        self._cost_s = 0.0
        self._t0 = 0.0
        self._t1 = 0.0

    def _sample(self) -> None:
        begin = time.thread_time()
        now: dict[tuple[int, int], tuple[str, float, int | None]] = {}
        for pid in self.processes.values():
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                stat = _thread_stat(pid, tid)
                if stat:
                    now[(pid, tid)] = stat
        on_cpu: dict[int, set[tuple[int, int]]] = {}
        for key, (comm, cpu_s, last_cpu) in now.items():
            self._first.setdefault(key, cpu_s)
            previous = self._last.get(key)
            if previous is not None and last_cpu is not None:
                busy = (cpu_s - previous[1]) / self.interval_s * 100.0
                if busy >= POLLER_PCT:
                    on_cpu.setdefault(last_cpu, set()).add(key)
        for cpu, keys in on_cpu.items():
            if len(keys) >= 2:
                seen = self._shared_hits.setdefault(cpu, {})
                for key in keys:
                    seen[key] = seen.get(key, 0) + 1
        self._last.update(now)
        self._samples += 1
        self._cost_s += time.thread_time() - begin

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="labctl-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> MonitorReport:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        self._sample()
        self._t1 = time.monotonic()
        window = max(self._t1 - self._t0, 1e-6)
        report = MonitorReport(window_s=window, cost_pct=self._cost_s / window * 100.0)
        roles = {pid: role for role, pid in self.processes.items()}
        for (pid, tid), (comm, cpu_s, last_cpu) in sorted(self._last.items()):
            try:
                affinity = sorted(os.sched_getaffinity(tid))
            except OSError:
                affinity = []
            voluntary, involuntary = _ctx_switches(pid, tid)
            pct = (cpu_s - self._first.get((pid, tid), cpu_s)) / window * 100.0
            report.threads.append(ThreadSample(roles.get(pid, "?"), pid, tid, comm, pct, affinity,
                                               last_cpu, voluntary, involuntary))
        # a CPU on which two pollers were seen together in at least two samples
        names = {key: f"{roles.get(key[0], '?')}/{self._last[key][0]}.{key[1]}" for key in self._last}
        for cpu, pollers in self._shared_hits.items():
            repeated = sorted(names.get(k, str(k)) for k, count in pollers.items() if count >= 2)
            if len(repeated) >= 2:
                report.shared_busy_cpus[cpu] = repeated
        return report


def measured_window(pids: dict[str, int], warmup_s: float, duration_s: float, snapshot: Callable[[], Any],
                    phase: Callable[[str], None], started: Callable[[], None] = lambda: None
                    ) -> tuple[Any, Any, MonitorReport]:
    """A trial's measurement: warm-up, a snapshot, ``started`` (the lab's own window start: OVS's PMD
    statistics cleared), the window with the thread monitor sampling ``pids``, a snapshot. Returns
    (before, after, the monitor's report); every wait is a cancel checkpoint."""
    phase("warm-up")
    signals.sleep(warmup_s)
    monitor = ThreadMonitor(pids)
    before = snapshot()
    started()
    monitor.start()
    phase("measure")
    signals.sleep(duration_s)
    after = snapshot()
    return before, after, monitor.stop()


