"""``labctl soak``: one long trial, second by second, with the host's own unsteadiness beside it.

FD.io CSIT's soak tests run about 30 minutes at a load to find what a 10-second trial hides (its critical
load search, PLRsearch, IETF draft-vpolak-bmwg-plrsearch, is not built here). labctl's soak is one labgen
trial of ``--duration`` at a paced load (``--rate``, or the stored NDR: :mod:`labctl.measure.load_point`)
with time bins of one second (wider only past :data:`MAX_PER_SECOND_S`, where labgen's bins would not fit):

- the series, one point a bin: offered, received, lost, latency p50/p99/max of the frames sent in it;
- every loss event located in time: labgen's gaps merged into outages (:mod:`labctl.workload.timeline`),
  from the soak's start;
- the host beside it, second by second (:mod:`labctl.host.stalls`: steal time, the lab threads' involuntary
  context switches), and each loss event that falls within a second of a host stall marked ``host_stall``:
  the host's doing, not the setting's;
- the loss ratio with its one-sided 95% upper bound (:func:`labctl.analysis.loss.loss_upper_bound`: zero
  loss in N packets bounds it at 3/N).

The series is stored as the soak runs: the trial is written after its first minute and rewritten every
minute (:data:`CHECKPOINT_S`) with what has drained by then, so a soak that is killed keeps what it measured
up to its last minute, and says where it stopped (``details.soak.stopped_at_s``, a warning). A soak that is
interrupted (SIGINT, SIGTERM, a face's cancel) stops labgen's sending, stores everything measured up to
then, and then ends as interrupted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from labctl.errors import UserError
from labctl.events import OnEvent, notify
from labctl.host.monitor import ThreadMonitor
from labctl.host.stalls import HostSecond, StallSampler, mark_stalls
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.load_point import (HeldResult, LoadPoint, check_measurer, choose_load, held_trial, sleep_until,
                                      wait_armed)
from labctl.measure.session import base_data, open_session
from labctl.measure.trial import Trial, trial_loop
from labctl.profile.load import LoadedProfile
from labctl.results.record import Metrics, TrialRecord
from labctl.workload import timeline
from labctl.workload.paced import latency_metrics

if TYPE_CHECKING:
    from labctl.dpdk.labgen import Labgen
    from labctl.dpdk.labgen_replies import SeriesBin, TrialClock

MIN_DURATION_S, MAX_DURATION_S = 10.0, 12 * 3600.0
MAX_PER_SECOND_S = 4 * 3600.0  # labgen keeps 16384 bins: one a second up to about 4.5 h
CHECKPOINT_S = 60.0
DRAIN_S = 0.5
LIVE_PERIOD_S = 1.0
MAX_EVENTS = 2000  # loss events kept in the record (all are counted)


def parse_duration(text: str) -> float:
    """``--duration``: ``90s``, ``30m``, ``2h`` or plain seconds, within the allowed range."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", str(text))
    if not match:
        raise UserError(f"--duration {text}: not a duration (allowed: 90s, 30m, 2h, or seconds)")
    seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    if not MIN_DURATION_S <= seconds <= MAX_DURATION_S:
        raise UserError(f"--duration {text}: out of range (allowed: {MIN_DURATION_S:g} s to "
                        f"{MAX_DURATION_S / 3600:g} h)")
    return seconds


def bin_seconds(duration_s: float) -> float:
    """One second a bin, wider for soaks longer than labgen's bins cover at one a second."""
    return 1.0 if duration_s <= MAX_PER_SECOND_S else float(math.ceil(duration_s / MAX_PER_SECOND_S))


@dataclass
class SoakPlan:
    duration_s: float
    load: LoadPoint


def prepare(loaded: LoadedProfile, duration: str, rate: str | None, at: str | None, db: Any) -> SoakPlan:
    """Every check before anything starts: the duration, the measurer, the load, the lab's pre-flight check."""
    duration_s = parse_duration(duration)
    check_measurer(loaded)
    load = choose_load(loaded, db, rate, at, "soak")
    check_measurable(loaded.profile)
    return SoakPlan(duration_s, load)


