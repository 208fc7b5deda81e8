"""What labgen answers over its control socket, as typed records: the trial's port and stream counts and
latency percentiles (:class:`LabgenResult`), its clock (:class:`TrialClock`), the send gaps it recorded
(:class:`Gap`), the per-bin series (:class:`SeriesBin`) and a window's counts (:class:`WindowCounts`).
:mod:`labctl.dpdk.labgen` runs the process and asks; this module only reads its replies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Percentiles:
    """A histogram summary in microseconds (labgen keeps 16 sub-buckets per power of two of ns: a
    percentile is the middle of its bucket, within 6.25% of the true value)."""

    count: int
    min_us: float
    mean_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    p999_us: float
    max_us: float

    @classmethod
    def from_ns(cls, d: dict[str, Any]) -> "Percentiles":
        us = {key: int(d.get(key, 0)) / 1000.0 for key in ("min", "mean", "p50", "p90", "p99", "p999", "max")}
        return cls(int(d.get("count", 0)), us["min"], us["mean"], us["p50"], us["p90"], us["p99"], us["p999"], us["max"])


@dataclass(frozen=True)
class PortCounts:
    """One port's counts: what it sent (``lost``/``reordered``/``duplicate`` are of the frames it sent)
    and what it received; per queue as lists."""

    offered: int
    sent: int
    tx_dropped: int
    unsent: int
    rx: int
    lost: int
    reordered: int
    duplicate: int
    q_tx: list[int]
    q_tx_dropped: list[int]
    q_rx: list[int]


@dataclass(frozen=True)
class StreamCounts:
    """One stream (a flow of a sending port), exact once the trial is done: ``sent`` counts the frames
    the driver took, ``received`` the distinct ones that came back, ``lost = sent - received``."""

    port: int
    flow: int
    sent: int
    received: int
    lost: int
    reordered: int
    duplicate: int


@dataclass(frozen=True)
class LabgenResult:
    """One trial's result. Counts are over the measured phase, summed over sending ports.

    ``offered`` frames were handed to the driver: ``sent`` it took, ``tx_dropped`` it refused (the
    receiving ring was full: loss the device under test caused). ``lost`` frames were sent and never
    received; ``loss_count = tx_dropped + lost``. Rates: ``intended_pps`` is what was asked (rate times
    sending ports), ``achieved_pps`` what the generator handed to the driver per second of the measured
    window, ``sent_pps`` and ``received_pps`` what the driver took and what came back."""

    trial: int
    rate_pps: int
    sending_ports: int
    frames_per_port: int
    window_s: float
    offered: int
    sent: int
    tx_dropped: int
    unsent: int
    received: int
    lost: int
    reordered: int
    duplicate: int
    stray: int
    early: int  # measured bursts sent before their due time: labgen's self-check, always 0
    valid: bool
    reason: str
    latency: Percentiles
    lateness: Percentiles
    late_end_us: float
    late_limit_us: float
    stall_us: float
    shifts: int = 0  # pauses the schedule was shifted by in the measured phase (workload.pacing shift)
    paused_s: float = 0.0  # their sum: left out of window_s
    ports: dict[int, PortCounts] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def intended_pps(self) -> float:
        return float(self.rate_pps * self.sending_ports)

    def _per_s(self, count: int) -> float:
        return count / self.window_s if self.window_s > 0 else 0.0

    @property
    def achieved_pps(self) -> float:
        return self._per_s(self.offered)

    @property
    def achieved_rate_pps(self) -> float:
        """achieved_pps per sending port, comparable with ``rate_pps``."""
        return self.achieved_pps / self.sending_ports if self.sending_ports else 0.0

    @property
    def sent_pps(self) -> float:
        return self._per_s(self.sent)

    @property
    def received_pps(self) -> float:
        return self._per_s(self.received)

    @property
    def loss_count(self) -> int:
        return self.tx_dropped + self.lost

    @property
    def loss_ratio(self) -> float | None:
        return self.loss_count / self.offered if self.offered else None

    @property
    def pacing_error(self) -> float | None:
        """achieved / intended - 1 (None for unpaced trials)."""
        return self.achieved_rate_pps / self.rate_pps - 1 if self.rate_pps and self.sending_ports else None

    @classmethod
    def from_stats(cls, stats: dict[str, Any]) -> "LabgenResult":
        ports = {}
        for key, p in (stats.get("port") or {}).items():
            if not p.get("active") and not p.get("rx"):
                continue
            ports[int(key)] = PortCounts(*(int(p.get(name, 0)) for name in (
                "offered", "sent", "tx_dropped", "unsent", "rx", "lost", "reordered", "duplicate")),
                q_tx=list(p.get("q_tx", [])), q_tx_dropped=list(p.get("q_tx_dropped", [])), q_rx=list(p.get("q_rx", [])))
        lateness = stats.get("lateness_ns") or {}
        count = {name: int(stats.get(name, 0)) for name in (
            "trial", "rate", "sending_ports", "frames", "offered", "sent", "tx_dropped", "unsent", "unique", "lost",
            "reordered", "duplicate", "stray", "early")}
        return cls(trial=count["trial"], rate_pps=count["rate"], sending_ports=count["sending_ports"],
                   frames_per_port=count["frames"], window_s=int(stats.get("window_ns", 0)) / 1e9,
                   offered=count["offered"], sent=count["sent"], tx_dropped=count["tx_dropped"], unsent=count["unsent"],
                   received=count["unique"], lost=count["lost"], reordered=count["reordered"],
                   duplicate=count["duplicate"], stray=count["stray"], early=count["early"],
                   valid=bool(stats.get("valid")),
                   reason=str(stats.get("reason", "")), latency=Percentiles.from_ns(stats.get("latency_ns") or {}),
                   lateness=Percentiles.from_ns(lateness), late_end_us=int(lateness.get("end", 0)) / 1000.0,
                   late_limit_us=int(lateness.get("limit", 0)) / 1000.0,
                   stall_us=int(stats.get("stall_ns", 0)) / 1000.0, shifts=int(stats.get("shifts", 0)),
                   paused_s=int(stats.get("paused_ns", 0)) / 1e9, ports=ports, raw=stats)


@dataclass(frozen=True)
class TrialClock:
    """A trial's TSC against CLOCK_MONOTONIC (``time.monotonic_ns()``): ``arm_tsc``/``arm_mono_ns`` read
    together when the trial was armed, ``ref_tsc``/``ref_mono_ns`` read together later (``/labgen/clock``).
    The rate between them is measured over that span (DPDK 22.11 rounds its TSC frequency estimate to 10 MHz,
    lib/eal/common/eal_common_timer.c; 0.2% off would be 3.6 s over 30 minutes); below 0.5 s, ``hz`` is used."""

    arm_tsc: int
    arm_mono_ns: int
    ref_tsc: int
    ref_mono_ns: int
    hz: int

    @property
    def ns_per_cycle(self) -> float:
        span = self.ref_tsc - self.arm_tsc
        if span > self.hz // 2 and self.ref_mono_ns > self.arm_mono_ns:
            return (self.ref_mono_ns - self.arm_mono_ns) / span
        return 1e9 / self.hz

    def mono_ns(self, tsc: int) -> float:
        """CLOCK_MONOTONIC ns of a TSC stamp."""
        return self.arm_mono_ns + (tsc - self.arm_tsc) * self.ns_per_cycle

    def tsc(self, mono_ns: float) -> float:
        """The TSC at a CLOCK_MONOTONIC time."""
        return self.arm_tsc + (mono_ns - self.arm_mono_ns) / self.ns_per_cycle

    @classmethod
    def of(cls, stats: dict[str, Any], clock: dict[str, Any]) -> "TrialClock":
        return cls(int(stats.get("arm_tsc", 0)), int(stats.get("arm_mono_ns", 0)), int(clock["tsc"]),
                   int(clock["mono_ns"]), int(clock.get("hz") or stats.get("hz") or 1))


@dataclass(frozen=True)
class Gap:
    """A run of missing frames (``log`` lost: numbers ``stream`` skipped; refused: frames sending port
    ``stream``'s driver did not take), between the send stamps ``before_tsc`` and ``after_tsc`` of the frames
    that got through on either side (``head``: none before it, ``before_tsc`` 0; ``tail``: it lasted to the
    end of sending). ``missing`` = count - filled (frames that arrived late after all)."""

    log: str
    before_tsc: int
    after_tsc: int
    count: int
    filled: int
    stream: int
    head: bool
    tail: bool

    @property
    def missing(self) -> int:
        return max(self.count - self.filled, 0)


@dataclass(frozen=True)
class SeriesBin:
    """One time bin: frames whose send stamp fell in it, offered (handed to the driver), sent (taken by it),
    received (unique), and their latency (ns; 0 when none arrived)."""

    index: int
    offered: int
    sent: int
    received: int
    p50_ns: int
    p99_ns: int
    max_ns: int

    @property
    def lost(self) -> int:
        """offered - received: refused by the driver or lost on the way (exact once the bin has drained)."""
        return max(self.offered - self.received, 0)


@dataclass(frozen=True)
class WindowCounts:
    """Time bins merged: offered, sent, received and the latency of what was received."""

    first: int
    end: int
    offered: int
    sent: int
    received: int
    latency: Percentiles

    @property
    def lost(self) -> int:
        return max(self.offered - self.received, 0)
