"""How steady is this host's speed? A probe for shared and oversubscribed hosts.

A cloud guest (or a nested VM) can lose half its speed for tens of seconds while a neighbour on the
physical host is busy, and its kernel may show no steal time at all. Forwarding rates measured then
fall into two bands, in runs, and no number of repeats in one sitting makes an A/B of 2% trustworthy.

:func:`probe` measures that directly, with nothing else running: one process pinned on each CPU
does two fixed pieces of work in every interval and counts how many it completes:

- ``cpu``: an integer loop (registers and L1 only): falls when the physical core is time-shared or its
  SMT sibling is busy;
- ``copy``: copying an 8 MiB buffer (beyond L2, inside a shared L3): falls with memory-bandwidth and
  last-level-cache contention, which is what a DPDK forwarding loop with large rings feels.

The workers keep one clock: interval k starts at the same instant on every CPU, and all copy in its
second half, so the probe's own CPUs compete for the memory bus by the same amount in every interval.

:class:`Steadiness` summarises the samples over time: each CPU's rates are divided by that CPU's
median (a CPU that is steadily slower than another is not unsteady), then pooled; the spread is
``p90 / p10 - 1`` of those. The verdict is ``steady`` when both spreads are at most
:data:`STEADY_SPREAD`, ``unsteady`` otherwise, ``unknown`` with fewer than :data:`MIN_SAMPLES`
samples per CPU. Differences between CPUs are reported on their own (``cpu_medians``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from labctl.errors import ProbeError, UserError

__all__ = ["Sample", "Steadiness", "probe", "summarise", "check_arguments", "unsteady_warning", "STEADY_SPREAD",
           "MIN_SECONDS", "MAX_SECONDS", "MIN_SAMPLES", "UNSTEADY_WARNING"]

#: How a trial's warning starts when the host was measured unsteady before its sweep (the advisor counts them).
UNSTEADY_WARNING = "host unsteady before this sweep"

#: A rate whose p90 / p10 (over time) exceeds 1 + this is "unsteady"; a quiet host stays within a few per cent.
STEADY_SPREAD = 0.10

#: Shortest and longest probe accepted.
MIN_SECONDS = 1.0
MAX_SECONDS = 600.0

#: Samples per CPU below which no verdict is given.
MIN_SAMPLES = 8

#: Default interval: 0.5 s, shortened so that every CPU gives at least 10 samples.
DEFAULT_INTERVAL_S = 0.5

_COPY_BYTES = 8 << 20
_CPU_LOOP = 20_000


@dataclass(frozen=True)
class Sample:
    """One interval of one CPU: work units per second of each kind."""

    t: float  # seconds since the probe started
    cpu: int
    cpu_rate: float  # integer loops of _CPU_LOOP iterations per second
    copy_gbps: float  # GB/s copied


def _relative(samples: list[Sample], attr: str) -> list[float]:
    """Each sample's rate divided by its CPU's median rate."""
    out: list[float] = []
    for cpu in sorted({s.cpu for s in samples}):
        values = [getattr(s, attr) for s in samples if s.cpu == cpu]
        median = float(np.median(values))
        if median > 0:
            out += [v / median for v in values]
    return out


@dataclass
class Steadiness:
    seconds: float
    interval_s: float
    cpus: list[int]
    samples: list[Sample] = field(default_factory=list)

    def _enough(self) -> bool:
        return bool(self.cpus) and all(sum(s.cpu == c for s in self.samples) >= MIN_SAMPLES for c in self.cpus)

    def _spread(self, attr: str) -> float | None:
        if not self._enough():
            return None
        values = _relative(self.samples, attr)
        p10, p90 = np.percentile(values, [10, 90])
        return float(p90 / p10 - 1) if p10 > 0 else None

    @property
    def cpu_spread(self) -> float | None:
        """p90 / p10 - 1 of the integer-loop rate over time (each CPU against its own median)."""
        return self._spread("cpu_rate")

    @property
    def copy_spread(self) -> float | None:
        """p90 / p10 - 1 of the copy rate over time (each CPU against its own median)."""
        return self._spread("copy_gbps")

    def cpu_medians(self) -> dict[int, dict[str, float]]:
        """Each CPU's median rates: how the CPUs differ from one another (not counted as unsteadiness)."""
        return {c: {"cpu_rate": float(np.median([s.cpu_rate for s in self.samples if s.cpu == c])),
                    "copy_gbps": float(np.median([s.copy_gbps for s in self.samples if s.cpu == c]))}
                for c in self.cpus if any(s.cpu == c for s in self.samples)}

    @property
    def verdict(self) -> str:
        spreads = [self.cpu_spread, self.copy_spread]
        if any(s is None for s in spreads):
            return "unknown"
        return "steady" if max(spreads) <= STEADY_SPREAD else "unsteady"

    def describe(self) -> str:
        """One sentence a performance engineer can act on."""
        if self.verdict == "unknown":
            per_cpu = min((sum(s.cpu == c for s in self.samples) for c in self.cpus), default=0)
            return f"unknown: {per_cpu} samples per CPU, at least {MIN_SAMPLES} needed: probe for longer"
        rates = (f"integer-loop rate p10-p90 spread {self.cpu_spread:.0%}, memory copy {self.copy_spread:.0%} "
                 f"over {self.seconds:g} s on CPUs {','.join(map(str, self.cpus))}")
        if self.verdict == "steady":
            return f"steady: {rates}"
        return (f"unsteady: {rates}, while labctl ran nothing else: the host's speed changes under it "
                "(a shared or oversubscribed host, or other load); expect two-band results, interleave "
                "A/B trials and repeat 5 times or more")

    def trial_warning(self) -> str | None:
        """The warning every trial of a sweep carries when the host was unsteady before it, else None."""
        if self.verdict != "unsteady":
            return None
        return (f"{UNSTEADY_WARNING}: integer-loop rate spread {self.cpu_spread:.0%}, memory copy "
                f"{self.copy_spread:.0%} over {self.seconds:g} s (labctl doctor --steadiness)")

    def to_dict(self, samples: bool = True) -> dict:
        def stats(values: list[float]) -> dict:
            if not values:
                return {}
            p10, p50, p90 = np.percentile(values, [10, 50, 90])
            return {"min": float(min(values)), "p10": float(p10), "median": float(p50), "p90": float(p90),
                    "max": float(max(values))}

        data = {
            "verdict": self.verdict, "description": self.describe(), "seconds": self.seconds,
            "interval_s": self.interval_s, "cpus": self.cpus,
            "cpu_spread": self.cpu_spread, "copy_spread": self.copy_spread,
            "cpu_rate": stats([s.cpu_rate for s in self.samples]),
            "copy_gbps": stats([s.copy_gbps for s in self.samples]),
            "cpu_medians": {str(c): m for c, m in self.cpu_medians().items()},
        }
        if samples:
            data["samples"] = [asdict(s) for s in self.samples]
        return data