class SoakResult(HeldResult):
    """A stored soak trial (its details carry ``soak``), with the run it is in."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON ``labctl soak --json`` prints: at least ``series`` (one entry a bin) and ``loss_upper_bound``."""
        s = self.record.details.get("soak", {})
        m = self.record.metrics
        return {**self.head(), "duration_s": s.get("duration_s"), "stopped_at_s": s.get("stopped_at_s"),
                "complete": s.get("complete"), "offered": s.get("offered"), "lost": s.get("lost"),
                "loss_ratio": m.loss_ratio, "loss_upper_bound": m.loss_upper_bound, "events": s.get("events", []),
                "host_stall_s": m.host_stall_s, "series": s.get("series", []), "warnings": self.record.warnings}


class _Soak:
    """A soak in flight: the trial's clock, the drained bins so far, the host's seconds."""

    def __init__(self, trial: Trial, gen: Labgen, spec: Any, duration_s: float, sampler: StallSampler,
                 on_event: OnEvent | None):
        self.trial, self.gen, self.spec, self.duration_s = trial, gen, spec, duration_s
        self.sampler, self.on_event = sampler, on_event
        self.bins: list[SeriesBin] = []
        self.clock: TrialClock | None = None
        self.run_mono = 0.0
        self.first_bin = 0
        self.bin_cycles = 0
        self.started = time.time()

    def arm(self) -> None:
        armed = wait_armed(self.gen)
        self.clock = self.gen.trial_clock(armed)
        self.run_mono = self.clock.mono_ns(int(armed["run_tsc"]))
        self.bin_cycles = int(armed["bin_cycles"])
        self.first_bin = timeline.bin_range(self.clock, self.bin_cycles, self.run_mono, self.run_mono + 1)[0]

    def drained_until(self, now_mono: float) -> int:
        """The bins whose frames have all arrived (or never will) by ``now_mono``: those ending a drain ago."""
        assert self.clock is not None
        end = timeline.bin_range(self.clock, self.bin_cycles, self.run_mono, now_mono - (DRAIN_S + 0.5) * 1e9)[1]
        last = timeline.bin_range(self.clock, self.bin_cycles, self.run_mono,
                                  self.run_mono + self.duration_s * 1e9)[1]
        return max(min(end - 1, last), self.first_bin)

    def fetch(self, end: int) -> list[SeriesBin]:
        """Bins up to ``end`` (exclusive) not fetched yet."""
        start = self.first_bin + len(self.bins)
        if end <= start:
            return []
        new = self.gen.series(start, end)
        self.bins += new
        return new

    def tell(self, new: list[SeriesBin]) -> None:
        if not new or self.on_event is None:
            return
        assert self.clock is not None
        width = timeline.bin_width_s(self.clock, self.bin_cycles)
        for b in new:
            t_s = timeline.bin_start_s(self.clock, self.bin_cycles, b.index, self.run_mono)
            notify(self.on_event, "live", lab=self.trial.lab.plan.name,
                   message=f"{t_s:.0f} s: {b.received}/{b.offered} received",
                   data={"kind": "soak", "t_s": round(t_s, 3), "bin_s": width, "offered": b.offered,
                         "received": b.received, "lost": b.lost, "p99_us": b.p99_ns / 1000,
                         "duration_s": self.duration_s})


def _stall_seconds(seconds: list[HostSecond], run_mono: float) -> list[dict[str, Any]]:
    marks = mark_stalls(seconds)
    return [{"t_s": round((s.mono_ns - run_mono) / 1e9 - 1.0, 3), "steal_ms": round(s.steal_ms, 1),
             "invol": s.invol, "top_thread": s.top_thread, "stall": mark} for s, mark in zip(seconds, marks)]


