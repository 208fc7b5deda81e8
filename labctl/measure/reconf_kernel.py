"""``labctl reconf`` on a kernel guest: the live change under iperf3's numbered UDP datagrams.

The same trial as :mod:`labctl.measure.reconf` (warm-up, the no-change window, the change at a known time,
the window after it; the cost net of the no-change window, the implied time lost, the outages, what the change
did read back), counted by the guest's iperf3 server instead of labgen (:mod:`labctl.workload.udp`): loss per
0.1 s interval, outages located to an interval, the test's start known within the client's connection set-up
(``details.reconf.align_s``). The host's iperf3 client sends to the guest's server on the lab's first session
port; both are stopped after the trial (the server in the guest by KILL, the client by its ``LABCTL_TAG``).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, cast

from labctl.events import OnEvent, notify
from labctl.errors import WorkloadError
from labctl.measure.live_changes import LiveAction
from labctl.measure.load_point import MIN_WARMUP_S, sleep_until
from labctl.measure.reconf_change import ChangeMade, change_warnings, describe_change
from labctl.measure.trial import Trial
from labctl.profile.rates import Rate
from labctl.results.record import Metrics
from labctl.workload import udp
from labctl.workload.timeline import Outage

if TYPE_CHECKING:
    from labctl.lab.interface import KernelLab

RESULT_GRACE_S = 30.0


def _outages(intervals: list[udp.Interval], start_mono: float, c0: int) -> list[Outage]:
    """Runs of intervals with lost datagrams, from the change's start."""
    out: list[Outage] = []
    for i in intervals:
        if not i.lost:
            continue
        start, end = (start_mono + i.start_s * 1e9 - c0) / 1e9, (start_mono + i.end_s * 1e9 - c0) / 1e9
        if out and abs(out[-1].end_s - start) < udp.INTERVAL_S / 2:
            last = out[-1]
            out[-1] = Outage(last.start_s, end, last.lost + i.lost, 0, 1)
        else:
            out.append(Outage(start, end, i.lost, 0, 1))
    return out


def measure_kernel_change(trial: Trial, actions: list[LiveAction], rate: Rate, window_s: float,
                          on_event: OnEvent | None = None) -> None:
    """The reconf trial on a kernel guest (see the module's docstring); fills ``trial.record``."""
    lab = cast("KernelLab", trial.lab)
    record, phase, plan = trial.record, trial.phase, lab.plan
    assert plan.tcp is not None
    record.warnings.extend(lab.record_warnings())
    record.details.update(lab.details())
    warm = max(math.ceil(plan.warmup_s), math.ceil(MIN_WARMUP_S))
    seconds = warm + math.ceil(2 * window_s)
    port = plan.tcp.ports[0]
    change = ChangeMade(actions)
    trial.busy.start()
    phase("warm-up")
    lab.start_servers("guest", [port], [udp.server_argv(lab.guest_addr, port)])
    launch = time.monotonic_ns()
    lab.start_clients("host", [port], [udp.client_argv(lab.guest_addr, port, rate.value, seconds)])
    try:
        sleep_until(launch + (warm + window_s) * 1e9)
        phase("change")
        change.make(lab)
        notify(on_event, "live", lab=plan.name, message=f"changed in {(change.c1 - change.c0) / 1e6:.1f} ms",
               data={"kind": "reconf", "step": "changed", "took_s": (change.c1 - change.c0) / 1e9})
        phase("measure")
        outputs = lab.client_outputs(seconds + RESULT_GRACE_S)
        ended = time.monotonic_ns()
        change.read(lab)
    finally:
        lab.stop_sessions()
        change.cleanup(lab)
    trial.busy.check("window")
    trial.note_busy()
    if port not in outputs:
        raise WorkloadError("iperf3 UDP: the client gave no output")
    test = udp.parse(outputs[port])
    _fill(trial, test, rate.value, launch, ended, change, window_s, warm)