def unsteady_warning(warnings: list[str]) -> str | None:
    """The unsteady-host warning among a trial's warnings (see :meth:`Steadiness.trial_warning`), or None."""
    return next((w for w in warnings if w.startswith(UNSTEADY_WARNING)), None)


def summarise(samples: list[Sample], seconds: float, interval_s: float, cpus: list[int] | None = None) -> Steadiness:
    cpus = sorted({s.cpu for s in samples}) if cpus is None else sorted(cpus)
    return Steadiness(seconds, interval_s, cpus, sorted(samples, key=lambda s: (s.t, s.cpu)))


def check_arguments(seconds: float, cpus: list[int] | None = None, interval_s: float | None = None) -> tuple[list[int], float]:
    """Validate a probe request; returns (cpus, interval_s). UserError names the bad field."""
    if not MIN_SECONDS <= seconds <= MAX_SECONDS:
        raise UserError(f"steadiness {seconds:g} s: allowed {MIN_SECONDS:g} to {MAX_SECONDS:g} seconds")
    if interval_s is None:
        interval_s = min(DEFAULT_INTERVAL_S, seconds / 10)
    if not 0.05 <= interval_s <= seconds / MIN_SAMPLES:
        raise UserError(f"steadiness interval_s {interval_s:g}: allowed 0.05 to {seconds / MIN_SAMPLES:g} "
                        f"(at least {MIN_SAMPLES} samples per CPU)")
    allowed = sorted(os.sched_getaffinity(0))
    chosen = allowed if cpus is None else sorted(set(cpus))
    bad = [c for c in chosen if c not in allowed]
    if bad or not chosen:
        raise UserError(f"steadiness cpus {bad or chosen}: allowed {','.join(map(str, allowed))}")
    return chosen, interval_s