def _compose(soak: _Soak, record: TrialRecord, stopped_at_s: float, complete: bool, why: str | None,
             stats: dict[str, Any] | None) -> None:
    """The record from what has been measured so far (a checkpoint, an interrupted soak, or the whole)."""
    from labctl.analysis.loss import loss_upper_bound
    from labctl.dpdk.labgen_replies import LabgenResult

    assert soak.clock is not None
    clock = soak.gen.trial_clock(stats) if stats is not None else soak.clock
    bins = soak.bins  # a bin counts when it began before the soak stopped (an interrupted soak's are empty after)
    width = timeline.bin_width_s(clock, soak.bin_cycles)
    host = _stall_seconds(soak.sampler.seconds(), soak.run_mono)
    stall_at = {math.floor(h["t_s"]) for h in host if h["stall"]}
    series = []
    by_second = {math.floor(h["t_s"]): h for h in host}
    bins = [b for b in bins if timeline.bin_start_s(clock, soak.bin_cycles, b.index, soak.run_mono) < stopped_at_s]
    for b in bins:
        t_s = timeline.bin_start_s(clock, soak.bin_cycles, b.index, soak.run_mono)
        h = by_second.get(math.floor(t_s + 1e-6), {})
        series.append({"t_s": round(t_s, 3), "offered": b.offered, "received": b.received, "lost": b.lost,
                       "p50_us": b.p50_ns / 1000, "p99_us": b.p99_ns / 1000, "max_us": b.max_ns / 1000,
                       "steal_ms": h.get("steal_ms"), "invol": h.get("invol"), "stall": bool(h.get("stall"))})
    offered = sum(b.offered for b in bins)
    received = sum(b.received for b in bins)
    lost = max(offered - received, 0)
    gaps_lost, dropped_lost = soak.gen.gaps("lost")
    gaps_refused, dropped_refused = soak.gen.gaps("refused")
    horizon = stopped_at_s
    events = []
    for o in timeline.outages(gaps_lost + gaps_refused, clock, soak.run_mono, soak.run_mono):
        if o.start_s > horizon:
            continue
        near = any(s in stall_at for s in range(math.floor(o.start_s) - 1, math.floor(o.end_s) + 1))
        events.append({**o.to_dict(), "host_stall": near})
    bound = loss_upper_bound(lost, offered) if offered else None
    m = Metrics(offered_mpps=offered / stopped_at_s / 1e6 if stopped_at_s > 0 else None,
                mpps=received / stopped_at_s / 1e6 if stopped_at_s > 0 else None,
                loss_ratio=lost / offered if offered else None, rx_packets=received, tx_packets=offered,
                window_s=round(stopped_at_s, 3), loss_upper_bound=bound, loss_events=len(events),
                loss_events_host=sum(1 for e in events if e["host_stall"]),
                host_stall_s=sum(1 for h in host if h["stall"] and 0 <= h["t_s"] < horizon))
    if stats is not None:
        result = LabgenResult.from_stats(stats)
        m.valid, m.achieved_mpps, m.tx_dropped, m.lost = result.valid, result.achieved_pps / 1e6, result.tx_dropped, \
            result.lost
        m.reordered, m.duplicate = result.reordered, result.duplicate
        latency_metrics(m, result.latency)
    keep = record.metrics.cpu
    record.metrics = m
    record.metrics.cpu = keep
    record.details["soak"] = {
        "duration_s": soak.duration_s, "bin_s": round(width, 6), "stopped_at_s": round(stopped_at_s, 3),
        "complete": complete, "offered": offered, "received": received, "lost": lost,
        "rate_pps_per_port": soak.spec.rate_pps, "events": events[:MAX_EVENTS], "events_total": len(events),
        "series": series, "host": host,
        "gaps": {"lost": len(gaps_lost), "refused": len(gaps_refused), "dropped": dropped_lost + dropped_refused},
        "stall_rule": {"steal_ms": 50.0, "invol_min": 20, "invol_factor": 4.0},
    }
    record.warnings = [w for w in record.warnings if not w.startswith("soak stopped")]
    if not complete:
        record.warnings.append(f"soak stopped at {stopped_at_s:.0f} s of {soak.duration_s:.0f} s: {why}")
    if dropped_lost + dropped_refused:
        record.warnings.append(f"labgen's gap log was full: {dropped_lost + dropped_refused} gaps are missing from "
                               "the loss events")