def _fill(trial: Trial, test: udp.UdpTest, rate_pps: float, launch: int, ended: int, change: ChangeMade,
          window_s: float, warm: int) -> None:
    lab, record = trial.lab, trial.record
    # the test began after the launch, and at the latest its length before the client's exit
    latest = ended - test.seconds * 1e9
    start_mono = max(float(launch), latest)
    c0 = change.c0
    at = max(int((c0 - start_mono) / 1e9 / udp.INTERVAL_S), 0)  # the interval the change began in
    first = int(round(warm / udp.INTERVAL_S))
    n = max(at - first, 0)
    quiet, after = test.intervals[first:at], test.intervals[at:at + n]
    lost_q, lost_a = sum(i.lost for i in quiet), sum(i.lost for i in after)
    baseline = lost_q * (len(after) / len(quiet)) if quiet else 0.0
    net = lost_a - baseline
    lost_packets = max(int(round(net)), 0)
    found = _outages(test.intervals, start_mono, c0)
    span_s = len(after) * udp.INTERVAL_S  # the window after the change, from its start
    after_change = [o for o in found if o.end_s > 0 and o.start_s < span_s]
    received = sum(i.packets for i in test.intervals)
    record.metrics = Metrics(offered_mpps=rate_pps / 1e6, achieved_mpps=test.sent / test.seconds / 1e6 if test.seconds
                             else None, mpps=received / test.seconds / 1e6 if test.seconds else None,
                             loss_ratio=test.lost / test.sent if test.sent else None, rx_packets=received,
                             tx_packets=test.sent, lost=test.lost, window_s=test.seconds, lost_packets=lost_packets,
                             time_lost_s=lost_packets / rate_pps, outage_count=len(after_change),
                             longest_outage_s=max((o.length_s for o in after_change), default=0.0))

    def where(o: Outage) -> str:
        if o.start_s >= span_s:
            return "later"
        return "before" if o.end_s <= 0 else ("after" if o.start_s >= 0 else "across")

    def offered(intervals: list[udp.Interval]) -> int:
        return sum(i.packets + i.lost for i in intervals)

    t0 = (start_mono - c0) / 1e9
    record.details["reconf"] = {
        "engine": "iperf3 UDP (numbered datagrams, counted by the guest's server per 0.1 s)",
        "change": describe_change(change.actions), "labels": [a.label for a in change.actions],
        "offered_pps": rate_pps, "window_s": window_s, "bin_s": udp.INTERVAL_S, "align_s": round((latest - launch) / 1e9, 4),
        "change_at_s": round((c0 - start_mono) / 1e9 - warm, 4), "change_took_s": round((change.c1 - c0) / 1e9, 6),
        "applied": change.applied, "read_back": change.read_back,
        "windows": {"before": {"s": round(len(quiet) * udp.INTERVAL_S, 4), "offered": offered(quiet), "lost": lost_q},
                    "after": {"s": round(len(after) * udp.INTERVAL_S, 4), "offered": offered(after), "lost": lost_a},
                    "baseline_lost": round(baseline, 2), "net_lost": round(net, 2)},
        "latency": {"before": {"note": "not measured (iperf3 reports jitter)"},
                    "after": {"note": "not measured (iperf3 reports jitter)"}, "after_from_s": 0.0},
        "outages": [{**o.to_dict(), "window": where(o)} for o in found],
        "series": {"t0_s": round(t0, 6), "bin_s": udp.INTERVAL_S,
                   "offered": [i.packets + i.lost for i in test.intervals],
                   "received": [i.packets for i in test.intervals]},
    }
    if net < 0:
        record.details["reconf"]["note"] = (f"the no-change window lost more ({lost_q}) than the window after the "
                                            f"change ({lost_a}): the change cost nothing measurable")
    if test.seconds and test.sent < 0.98 * rate_pps * test.seconds:
        record.warnings.append(f"iperf3 sent {test.sent / test.seconds:.0f} datagrams a second of the {rate_pps:.0f} "
                               "asked: the load was lower than asked")
    record.warnings.extend(change_warnings(change, window_s, after_change))
    record.env = lab.environment(lab.pins(), False)
    record.details["iperf3"] = {"seconds": test.seconds, "sent": test.sent, "lost": test.lost,
                                "intervals": len(test.intervals)}
