"""The forwarding workload measured by labgen: a paced trial's counts, and the guest's, as metrics.

labgen counts for itself: what it offered, what the driver took (``sent``), what it refused
(``tx_dropped``: the guest's receive ring was full), what came back (unique sequence numbers),
``lost = sent - received``, reorders, duplicates and latency (TSC stamped just before the burst was
handed to the driver, read on receive in the same process). The guest forwarder's own counters
(testpmd's forward statistics, taken after the warm-up and after the drain) say where the lost frames
went: TX-dropped in the guest is its transmit ring full (the host side did not drain it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from labctl.dpdk.labgen_replies import LabgenResult, Percentiles
from labctl.dpdk.testpmd import FwdStats
from labctl.host.fingerprint import cpu_hz
from labctl.results.record import Metrics
from labctl.workload.forward import DROP_NAMES, GuestCounters, queue_details

if TYPE_CHECKING:
    from labctl.dpdk.labgen import TrialSpec
    from labctl.host.monitor import MonitorReport, ThreadMonitor
    from labctl.lab.interface import PacedLab
    from labctl.lab.plan import GeneratorPlan
    from labctl.profile.rates import Rate


def paced_metrics(result: LabgenResult, before: GuestCounters, after: GuestCounters, frame_size: int,
                  monitor_cpu: dict[str, float], guest_cpu_s: float | None,
                  host_side: str = "vhost-user") -> tuple[Metrics, dict[str, Any]]:
    window = result.window_s or 1e-9
    g_fwd = {p: after.fwd[p].minus(before.fwd.get(p, FwdStats(0, 0, 0, 0))) for p in after.fwd}
    guest_tx_dropped = sum(s.tx_dropped for s in g_fwd.values())
    lat = result.latency
    intended = result.intended_pps if result.rate_pps else result.achieved_pps
    metrics = Metrics(
        mpps=result.received / window / 1e6,
        gbps=result.received * frame_size * 8 / window / 1e9,
        offered_mpps=intended / 1e6,
        achieved_mpps=result.achieved_pps / 1e6,
        loss_ratio=result.loss_ratio,
        rx_packets=result.received,
        tx_packets=result.sent,
        tx_dropped=result.tx_dropped,
        guest_tx_dropped=guest_tx_dropped,
        lost=result.lost,
        reordered=result.reordered,
        duplicate=result.duplicate,
        window_s=result.window_s,
        cpu=monitor_cpu,
        valid=result.valid,
    )
    latency_metrics(metrics, lat)
    into_guest, out_of_guest = DROP_NAMES[host_side]
    metrics.drops = {into_guest: result.tx_dropped, out_of_guest: guest_tx_dropped,
                     "unaccounted": max(result.lost - guest_tx_dropped, 0)}
    if len(result.ports) >= 2:
        # port 1 receives what port 0 sent, through the guest, and back
        rx = {p: counts.rx for p, counts in result.ports.items()}
        metrics.mpps_0to1 = rx.get(1, 0) / window / 1e6
        metrics.mpps_1to0 = rx.get(0, 0) / window / 1e6
        metrics.gbps_0to1 = rx.get(1, 0) * frame_size * 8 / window / 1e9
        metrics.gbps_1to0 = rx.get(0, 0) * frame_size * 8 / window / 1e9
    metrics.queue_shares, per_queue = queue_details(before.ports, after.ports)
    forwarded = sum(s.tx_packets for s in g_fwd.values())
    hz = cpu_hz()
    if guest_cpu_s and forwarded and hz:
        metrics.cycles_per_packet = guest_cpu_s * hz / forwarded
    details = {"per_queue": per_queue, "guest_fwd": {p: s.__dict__ for p, s in g_fwd.items()},
               "labgen": {"valid": result.valid, "reason": result.reason, "rate_pps_per_port": result.rate_pps,
                          "sending_ports": result.sending_ports, "late_end_us": result.late_end_us,
                          "late_limit_us": result.late_limit_us, "stall_us": result.stall_us,
                          "shifts": result.shifts, "paused_us": result.paused_s * 1e6,
                          "lateness_p99_us": result.lateness.p99_us, "unsent": result.unsent,
                          "stray": result.stray,
                          "ports": {p: {"offered": c.offered, "sent": c.sent, "tx_dropped": c.tx_dropped,
                                        "rx": c.rx, "lost": c.lost, "q_tx": c.q_tx, "q_rx": c.q_rx}
                                    for p, c in result.ports.items()}}}
    return metrics, details


def latency_metrics(metrics: Metrics, lat: Percentiles) -> None:
    """labgen's latency percentiles into the record's metrics (left unset when nothing was received)."""
    if lat.count:
        metrics.latency_min_us, metrics.latency_mean_us = lat.min_us, lat.mean_us
        metrics.latency_p50_us, metrics.latency_p90_us = lat.p50_us, lat.p90_us
        metrics.latency_p99_us, metrics.latency_p999_us, metrics.latency_max_us = lat.p99_us, lat.p999_us, lat.max_us


def trial_spec(gen: "GeneratorPlan", rate_pps_per_port: float, duration_s: float, warmup_s: float) -> "TrialSpec":
    """labgen's trial for the plan's generator: frame size, burst, flows and pacing from the plan."""
    from labctl.dpdk.labgen import TrialSpec

    return TrialSpec(rate_pps=rate_pps_per_port, duration_s=duration_s, warmup_s=warmup_s, drain_s=0.2,
                     frame_size=gen.frame_size, burst=gen.burst, flows=gen.flows, shift_s=gen.shift_s)


class PacedRunner:
    """Paced trials on a lab whose host side is labgen: the rate a profile asks for resolved against the
    lab (``max``, a rate, or a share of the measured maximum), and one trial with the guest's counters
    taken after the warm-up and after the drain. ``lab`` (:class:`labctl.lab.interface.PacedLab`) gives
    ``generator`` (a started Labgen), ``guest_counters()``, ``window_started()`` and ``plan``."""

    MAX_PROBE_S = 2.0  # the unpaced trial that measures the maximum a share refers to

    def __init__(self, lab: PacedLab):
        self.lab = lab
        self._max_pps: float | None = None

    @property
    def ports(self) -> int:
        return len(self.lab.plan.nics)

    def spec(self, rate_pps_per_port: float, duration_s: float, warmup_s: float) -> "TrialSpec":
        return trial_spec(self.lab.plan.generator, rate_pps_per_port, duration_s, warmup_s)

    def max_forwarded_pps(self) -> float:
        """What the lab forwarded (all ports) at the most the generator offers: an unpaced trial."""
        if self._max_pps is None:
            plan = self.lab.plan
            result = self.lab.generator.run_trial(self.spec(0, min(self.MAX_PROBE_S, plan.duration_s), 0.5))
            self._max_pps = result.received_pps
        return self._max_pps

    def rate_per_port(self, rate: Rate) -> float:
        """labgen's per-port rate for a profile's Rate (0: as fast as possible)."""
        if rate.kind == "max":
            return 0.0
        total = rate.value if rate.kind == "pps" else rate.value / 100.0 * self.max_forwarded_pps()
        return total / self.ports

    def trial(self, spec: TrialSpec, monitor: ThreadMonitor, phase: Callable[[str], None]
              ) -> tuple[LabgenResult, GuestCounters, GuestCounters, MonitorReport]:
        """One paced trial: (labgen's result, guest counters before and after the window, the monitor's
        report). A cancel or SIGTERM stops the trial's sending first."""
        from labctl import signals

        gen = self.lab.generator
        gen.start_trial(spec)
        try:
            phase("warm-up")
            signals.sleep(spec.warmup_s)
            before = self.lab.guest_counters()
            self.lab.window_started()
            monitor.start()
            phase("measure")
            signals.sleep((spec.sending_s() or 0.0) - spec.warmup_s + spec.drain_s / 2)
            stats = gen.wait_done(2 * spec.expected_s() + 10.0)
        except BaseException:
            gen.stop_quietly()
            raise
        report = monitor.stop()
        after = self.lab.guest_counters()
        return LabgenResult.from_stats(stats), before, after, report
