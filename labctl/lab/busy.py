"""Busy strangers: processes that are not the trial's own and ran on the trial's CPUs while it measured.

The host lock (:mod:`labctl.lab.hostlock`) keeps other labctl trials off a trial's CPUs; anything else
(another engineer's testpmd, a compiler, a guest started by hand) can still be there. A trial samples
every process's CPU time (``psutil``: user + system of all its threads) and CPU affinity at the start of
its warm-up, at the start of its window and at its end, and names each process that used at least
:data:`BUSY_PCT` of a CPU over the warm-up or the window while its affinity includes one of the trial's
CPUs. Its own processes are left out: labctl itself and its children, and the lab's processes (QEMU is
libvirtd's child) with theirs. Kernel threads are left out too (children of ``kthreadd``, pid 2: the
softirq and vhost work a trial causes itself lands there).

Two samples of ~300 processes cost a few tens of milliseconds, taken outside the window.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable

import psutil

from labctl.host.cpuset import format_cpuset

BUSY_PCT = 20.0  # a stranger using this share of a CPU over the interval is named


@dataclass(frozen=True)
class Stranger:
    pid: int
    name: str
    cpu_pct: float
    affinity: str

    def describe(self) -> str:
        return f"pid {self.pid} {self.name} ({self.cpu_pct:.0f}% of a CPU, may run on CPUs {self.affinity})"


def _sample() -> dict[int, tuple[str, float, frozenset[int], int]]:
    found = {}
    for proc in psutil.process_iter(["name", "cpu_times", "cpu_affinity", "ppid"]):
        info = proc.info
        times, affinity = info.get("cpu_times"), info.get("cpu_affinity")
        if times is None or not affinity:
            continue
        found[proc.pid] = (info.get("name") or "?", times.user + times.system, frozenset(affinity),
                           info.get("ppid") or 0)
    return found


def _family(roots: Iterable[int]) -> set[int]:
    own: set[int] = set()
    for pid in roots:
        try:
            proc = psutil.Process(pid)
            own.add(pid)
            own.update(c.pid for c in proc.children(recursive=True))
        except psutil.Error:
            continue
    return own


class BusyWatch:
    """Samples at :meth:`start`, then each :meth:`check` names the strangers since the previous sample."""

    def __init__(self, cpus: Iterable[int], own_pids: Iterable[int] = ()):
        self.cpus = frozenset(cpus)
        self.own_pids = set(own_pids)
        self._t = 0.0
        self._last: dict[int, tuple[str, float, frozenset[int], int]] = {}
        self.found: list[dict] = []

    def start(self) -> None:
        self._t, self._last = time.monotonic(), _sample()

    def check(self, during: str) -> list[Stranger]:
        """The strangers busy on the trial's CPUs since the last sample; recorded in :attr:`found`."""
        now_t, now = time.monotonic(), _sample()
        dt = now_t - self._t
        own = _family({os.getpid(), *self.own_pids})
        strangers = []
        if dt >= 0.05:
            for pid, (name, cpu_s, affinity, ppid) in now.items():
                before = self._last.get(pid)
                if before is None or pid in own or ppid == 2 or pid == 2 or not affinity & self.cpus:
                    continue
                pct = (cpu_s - before[1]) / dt * 100.0
                if pct >= BUSY_PCT:
                    strangers.append(Stranger(pid, name, round(pct, 1), format_cpuset(affinity)))
        self._t, self._last = now_t, now
        strangers.sort(key=lambda s: -s.cpu_pct)
        self.found += [{"during": during, **s.__dict__} for s in strangers]
        return strangers

    def warnings(self) -> list[str]:
        """One warning per check that found strangers, naming them."""
        by_phase: dict[str, list[str]] = {}
        for item in self.found:
            stranger = Stranger(item["pid"], item["name"], item["cpu_pct"], item["affinity"])
            by_phase.setdefault(item["during"], []).append(stranger.describe())
        return [f"busy processes that are not this trial's on its CPUs {format_cpuset(self.cpus)} during the "
                f"{during}: {', '.join(names)}: the figures may be theirs too"
                for during, names in by_phase.items()]