def measure_soak(trial: Trial, rate: Any, duration_s: float, checkpoint: Callable[[TrialRecord], None],
                 on_event: OnEvent | None = None) -> None:
    """The soak on ``trial.lab`` (see the module's docstring); ``checkpoint`` stores the record as it grows."""
    lab, record, phase = trial.lab, trial.record, trial.phase
    gen, spec = held_trial(trial, rate, duration_s, bin_seconds(duration_s), DRAIN_S, "soak")
    record.env = lab.environment(lab.pins(), False)
    sampler = StallSampler(list(lab.pids.values()))
    monitor = ThreadMonitor(dict(lab.pids))
    soak = _Soak(trial, gen, spec, duration_s, sampler, on_event)
    trial.busy.start()
    phase("warm-up")
    gen.start_trial(spec)
    try:
        soak.arm()
        sleep_until(soak.run_mono)
        sampler.start()
        monitor.start()
        phase("measure")
        next_checkpoint = soak.run_mono + CHECKPOINT_S * 1e9
        end = soak.run_mono + duration_s * 1e9
        while time.monotonic_ns() < end:
            sleep_until(min(time.monotonic_ns() + LIVE_PERIOD_S * 1e9, end))
            now = time.monotonic_ns()
            soak.tell(soak.fetch(soak.drained_until(now) + 1))
            if now >= next_checkpoint and now < end:
                elapsed = (now - soak.run_mono) / 1e9
                _compose(soak, record, min(elapsed - DRAIN_S - 1.0, duration_s), False,
                         "a checkpoint: the soak did not finish (its process ended before the next one)", None)
                checkpoint(record)
                next_checkpoint += CHECKPOINT_S * 1e9
        sleep_until(end + DRAIN_S * 0.5e9)
        stats = gen.wait_done(DRAIN_S + 30.0)
    except BaseException as exc:
        _interrupted(soak, record, exc, checkpoint)
        raise
    finally:
        sampler.stop()
    report = monitor.stop()
    record.metrics.cpu = report.cpu_by_role()
    soak.fetch(soak.drained_until(time.monotonic_ns() + 1e12) + 1)
    _compose(soak, record, duration_s, True, None, stats)
    trial.busy.check("window")
    trial.note_busy()
    record.warnings.extend(report.warnings())
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    lab.stop_forwarding()


def _interrupted(soak: _Soak, record: TrialRecord, exc: BaseException, checkpoint: Callable[[TrialRecord], None]
                 ) -> None:
    """Stop sending, let the last frames drain, store what was measured; never raises (the original error
    goes on). Waits with time.sleep: a cancelled scope would interrupt signals.sleep at once."""
    soak.gen.stop_quietly()
    if soak.clock is None:
        return
    try:
        stopped = (time.monotonic_ns() - soak.run_mono) / 1e9
        deadline = time.monotonic() + DRAIN_S + 3.0
        stats = soak.gen.stats()
        while stats.get("state") != "done" and time.monotonic() < deadline:
            time.sleep(0.05)
            stats = soak.gen.stats()
        soak.fetch(soak.drained_until(time.monotonic_ns() + 1e12) + 1)
        why = f"interrupted ({type(exc).__name__})" if not isinstance(exc, Exception) else f"failed: {exc}"
        _compose(soak, record, max(min(stopped, soak.duration_s), 0.0), False, why,
                 stats if stats.get("state") == "done" else None)
        checkpoint(record)
    except Exception:  # noqa: BLE001 - keep the original error; the last checkpoint stays stored
        pass


def run_soak(loaded: LoadedProfile, prepared: SoakPlan, db: Any, on_event: OnEvent | None = None,
             wait: bool = True) -> SoakResult:
    """One soak trial in a new run of ``db``, stored as it runs."""
    profile = loaded.profile.model_copy(deep=True)
    profile.workload.rate = str(prepared.load.rate)
    profile.workload.duration_s = prepared.duration_s
    loaded = replace(loaded, profile=profile)
    notify(on_event, "note", lab=profile.name, message=f"load: {prepared.load.said}")
    with open_session(db, profile.name, base_data(loaded), [], on_event=on_event) as session, \
            LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:
        session.store.update_run_info(session.run_id, soak={"duration_s": prepared.duration_s,
                                                            "load": prepared.load.to_dict()})
        stored: list[int] = []

        def checkpoint(record: TrialRecord) -> None:
            copy = record.model_copy(deep=True)
            copy.finished_at = time.time()
            if stored:
                session.replace(stored[0], copy)
            else:
                stored.append(session.store_partial(copy))

        def measurement(trial: Trial) -> None:
            measure_soak(trial, prepared.load.rate, prepared.duration_s, checkpoint, on_event)

        try:
            record = trial_loop(loaded, labs, measurement, on_event=on_event)
        except BaseException:
            if stored:
                kept = session.store.trials(session.run_id, status=None)
                soak = next((t.details.get("soak", {}) for t in kept if t.id == stored[0]), {})
                notify(on_event, "note", lab=profile.name,
                       message=f"soak stopped at {soak.get('stopped_at_s', 0):.0f} s of {prepared.duration_s:.0f} s: "
                               f"what it measured is kept as trial {stored[0]} of run {session.run_id} in {db}")
            raise
        if stored:
            session.replace(stored[0], record, final=True)
            record.id = stored[0]
        else:
            session.add(record)
        return SoakResult(session.run_id, record, str(db), prepared.load)
