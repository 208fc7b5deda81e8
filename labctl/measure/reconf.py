"""``labctl reconf``: what one live change of a running lab costs, at a paced load.

FD.io CSIT's reconfiguration tests hold a load at the NDR lower bound, make a change, and report the
"packets lost due to reconfig" and the "implied time lost" (lost packets divided by the offered rate; CSIT
methodology, "Reconfiguration Tests"). labctl does the same with labgen, whose frames carry a sequence
number and a send stamp, so each outage is also located in time and measured, not only estimated from a
count. One trial, in the one trial loop (:func:`labctl.measure.trial.trial_loop`)::

    warm-up (the profile's, at least 1 s, on the same schedule)
    -> the no-change window: W seconds (``--window``, 5 by default)
    -> the change, at a known time c0 on labctl's clock (time.monotonic_ns) right after that window
    -> the window after the change: the trial runs on for W seconds from the window's planned end -> drain

The time bins (10 ms, labgen's ``bin=``) count every frame by its send stamp. The no-change window is the
bins from the measured window's start up to the one the change began in; the window after the change is
that bin and as many more (fewer only when sending ended first: the no-change window's loss is then scaled to
its length). The *cost* is the loss after the change minus the loss without it, in the same trial: what the
host loses anyway at this load is not charged to the change. A negative difference (the quiet window lost
more) is a cost of 0, stated so. The time lost is the cost over the offered rate of all
ports. Every outage is a merged run of gaps (:mod:`labctl.workload.timeline`): its start, end and length
from the change's start c0 (an outage before the change has a negative start), and what went missing in it.
Latency is reported before (the no-change window) and after (from the end of the change's last outage to
the window's end). What the change did is read back from the lab afterwards
(:meth:`labctl.measure.live_changes.LiveAction.read_back`).

Nothing polls labgen during the two windows (a telemetry command wakes a thread that, on a 2-vCPU host, may
take the sending lcore's CPU) but once as the no-change window begins: the window's start is final only then
(a pause of labgen's CPU during the warm-up moves it later: the pause rule), and the change is timed from it.
Everything else is read after the drain. Outages past the window after the change (the trial ran on, longer
when labgen paused) are listed as ``later`` and not charged to the change.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from labctl.errors import UserError
from labctl.events import OnEvent, notify
from labctl.host.monitor import ThreadMonitor
from labctl.measure.live_changes import (DomainChanges, ExecCommand, LiveAction, check_domain_changes, check_exec,
                                     parse_changes, plan_changes)
from labctl.lab.plan import derive
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.reconf_change import ChangeMade, change_warnings, describe_change
from labctl.measure.reconf_kernel import measure_kernel_change
from labctl.measure.load_point import (HeldResult, LoadPoint, check_measurer, choose_load, held_trial, kernel_load,
                                      sleep_until, wait_armed, wait_running)
from labctl.measure.session import base_data, open_session
from labctl.measure.trial import Trial, trial_loop
from labctl.profile.load import LoadedProfile
from labctl.results.record import Metrics
from labctl.workload import timeline
from labctl.workload.paced import latency_metrics

if TYPE_CHECKING:
    from labctl.dpdk.labgen import Labgen
    from labctl.dpdk.labgen_replies import TrialClock

WINDOW_S, MIN_WINDOW_S, MAX_WINDOW_S = 5.0, 1.0, 60.0
BIN_S = 0.01
DRAIN_S = 0.5
#: config key a reconf trial records its change under (report rows and comparisons keep changes apart)
CHANGE_KEY = "reconf.change"


@dataclass
class ReconfRequest:
    """What the user asked: ``changes`` (``--change KNOB=VALUE`` texts), or ``exec_argv`` (``--exec``), or
    ``advice`` (a run's advice, applied as ``labctl apply`` would: ``advice_source`` names it); the load
    (``rate`` or ``at``) and the window."""

    changes: list[str] = field(default_factory=list)
    exec_argv: list[str] | None = None
    advice: Any = None
    advice_source: str = ""
    rate: str | None = None
    at: str | None = None
    window_s: float = WINDOW_S


@dataclass
class ReconfPlan:
    """The request checked against the profile before anything starts: the actions, the load, the window."""

    actions: list[LiveAction]
    load: LoadPoint
    window_s: float


def check_window(window_s: float) -> None:
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        raise UserError(f"--window {window_s:g}: out of range (allowed: {MIN_WINDOW_S:g}..{MAX_WINDOW_S:g} s, the "
                        "length of the window without the change and of the one after it)")


def check_request(request: ReconfRequest) -> None:
    """The request's own arguments, before the profile is read: one kind of change, a window in range."""
    given = [bool(request.changes), request.exec_argv is not None, request.advice is not None]
    if sum(given) != 1:
        raise UserError("reconf needs one change (allowed: --change KNOB=VALUE [--change ...], --exec ARGV, or "
                        "--advice RUN)")
    check_window(request.window_s)


def prepare(loaded: LoadedProfile, request: ReconfRequest, db: Any, render_xml: Callable[[], str] | None = None
            ) -> ReconfPlan:
    """Every check, before anything starts: the change can be made live here (else NotLiveError, exit 2, naming
    the knob and the reason), the program of ``--exec`` exists, the load (``--rate``, or the stored NDR), and
    the lab's own pre-flight check. ``render_xml``: the lab domain's XML (for ``--advice``: what its edit needs)."""
    check_request(request)
    check_measurer(loaded, kernel_ok=True)
    plan = derive(loaded.profile)
    actions: list[LiveAction]
    if request.exec_argv is not None:
        actions = [ExecCommand(check_exec(request.exec_argv))]
    elif request.advice is not None:
        if plan.lab != "libvirt":
            raise UserError(f"--advice: labctl apply changes a libvirt domain; {loaded.profile.name} is an "
                            f"{plan.lab} lab (allowed: a libvirt profile)")
        assert render_xml is not None
        changes, notes = request.advice, []
        if getattr(changes, "vhostpin", None):
            # on the lab's domain the "vhost" CPUs are its host side's (labgen's workers), not vhost-net threads
            notes.append(f"left out guest.pinning.vhost={changes.vhostpin}: on the lab's own domain it is the host "
                         "side's CPUs, which stay; labctl apply pins vhost-net threads through its qemu hook")
            changes = replace(changes, vhostpin=None)
        check_domain_changes(changes, render_xml(), request.advice_source)
        actions = [DomainChanges(changes, loaded.profile.libvirt_uri, request.advice_source, notes)]
    else:
        actions = plan_changes(loaded, plan, parse_changes(request.changes))
    load = kernel_load(request.rate, request.at) if plan.tcp is not None else \
        choose_load(loaded, db, request.rate, request.at, "reconf")
    check_measurable(loaded.profile)
    return ReconfPlan(actions, load, request.window_s)


class ReconfResult(HeldResult):
    """A stored reconf trial (its details carry ``reconf``), with the run it is in."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``labctl reconf --json`` prints: at least ``lost_packets``, ``time_lost_s`` and ``outages``."""
        r = self.record.details.get("reconf", {})
        m = self.record.metrics
        return {**self.head(), "change": r.get("change"), "offered_pps": r.get("offered_pps"),
                "lost_packets": m.lost_packets, "time_lost_s": m.time_lost_s, "outages": r.get("outages", []),
                "windows": r.get("windows"), "latency": r.get("latency"), "applied": r.get("applied"),
                "read_back": r.get("read_back"), "valid": m.valid, "warnings": self.record.warnings}


def _latency(window: Any) -> dict[str, Any]:
    lat = window.latency
    return {"count": lat.count, "p50_us": lat.p50_us, "p99_us": lat.p99_us, "max_us": lat.max_us} \
        if lat.count else {"count": 0}


def _series(bins: list[Any], clock: TrialClock, bin_cycles: int, ref_mono_ns: float) -> dict[str, Any]:
    """The bins as the page plots them: arrays from the first bin's start, seconds from ``ref_mono_ns``."""
    if not bins:
        return {}
    return {"t0_s": round(timeline.bin_start_s(clock, bin_cycles, bins[0].index, ref_mono_ns), 6),
            "bin_s": round(timeline.bin_width_s(clock, bin_cycles), 9),
            "offered": [b.offered for b in bins], "received": [b.received for b in bins],
            "p50_us": [round(b.p50_ns / 1000, 2) for b in bins], "p99_us": [round(b.p99_ns / 1000, 2) for b in bins],
            "max_us": [round(b.max_ns / 1000, 2) for b in bins]}


def measure_change(trial: Trial, actions: list[LiveAction], rate: Any, window_s: float,
                   on_event: OnEvent | None = None) -> None:
    """The reconf trial on ``trial.lab`` (see the module's docstring); fills ``trial.record``."""
    lab, phase, plan = trial.lab, trial.phase, trial.lab.plan
    gen, spec = held_trial(trial, rate, 2 * window_s, BIN_S, DRAIN_S, "reconf")
    monitor = ThreadMonitor(dict(lab.pids))
    change = ChangeMade(actions)
    trial.busy.start()
    phase("warm-up")
    gen.start_trial(spec)
    try:
        armed = wait_armed(gen)
        sleep_until(gen.trial_clock(armed).mono_ns(int(armed["run_tsc"])))
        # pauses of labgen's CPU in the warm-up move the measured window's start later (the pause rule):
        # read it once the window began, so that the change comes a whole window after it
        running = wait_running(gen)
        run_mono = gen.trial_clock(running).mono_ns(int(running["run_tsc"]))
        trial.busy.check("warm-up")
        monitor.start()
        phase("measure")
        notify(on_event, "live", lab=plan.name, message=f"no-change window: {window_s:g} s",
               data={"kind": "reconf", "step": "window", "window_s": window_s})
        sleep_until(run_mono + window_s * 1e9)
        phase("change")
        change.make(lab)
        notify(on_event, "live", lab=plan.name, message=f"changed in {(change.c1 - change.c0) / 1e6:.1f} ms",
               data={"kind": "reconf", "step": "changed", "took_s": (change.c1 - change.c0) / 1e9})
        phase("measure")
        sleep_until(run_mono + 2 * window_s * 1e9 + DRAIN_S * 0.5e9)
        stats = gen.wait_done(2 * spec.expected_s() + 10.0)
        change.read(lab)
    except BaseException:
        gen.stop_quietly()
        raise
    finally:
        change.cleanup(lab)
    report = monitor.stop()
    trial.busy.check("window")
    trial.note_busy()
    _fill(trial, gen, stats, spec, change, window_s, report)
    lab.stop_forwarding()


def _fill(trial: Trial, gen: Labgen, stats: dict[str, Any], spec: Any, change: ChangeMade, window_s: float,
          report: Any) -> None:
    from labctl.dpdk.labgen_replies import LabgenResult

    lab, record = trial.lab, trial.record
    result = LabgenResult.from_stats(stats)
    clock = gen.trial_clock(stats)
    bin_cycles = int(stats["bin_cycles"])
    run_mono = clock.mono_ns(int(stats["run_tsc"]))
    end_mono = clock.mono_ns(int(stats["last_tsc"])) if stats.get("last_tsc") else run_mono + 2 * window_s * 1e9
    c0 = change.c0
    # the no-change window: the bins from the measured window's start to the one the change began in; the
    # window after it: that bin and as many more (clipped at the end of sending)
    first = timeline.bin_range(clock, bin_cycles, run_mono, run_mono)[0]
    at_change = timeline.bin_at(clock, bin_cycles, c0)
    n_quiet = max(at_change - first, 0)
    quiet_bins = (first, first + n_quiet)
    change_bins = (at_change, min(at_change + n_quiet, timeline.bin_at(clock, bin_cycles, end_mono) + 1))
    n_change = change_bins[1] - change_bins[0]
    width_s = timeline.bin_width_s(clock, bin_cycles)
    after_end = c0 + n_change * width_s * 1e9
    quiet, after = gen.window(*quiet_bins), gen.window(*change_bins)
    baseline = quiet.lost * (n_change / n_quiet) if n_quiet else 0.0
    net = after.lost - baseline
    lost_packets = max(int(round(net)), 0)
    offered_pps = result.intended_pps
    gaps_lost, dropped_lost = gen.gaps("lost")
    gaps_refused, dropped_refused = gen.gaps("refused")
    found = timeline.outages(gaps_lost + gaps_refused, clock, c0, run_mono)
    after_change = [o for o in found if o.end_s > 0 and o.start_s * 1e9 < after_end - c0]
    settle_mono = c0 + (max((o.end_s for o in after_change), default=(change.c1 - c0) / 1e9)) * 1e9
    settled = gen.window(*timeline.bin_range(clock, bin_cycles, max(settle_mono, change.c1), after_end))
    bins = gen.series(quiet_bins[0], change_bins[1])

    def where(o: timeline.Outage) -> str:
        """before, across or after the change's start; later: past the window after it (not charged to it)."""
        if o.start_s * 1e9 >= after_end - c0:
            return "later"
        return "before" if o.end_s <= 0 else ("after" if o.start_s >= 0 else "across")

    outages = [{**o.to_dict(), "window": where(o)} for o in found]
    metrics = Metrics(offered_mpps=offered_pps / 1e6, achieved_mpps=result.achieved_pps / 1e6,
                      mpps=result.received_pps / 1e6, loss_ratio=result.loss_ratio, rx_packets=result.received,
                      tx_packets=result.sent, tx_dropped=result.tx_dropped, lost=result.lost,
                      reordered=result.reordered, duplicate=result.duplicate, window_s=result.window_s,
                      valid=result.valid, cpu=report.cpu_by_role(), lost_packets=lost_packets,
                      time_lost_s=lost_packets / offered_pps if offered_pps else None,
                      outage_count=len(after_change),
                      longest_outage_s=max((o.length_s for o in after_change), default=0.0))
    latency_metrics(metrics, result.latency)
    if quiet.latency.count:
        metrics.latency_before_p99_us = quiet.latency.p99_us
    if settled.latency.count:
        metrics.latency_after_p99_us = settled.latency.p99_us
    record.metrics = metrics
    took_s = (change.c1 - c0) / 1e9
    record.details["reconf"] = {
        "change": describe_change(change.actions), "labels": [a.label for a in change.actions],
        "offered_pps": offered_pps, "rate_pps_per_port": result.rate_pps, "sending_ports": result.sending_ports,
        "window_s": window_s, "bin_s": width_s,
        "change_at_s": round((c0 - run_mono) / 1e9, 6), "change_took_s": round(took_s, 6),
        "applied": change.applied, "read_back": change.read_back,
        "windows": {"before": {"s": round(n_quiet * width_s, 4), "bins": list(quiet_bins), "offered": quiet.offered,
                               "lost": quiet.lost},
                    "after": {"s": round(n_change * width_s, 4), "bins": list(change_bins), "offered": after.offered,
                              "lost": after.lost},
                    "baseline_lost": round(baseline, 2), "net_lost": round(net, 2)},
        "latency": {"before": _latency(quiet), "after": _latency(settled), "after_from_s": round(
            (max(settle_mono, change.c1) - c0) / 1e9, 6)},
        "outages": outages, "series": _series(bins, clock, bin_cycles, c0),
        "gaps": {"lost": len(gaps_lost), "refused": len(gaps_refused), "dropped": dropped_lost + dropped_refused},
        "clock": {"hz": clock.hz, "measured_hz": round(1e9 / clock.ns_per_cycle)},
    }
    record.details["labgen"] = {"valid": result.valid, "reason": result.reason, "stall_us": result.stall_us,
                                "shifts": result.shifts, "paused_us": result.paused_s * 1e6}
    if net < 0:
        record.details["reconf"]["note"] = (f"the no-change window lost more ({quiet.lost}) than the window after the "
                                            f"change ({after.lost}): the change cost nothing measurable")
    if not result.valid:
        record.warnings.append(f"invalid trial: the generator fell behind its schedule ({result.reason}): what it "
                               "counts as lost may be its own")
    if dropped_lost + dropped_refused:
        record.warnings.append(f"labgen's gap log was full: {dropped_lost + dropped_refused} gaps are missing from "
                               "the outages")
    record.warnings.extend(change_warnings(change, window_s, after_change))
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    record.warnings.extend(report.warnings())
    shared = bool(report.shared_busy_cpus) or lab.pollers > len(os.sched_getaffinity(0))
    record.env = lab.environment(lab.pins(), shared)


def run_reconf(loaded: LoadedProfile, prepared: ReconfPlan, db: Any, on_event: OnEvent | None = None,
               wait: bool = True) -> ReconfResult:
    """One reconf trial in a new run of ``db`` (the run named after the profile)."""
    profile = loaded.profile.model_copy(deep=True)
    profile.workload.rate = str(prepared.load.rate)
    loaded = replace(loaded, profile=profile)
    change = describe_change(prepared.actions)
    notify(on_event, "note", lab=profile.name, message=f"load: {prepared.load.said}")
    base = base_data(loaded)
    with open_session(db, profile.name, base, [], on_event=on_event) as session, \
            LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:
        session.store.update_run_info(session.run_id, reconf={"change": change, "load": prepared.load.to_dict(),
                                                              "window_s": prepared.window_s})

        def measurement(trial: Trial) -> None:
            trial.record.config[CHANGE_KEY] = change
            if trial.lab.plan.tcp is not None:  # a kernel guest: iperf3's numbered datagrams
                measure_kernel_change(trial, prepared.actions, prepared.load.rate, prepared.window_s, on_event)
            else:
                measure_change(trial, prepared.actions, prepared.load.rate, prepared.window_s, on_event)

        record = trial_loop(loaded, labs, measurement, on_event=on_event)
        record.config.setdefault(CHANGE_KEY, change)
        session.add(record)
        return ReconfResult(session.run_id, record, str(db), prepared.load)


def stored_cost(knobs: list[str], db: Any) -> list[str]:
    """``labctl apply --dry-run``'s lines on what this change cost: the newest ok reconf trial in ``db`` whose
    change is exactly these settings (``knob=value``, cpusets as labctl writes them); ``[]`` when none."""
    from pathlib import Path

    from labctl.results.lines import reconf_lines
    from labctl.results.store import Store

    if not knobs or not Path(db).exists():
        return []
    wanted = "; ".join(sorted(knobs))
    with Store(db) as store:
        for record in reversed(store.trials(status="ok")):
            if record.config.get(CHANGE_KEY) == wanted and record.metrics.lost_packets is not None:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.finished_at)) \
                    if record.finished_at else "when unknown"
                env = record.env
                where = ", ".join(x for x in (env.host, env.lab, env.accel) if x)
                head = (f"a live change of the same settings cost {record.metrics.lost_packets} packets (time lost "
                        f"{(record.metrics.time_lost_s or 0) * 1000:.2f} ms) in reconf trial {record.id} of run "
                        f"{record.run_id} in {db} ({when}; {where})")
                return [head] + [f"  {line}" for line in reconf_lines(record)[1:]]
    return []
