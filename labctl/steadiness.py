"""How steady is this host's speed? A probe for shared and oversubscribed hosts.

A cloud guest (or a nested VM) can lose half its speed for tens of seconds while a neighbour on the
physical host is busy, and its kernel may show no steal time at all. Forwarding rates measured then
fall into two bands, in runs, and no number of repeats in one sitting makes an A/B of 2% trustworthy.

:func:`probe` measures that directly, with nothing else running: one process pinned on each CPU
alternates two fixed pieces of work and counts how many it completes per interval:

- ``cpu``: an integer loop (registers and L1 only): falls when the physical core is time-shared or its
  SMT sibling is busy;
- ``copy``: copying an 8 MiB buffer (beyond L2, inside a shared L3): falls with memory-bandwidth and
  last-level-cache contention, which is what a DPDK forwarding loop with large rings feels.

:class:`Steadiness` summarises the samples: the spread ``p90 / p10 - 1`` of each rate, pooled over
CPUs and intervals, and a verdict: ``steady`` when every spread is at most :data:`STEADY_SPREAD`,
else ``unsteady``, with the advice that follows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import UserError

__all__ = ["Sample", "Steadiness", "probe", "summarise", "STEADY_SPREAD", "MAX_SECONDS"]

#: A rate whose p90 / p10 exceeds 1 + this is "unsteady" (a quiet host stays within a few per cent).
STEADY_SPREAD = 0.10

#: Longest probe accepted.
MAX_SECONDS = 600.0

_COPY_BYTES = 8 << 20
_CPU_LOOP = 20_000


@dataclass(frozen=True)
class Sample:
    """One interval of one CPU: work units per second of each kind."""

    t: float  # seconds since the probe started
    cpu: int
    cpu_rate: float  # integer loops of _CPU_LOOP iterations per second
    copy_gbps: float  # GB/s copied


@dataclass
class Steadiness:
    seconds: float
    interval_s: float
    cpus: list[int]
    samples: list[Sample] = field(default_factory=list)

    def _spread(self, values: list[float]) -> float | None:
        if len(values) < 4:
            return None
        p10, p90 = np.percentile(values, [10, 90])
        return float(p90 / p10 - 1) if p10 > 0 else None

    @property
    def cpu_spread(self) -> float | None:
        return self._spread([s.cpu_rate for s in self.samples])

    @property
    def copy_spread(self) -> float | None:
        return self._spread([s.copy_gbps for s in self.samples])

    @property
    def verdict(self) -> str:
        spreads = [self.cpu_spread, self.copy_spread]
        if any(s is None for s in spreads):
            return "unknown"
        return "steady" if max(spreads) <= STEADY_SPREAD else "unsteady"

    def describe(self) -> str:
        """One sentence a performance engineer can act on."""
        if self.verdict == "unknown":
            return f"too few samples ({len(self.samples)}) to judge: probe for longer"
        cpu, copy = self.cpu_spread, self.copy_spread
        rates = (f"CPU loop rate p10-p90 spread {cpu:.0%}, memory copy {copy:.0%} "
                 f"over {self.seconds:g} s on CPUs {','.join(map(str, self.cpus))}")
        if self.verdict == "steady":
            return f"steady: {rates}"
        return (f"unsteady: {rates} with nothing else running: a shared or oversubscribed host; expect "
                "two-band results, interleave A/B trials and repeat 5 times or more")

    def to_dict(self) -> dict:
        def stats(values: list[float]) -> dict:
            if not values:
                return {}
            p10, p50, p90 = np.percentile(values, [10, 50, 90])
            return {"min": float(min(values)), "p10": float(p10), "median": float(p50), "p90": float(p90),
                    "max": float(max(values))}

        return {
            "verdict": self.verdict, "description": self.describe(), "seconds": self.seconds,
            "interval_s": self.interval_s, "cpus": self.cpus,
            "cpu_spread": self.cpu_spread, "copy_spread": self.copy_spread,
            "cpu_rate": stats([s.cpu_rate for s in self.samples]),
            "copy_gbps": stats([s.copy_gbps for s in self.samples]),
            "samples": [asdict(s) for s in self.samples],
        }


def summarise(samples: list[Sample], seconds: float, interval_s: float) -> Steadiness:
    cpus = sorted({s.cpu for s in samples})
    return Steadiness(seconds, interval_s, cpus, sorted(samples, key=lambda s: (s.t, s.cpu)))


def probe(seconds: float = 10.0, cpus: list[int] | None = None, interval_s: float = 0.5) -> Steadiness:
    """Run the probe on ``cpus`` (default: every CPU this process may use) at once for ``seconds``."""
    if not 1.0 <= seconds <= MAX_SECONDS:
        raise UserError(f"steadiness {seconds:g} s: allowed 1 to {MAX_SECONDS:g} seconds")
    if not 0.05 <= interval_s <= seconds / 2:
        raise UserError(f"steadiness interval_s {interval_s:g}: allowed 0.05 to half the probe ({seconds / 2:g})")
    allowed = sorted(os.sched_getaffinity(0))
    cpus = allowed if cpus is None else sorted(set(cpus))
    bad = [c for c in cpus if c not in allowed]
    if bad or not cpus:
        raise UserError(f"steadiness cpus {bad or cpus}: allowed {','.join(map(str, allowed))}")
    start = time.time() + 0.5  # every worker starts together, after its imports
    workers = [subprocess.Popen([sys.executable, "-m", "labctl.steadiness", str(cpu), repr(seconds), repr(interval_s),
                                 repr(start)], stdout=subprocess.PIPE, text=True) for cpu in cpus]
    samples: list[Sample] = []
    try:
        for worker in workers:
            out, _ = worker.communicate(timeout=seconds + 30)
            if worker.returncode != 0:
                raise RuntimeError(f"steadiness worker exited with {worker.returncode}")
            samples += [Sample(**json.loads(line)) for line in out.splitlines() if line.strip()]
    finally:
        for worker in workers:  # interrupted or failed: no worker outlives the probe
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)
    return summarise(samples, seconds, interval_s)


def _worker(cpu: int, seconds: float, interval_s: float, start: float) -> None:
    os.sched_setaffinity(0, {cpu})
    src = np.ones(_COPY_BYTES // 8)
    dst = np.empty_like(src)
    half = interval_s / 2
    time.sleep(max(0.0, start - time.time()))
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        began = time.perf_counter()
        loops = 0
        while time.perf_counter() - began < half:
            x = 0
            for i in range(_CPU_LOOP):
                x += i * i
            loops += 1
        cpu_rate = loops / (time.perf_counter() - began)
        began = time.perf_counter()
        copies = 0
        while time.perf_counter() - began < half:
            np.copyto(dst, src)
            copies += 1
        copy_gbps = copies * _COPY_BYTES / (time.perf_counter() - began) / 1e9
        print(json.dumps({"t": round(time.perf_counter() - t0, 3), "cpu": cpu, "cpu_rate": cpu_rate,
                          "copy_gbps": copy_gbps}), flush=True)


if __name__ == "__main__":
    try:
        _worker(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    except (KeyboardInterrupt, BrokenPipeError):  # the probe was interrupted: its parent reports it
        sys.exit(130)
