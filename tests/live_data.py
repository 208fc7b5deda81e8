"""Synthetic reconf and soak trials whose answers are known: a 1 GHz TSC with CLOCK_MONOTONIC 4 s ahead of it,
labgen's gaps, windows and time bins served from plain lists (the unit tests of labctl.measure.reconf and
.soak, and the page's)."""

from __future__ import annotations

from labctl.dpdk.labgen import TrialSpec
from labctl.dpdk.labgen_replies import Gap, Percentiles, SeriesBin, TrialClock, WindowCounts
from labctl.host.monitor import MonitorReport
from labctl.host.stalls import HostSecond
from labctl.measure.live_changes import GuestPins
from labctl.measure.reconf import ChangeMade, _fill
from labctl.measure.soak import _compose, _Soak
from labctl.measure.trial import Trial
from labctl.results.record import Environment, TrialRecord

BIN = 10_000_000  # cycles = ns


def mono(tsc: float) -> float:
    return tsc + 4e9


class SynthGen:
    """labgen after a trial armed at TSC 1e9, measuring from 2e9 (mono 6 s) to 4e9 (mono 8 s)."""

    def __init__(self, lost: dict[int, int], gaps: list[Gap], latency_us: dict[int, float] | None = None):
        self.received = [1000 - lost.get(i, 0) for i in range(400)]
        self._gaps = gaps
        self.latency_us = latency_us or {}

    def trial_clock(self, stats):
        return TrialClock(1_000_000_000, 5_000_000_000, 11_000_000_000, 15_000_000_000, 1_000_000_000)

    def window(self, first: int, end: int) -> WindowCounts:
        bins = range(first, end)
        p99 = max((self.latency_us.get(i, 20.0) for i in bins), default=0.0)
        received = sum(self.received[i] for i in bins)
        return WindowCounts(first, end, 1000 * len(bins), 1000 * len(bins), received,
                            Percentiles(received, 1.0, 5.0, 5.0, 8.0, p99, p99, p99 * 2))

    def series(self, first: int, end: int) -> list[SeriesBin]:
        return [SeriesBin(i, 1000, 1000, self.received[i], 5000, 20000, 40000) for i in range(first, end)]

    def gaps(self, log: str):
        return [g for g in self._gaps if g.log == log], 0


STATS = {"state": "done", "trial": 3, "rate": 50_000, "sending_ports": 2, "frames": 100_000, "window_ns": 2_000_000_000,
         "offered": 200_000, "sent": 200_000, "unique": 194_995, "lost": 5_005, "valid": 1, "reason": "kept up",
         "latency_ns": {"count": 194_995, "min": 1000, "mean": 5000, "p50": 5000, "p90": 8000, "p99": 20000,
                        "p999": 30000, "max": 40000},
         "arm_tsc": 1_000_000_000, "run_tsc": 2_000_000_000, "last_tsc": 4_000_000_000, "bin_cycles": BIN}


class FakeLab:
    pollers = 1

    def environment(self, pins, shared):
        return Environment(host="h", lab="embedded", accel="none", pins=pins)

    def pins(self):
        return {"guest.lcore-worker-1": "1"}


def trial() -> Trial:
    return Trial(TrialRecord(config={}), FakeLab(), None, lambda _name: None)  # type: ignore[arg-type]


def change_at(c0_tsc: float, took_ms: float = 20.0) -> ChangeMade:
    change = ChangeMade([GuestPins({0: frozenset({1})})])
    change.c0, change.c1 = int(mono(c0_tsc)), int(mono(c0_tsc) + took_ms * 1e6)
    change.applied = {"live pins: vCPU 0 -> CPUs 1": ["pinned"]}
    change.read_back = {"live pins: vCPU 0 -> CPUs 1": {"vcpu0": "1", "emulator": "0-1"}}
    return change


def gap(log: str, before_tsc: float, after_tsc: float, count: int, stream: int = 0) -> Gap:
    return Gap(log, int(before_tsc), int(after_tsc), count, 0, stream, False, False)


def reconf_record(run_id: int | None = None) -> TrialRecord:
    """A reconf of a vCPU pin at 100 kpps: 5000 frames refused in a 50 ms outage after the change, 5 lost
    before it; 4995 lost to the change."""
    lost = {150: 5, 200: 500, 201: 1000, 202: 1000, 203: 1000, 204: 1000, 205: 500}
    gaps = [gap("refused", 3.00499e9, 3.05501e9, 2500, p) for p in (0, 1)] + [gap("lost", 2.5e9, 2.50006e9, 5, 3)]
    t = trial()
    _fill(t, SynthGen(lost, gaps), STATS, None, change_at(3.003e9), 1.0, MonitorReport())
    t.record.run_id = run_id
    t.record.config = {"name": "guest", "workload.rate": "0.1Mpps", "reconf.change": "guest.pinning.vcpus.0=1"}
    return t.record


# --- soaks: bins of 1 s from the start (TSC 2e9, mono 6 s) ------------------------------------------

START_TSC = 2_000_000_000  # the measured window's start: mono 6 s


class SoakGen:
    def __init__(self, gaps):
        self._gaps = gaps

    def trial_clock(self, stats):
        return TrialClock(1_000_000_000, 5_000_000_000, 200_000_000_000, 204_000_000_000, 1_000_000_000)

    def gaps(self, log):
        return [g for g in self._gaps if g.log == log], 0


class Sampler:
    def __init__(self, seconds):
        self._seconds = seconds

    def seconds(self):
        return self._seconds


def soak(bins: int, lost: dict[int, int], gaps: list[Gap], host: list[HostSecond]) -> _Soak:
    s = _Soak.__new__(_Soak)
    s.gen, s.sampler, s.on_event = SoakGen(gaps), Sampler(host), None
    s.spec = TrialSpec(rate_pps=500, duration_s=120)
    s.duration_s = 120.0
    s.clock = s.gen.trial_clock(None)
    s.run_mono, s.bin_cycles, s.first_bin = 6_000_000_000.0, 1_000_000_000, 1
    s.bins = [SeriesBin(1 + i, 1000, 1000, 1000 - lost.get(i, 0), 5000, 9000, 20000) for i in range(bins)]
    return s


def event(t_s: float, ms: float, count: int) -> Gap:
    before = int(START_TSC + t_s * 1e9)
    return Gap("lost", before, int(before + ms * 1e6), count, 0, 0, False, False)


def seconds(stall_at: set[int], n: int = 120) -> list[HostSecond]:
    # the sample taken at the end of second t (mono 6 s + t + 1)
    return [HostSecond(int(6e9 + (t + 1) * 1e9), 80.0 if t in stall_at else 1.0, 3, None) for t in range(n)]


def soak_record(run_id: int | None = None) -> TrialRecord:
    """A soak of 120 s at 1000 frames a second: 40 lost at 30.2 s, during a host stall, and 5 at 70.5 s."""
    s = soak(120, {30: 40, 70: 5}, [event(30.2, 4, 40), event(70.5, 0.5, 5)], seconds({30, 100}))
    record = TrialRecord(run_id=run_id, config={"name": "quick", "workload.rate": "0.001Mpps",
                                                "workload.duration_s": 120.0})
    _compose(s, record, 120.0, True, None, None)
    return record