def _worker_argv(cpu: int, seconds: float, interval_s: float, start: float) -> list[str]:
    return [sys.executable, "-m", "labctl.host.steadiness", str(cpu), repr(seconds), repr(interval_s), repr(start)]


def probe(seconds: float = 10.0, cpus: list[int] | None = None, interval_s: float | None = None) -> Steadiness:
    """Run the probe on ``cpus`` (default: every CPU this process may use) at once for ``seconds``.

    Workers write their samples to files (no pipe can fill and stall one); whatever happens (a failed
    worker, Ctrl-C, SIGTERM raised as an exception), no worker outlives the call."""
    cpus, interval_s = check_arguments(seconds, cpus, interval_s)
    start = time.time() + 0.5 + 0.1 * len(cpus)  # one clock for every worker, after their imports
    workers: list[tuple[int, subprocess.Popen, tempfile._TemporaryFileWrapper, tempfile._TemporaryFileWrapper]] = []
    try:
        for cpu in cpus:
            out = tempfile.TemporaryFile(mode="w+")
            err = tempfile.TemporaryFile(mode="w+")
            workers.append((cpu, subprocess.Popen(_worker_argv(cpu, seconds, interval_s, start), stdout=out,
                                                  stderr=err, stdin=subprocess.DEVNULL), out, err))
        deadline = start + seconds + 30
        samples: list[Sample] = []
        for cpu, proc, out, err in workers:
            try:
                code = proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                raise ProbeError(f"steadiness probe: the worker on CPU {cpu} did not finish in {seconds + 30:g} s") from None
            if code != 0:
                err.seek(0)
                last = (err.read().strip().splitlines() or ["no message"])[-1]
                raise ProbeError(f"steadiness probe: the worker on CPU {cpu} exited with {code}: {last}")
            out.seek(0)
            try:
                samples += [Sample(**json.loads(line)) for line in out if line.strip()]
            except (ValueError, TypeError) as exc:
                raise ProbeError(f"steadiness probe: unreadable output from the worker on CPU {cpu}: {exc}") from None
    finally:
        for _cpu, proc, out, err in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            out.close()
            err.close()
    return summarise(samples, seconds, interval_s, cpus)


def _worker(cpu: int, seconds: float, interval_s: float, start: float) -> None:
    os.sched_setaffinity(0, {cpu})
    src = np.ones(_COPY_BYTES // 8)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch both buffers before the first interval
    for k in range(max(1, int(seconds / interval_s))):
        begin = start + k * interval_s
        middle, end = begin + interval_s / 2, begin + interval_s
        time.sleep(max(0.0, begin - time.time()))
        began, loops = time.time(), 0
        while True:  # at least once, even when this interval started late
            x = 0
            for i in range(_CPU_LOOP):
                x += i * i
            loops += 1
            if time.time() >= middle:
                break
        cpu_rate = loops / max(time.time() - began, 1e-6)
        time.sleep(max(0.0, middle - time.time()))
        began, copies = time.time(), 0
        while True:
            np.copyto(dst, src)
            copies += 1
            if time.time() >= end:
                break
        copy_gbps = copies * _COPY_BYTES / max(time.time() - began, 1e-6) / 1e9
        print(json.dumps({"t": round(begin - start, 3), "cpu": cpu, "cpu_rate": cpu_rate, "copy_gbps": copy_gbps}),
              flush=True)


def _main() -> int:
    try:
        _worker(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]))
    except KeyboardInterrupt:  # the probe was interrupted: its parent reports it
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(_main())
