"""NDR and PDR: the highest load a lab forwards with no loss, and with at most 0.5% loss.

Found with MLRsearch (FD.io CSIT's multiple loss ratio search, PyPI ``mlrsearch`` 1.2.1): one search
serves both goals, short trials early and the final duration only near the bounds, and the answer for
each goal is its relevant lower bound with an upper bound beside it (the conditional throughput of
``GoalResult``). ``search="binary"`` runs a plain RFC 2544 binary search per goal at the final trial
duration and the same precision, for comparison (``benchmarks/search_cost.py``).

Loads are per port, as MLRsearch's (and labgen's) are; results are reported for all ports together,
as the record's ``mpps`` is. A measurement is a paced labgen trial (see :mod:`labctl.workload.paced`).
A trial the generator could not keep up with (invalid: it fell behind its schedule) is repeated, unless
the lab lost more of what it was sent than every goal allows (:func:`fails_every_goal`: the load is
above the results whatever the generator did). If it stays invalid, MLRsearch gets it with its unsent
frames, which its rules count against that load (``MeasurementResult.loss_ratio``: "irregular
situations ... guide search algorithms towards lower loads"), and the search result says the
generator limited it. The maximum load is the highest load
at which labgen keeps its schedule on this lab (calibrated with short paced trials from 98% of its full
speed down, once per host side in a run: :mod:`labctl.measure.calibration`), so the search does not
spend repeated invalid trials above it.

A search is one trial of the run: it runs in :func:`labctl.measure.trial.trial_loop` (the record, the
CPU locks, the busy watch, the error handlers, the release) as a plain trial does.

Every measurement is stored as a trial of the run (``details.role = "search"``; MLRsearch's first, a 1 s
trial at the maximum load whose result it discards, as ``warmup``); the search's own
record (``details.role = "ndr"``) carries ``ndr_mpps``, ``pdr_mpps`` and their bounds, and latency is
measured at 10%, 50% and 90% of PDR.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from labctl.errors import UserError, WorkloadError
from labctl.events import OnEvent, notify
from labctl.measure.calibration import CALIBRATION_STEPS, Calibrations, calibration_key, full_speed_pps, max_load_pps
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.session import base_data, open_session
from labctl.measure.trial import Trial, trial_loop
from labctl.profile.load import LoadedProfile
from labctl.results.metrics import DEFAULT_PRECISION
from labctl.results.record import Metrics, TrialRecord

if TYPE_CHECKING:
    from labctl.lab.interface import PacedLab
    from labctl.profile.schema import Profile

__all__ = ["SearchSettings", "NdrResult", "Bound", "LabMeasurer", "find_ndr", "ndr_trial", "run_ndr",
           "check_searchable", "short_trial_misses", "fails_every_goal", "max_load_pps", "full_speed_pps",
           "CALIBRATION_STEPS", "NDR_LOSS", "PDR_LOSS"]

NDR_LOSS = 0.0
PDR_LOSS = 0.005
LATENCY_LOADS = (10, 50, 90)  # per cent of PDR
INVALID_RETRIES = 2
SEARCHES = ("mlrsearch", "binary")
GOALS = {"ndr": NDR_LOSS, "pdr": PDR_LOSS}  # name: loss ratio
#: MLRsearch's coarser targets before the final one (its ``SearchGoal.preceding_targets``; the package's
#: default is 2). Each preceding target is a search of its own at a width twice the next one's and a trial
#: duration between the initial and the final: they pay off when the final trial is much longer than
#: the initial (CSIT: 1 s to 30 s or more). From 1 s to the 5 s trials this lab runs, the middle target
#: (3.2 s trials) cost more than it saved: ``benchmarks/search_cost.py`` (1%, final 5 s) measured
#: MLRsearch at 80, 89, 101, 111 and 96 trial-seconds with 1, 108 and 165 with 2, on this noisy host;
#: on the planted lab of ``tests/unit/measure/test_ndr.py`` it is 24 against 30.3 (README).
PRECEDING_TARGETS = 1


@dataclass(frozen=True)
class SearchSettings:
    """How precise and how long: ``precision`` is the relative width at which a goal is found (both
    searches), trial durations in seconds, ``duration_sum`` the trial seconds at a load MLRsearch wants
    before it calls the load a bound (CSIT's ``duration_sum``; ``exceed_ratio`` of them may lose)."""

    search: str = "mlrsearch"
    precision: float = DEFAULT_PRECISION
    initial_trial_s: float = 1.0
    final_trial_s: float = 1.0
    duration_sum_s: float = 2.0
    exceed_ratio: float = 0.5
    max_search_s: float = 1800.0
    #: the goals searched; ``labctl ndr`` searches both, ``benchmarks/search_cost.py --goals`` one of them
    goals: tuple[str, ...] = ("ndr", "pdr")

    def check(self) -> None:
        if self.search not in SEARCHES:
            raise UserError(f"--search {self.search}: not a search (allowed: {', '.join(SEARCHES)})")
        if not 0.0005 <= self.precision <= 0.2:
            raise UserError(f"--precision {self.precision}: out of range (allowed: 0.0005..0.2)")
        if not 0.1 <= self.initial_trial_s <= self.final_trial_s <= 600:
            raise UserError(f"trial durations {self.initial_trial_s}..{self.final_trial_s} s: allowed 0.1 <= "
                            "initial <= final <= 600 s")
        if not self.goals or not set(self.goals) <= set(GOALS) or len(set(self.goals)) != len(self.goals):
            raise UserError(f"--goals {','.join(self.goals)}: allowed one or both of {', '.join(GOALS)}")
        if not 0.0 <= self.exceed_ratio < 1.0:
            raise UserError(f"--exceed-ratio {self.exceed_ratio}: allowed 0 <= R < 1")
        if self.duration_sum_s < self.final_trial_s:
            raise UserError(f"--duration-sum {self.duration_sum_s}: at least the final trial's "
                            f"{self.final_trial_s} s")


@dataclass
class Bound:
    mpps: float | None  # the conditional throughput (MLRsearch), or the lower bound (binary)
    lower_mpps: float | None
    upper_mpps: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"mpps": self.mpps, "lower_mpps": self.lower_mpps, "upper_mpps": self.upper_mpps}


@dataclass
class NdrResult:
    search: str
    ndr: Bound
    pdr: Bound
    latency: list[dict[str, Any]] = field(default_factory=list)
    trials: int = 0
    trial_seconds: float = 0.0
    max_load_mpps: float = 0.0
    calibration_trials: int = 0
    calibration_seconds: float = 0.0
    short_trial_misses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    warnings: list[str] = field(default_factory=list)
    run_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ndr": self.ndr.to_dict(), "pdr": self.pdr.to_dict(), "latency": self.latency,
                "trials": self.trials, "trial_seconds": round(self.trial_seconds, 3), "search": self.search,
                "max_load_mpps": self.max_load_mpps, "calibration_trials": self.calibration_trials,
                "calibration_seconds": round(self.calibration_seconds, 3),
                "short_trial_misses": self.short_trial_misses, "wall_s": round(self.wall_s, 1),
                "warnings": self.warnings, "run_id": self.run_id}

    def metrics(self) -> Metrics:
        return Metrics(ndr_mpps=self.ndr.mpps, ndr_lower_mpps=self.ndr.lower_mpps, ndr_upper_mpps=self.ndr.upper_mpps,
                       pdr_mpps=self.pdr.mpps, pdr_lower_mpps=self.pdr.lower_mpps, pdr_upper_mpps=self.pdr.upper_mpps)


class LabMeasurer:
    """Measurements on a lab that is up and forwarding with labgen as its host side: one paced trial per
    call, each recorded through ``on_record``. It is MLRsearch's measurer (``measure(duration, load)``)."""

    warmup_next = False  # store the next measure() as role warmup: MLRsearch discards its first trial's result

    def __init__(self, lab: PacedLab, base: TrialRecord, search: str, on_record: Callable[[TrialRecord], None],
                 on_event: OnEvent | None = None):
        from labctl.host.monitor import ThreadMonitor

        self.lab = lab
        self.base = base
        self.search = search
        self.on_record = on_record
        self.on_event = on_event
        self.trials = 0
        self.trial_seconds = 0.0
        self.limited = 0  # loads the generator could not keep up with, even repeated
        self.decided_invalid = 0  # invalid search trials not repeated: the lab's own loss failed every goal
        self.calibration_trials = 0
        self.calibration_seconds = 0.0
        self.outcomes: list[Outcome] = []  # the search's measurements, as its goals read them
        self._monitor = ThreadMonitor

    @property
    def ports(self) -> int:
        return len(self.lab.plan.nics)

    def attempt(self, duration_s: float, load_pps: float, role: str, attempt: int = 0) -> tuple[Any, TrialRecord]:
        """One paced trial at ``load_pps`` per port, recorded: (labgen's result, its record)."""
        from labctl.workload.paced import paced_metrics

        plan = self.lab.plan
        monitor = self._monitor(dict(self.lab.pids))
        spec = self.lab.paced.spec(load_pps, duration_s, 0.0)
        result, before, after, report = self.lab.paced.trial(spec, monitor, lambda _phase: None)
        metrics, details = paced_metrics(result, before, after, plan.generator.frame_size, report.cpu_by_role(),
                                         self.lab.forwarding_cpu_s(report, after.t - before.t), self.lab.host_kind)
        record = self.base.model_copy(deep=True, update={"metrics": metrics, "started_at": time.time()})
        record.details.update(details)
        record.details.update({"role": role, "search": self.search, "load_pps_per_port": load_pps,
                               "intended_duration_s": duration_s, "attempt": attempt})
        record.finished_at = time.time()
        if not result.valid:
            record.warnings.append(f"invalid trial: the generator fell behind its schedule ({result.reason})")
        self.on_record(record)
        notify(self.on_event, "note", lab=plan.name,
               message=f"{self.search} {role}: {load_pps * self.ports / 1e6:.3f} Mpps for {duration_s:g} s -> "
                       f"loss {(result.loss_ratio or 0.0):.4%}" + ("" if result.valid else " (invalid)"))
        return result, record

    def trial(self, duration_s: float, load_pps: float, role: str = "search") -> tuple[Any, TrialRecord]:
        """A measurement of the search (or of latency): a paced trial, repeated while the generator fell
        behind (up to INVALID_RETRIES times; a warm-up, whose result is discarded, never; a search trial
        whose lab lost more than every goal allows, never: see :func:`fails_every_goal`), each attempt
        counted in the trial-seconds."""
        for attempt in range(1 if role == "warmup" else INVALID_RETRIES + 1):
            result, record = self.attempt(duration_s, load_pps, role, attempt)
            self.trials += 1
            self.trial_seconds += duration_s
            if result.valid:
                break
            if role == "search" and fails_every_goal(result):
                self.decided_invalid += 1
                break
        else:
            if role != "warmup":
                self.limited += 1
        if role == "search":
            self.outcomes.append(Outcome(duration_s, load_pps, bad_frames(result) / max(scheduled_frames(result), 1)))
        return result, record

    def measure(self, intended_duration: float, intended_load: float):
        from MLRsearch import MeasurementResult

        role = "warmup" if self.warmup_next else "search"
        self.warmup_next = False
        result, _record = self.trial(intended_duration, intended_load, role)
        return MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                                 offered_count=result.offered, loss_count=result.loss_count,
                                 intended_count=scheduled_frames(result),
                                 offered_duration=result.window_s or intended_duration)

    def passes(self, duration_s: float, load_pps: float, loss_goal: float) -> bool:
        result, _record = self.trial(duration_s, load_pps)
        return bad_frames(result) <= loss_goal * max(scheduled_frames(result), 1)


@dataclass(frozen=True)
class Outcome:
    """One measurement of a search: its intended duration and load (per port), and its loss ratio as
    the goals read it (lost and never-sent frames over the frames scheduled)."""

    duration_s: float
    load_pps: float
    loss_ratio: float


def short_trial_misses(outcomes: list[Outcome], final_trial_s: float, goals: tuple[str, ...] = tuple(GOALS)
                       ) -> dict[str, tuple[int, float, float]]:
    """Where the search's short trials misled it, per goal: (how many loads met the goal in a trial
    shorter than the final but failed it in a final-length trial at the same or a lower load, the
    highest such load, the lowest load a final trial failed the goal at), per port; (0, 0, 0) when
    none did. MLRsearch saves trial-seconds by letting short trials place the bounds that the final
    trials then only confirm: that holds where a short trial predicts a long one, as on a forwarder
    that loses what it cannot carry. Loss from pauses of the host (a 2-vCPU VM's vCPUs stop for
    milliseconds several times a second) grows with the trial's length instead: a 1 s trial often
    misses the pause a 5 s trial meets, the short trials place the bounds too high, and the final
    trials search again from there, which costs about what a binary search at the final duration does."""
    misses: dict[str, tuple[int, float, float]] = {}
    for name in goals:
        goal = GOALS[name]
        failed = [o.load_pps for o in outcomes if o.duration_s >= final_trial_s and o.loss_ratio > goal]
        lowest = min(failed, default=math.inf)
        loads = {o.load_pps for o in outcomes
                 if o.duration_s < final_trial_s and o.loss_ratio <= goal and o.load_pps >= lowest}
        misses[name] = (len(loads), max(loads), lowest) if loads else (0, 0.0, 0.0)
    return misses


def fails_every_goal(result: Any) -> bool:
    """Whether a trial fails every loss goal by the lab's own loss, whatever the generator did: the
    frames the lab lost exceed the highest goal's share (PDR, 0.5%) of the frames it was offered. An
    invalid trial (labgen fell behind its schedule and sent less, later, than asked) offered the lab
    a lower load than intended; a lab that loses more than 0.5% at the lower load loses more at the
    intended one (the monotony every throughput search assumes, RFC 2544 section 26.1), so repeating
    the trial cannot change a verdict, and the load did not limit the result: it is above it. On a
    lab that saturates far below the generator's maximum (domains/vnf.yaml: 1.7 against 22 Mpps here)
    MLRsearch's first trial is such a load, and binary search's first, at the final trial duration."""
    return result.offered > 0 and result.loss_count > PDR_LOSS * result.offered


def bad_frames(result: Any) -> int:
    """The frames of a trial that count against its load: lost, and never sent (all ports)."""
    return result.loss_count + result.unsent


def scheduled_frames(result: Any) -> int:
    """The frames labgen's schedule held (all ports): what it offered plus what it never got to send.
    Not ``load * duration``: labgen runs an integer rate, so that product differs from its schedule by a
    frame or two, and MLRsearch counts any difference between intended and offered frames as loss (a
    phantom loss that failed the NDR's zero-loss goal at about half the loads asked)."""
    return result.offered + result.unsent


def _mlrsearch(measurer: LabMeasurer, settings: SearchSettings, min_load: float, max_load: float
               ) -> dict[str, tuple[float | None, float | None, float | None]]:
    from MLRsearch import Config, MultipleLossRatioSearch, SearchGoal

    goals = {name: SearchGoal(loss_ratio=loss, exceed_ratio=settings.exceed_ratio,
                              relative_width=settings.precision, initial_trial_duration=settings.initial_trial_s,
                              final_trial_duration=settings.final_trial_s, duration_sum=settings.duration_sum_s,
                              preceding_targets=PRECEDING_TARGETS)
             for name, loss in GOALS.items() if name in settings.goals}
    config = Config()
    config.goals = list(goals.values())
    config.min_load = min_load  # before max_load: MLRsearch checks min < max as they are set
    config.max_load = max_load
    config.search_duration_max = settings.max_search_s
    measurer.warmup_next = bool(config.warmup_duration)  # a trial at the maximum load whose result it discards
    results = MultipleLossRatioSearch(config=config).search(measurer=measurer, debug=lambda _text: None)
    out = {}
    for name, goal in goals.items():
        got = results[goal]
        lower, upper = got.relevant_lower_bound, got.relevant_upper_bound
        conditional = got.conditional_throughput
        out[name] = (float(conditional) if conditional is not None else None,
                     float(lower) if lower is not None else None, float(upper) if upper is not None else None)
    return out


def _binary(measurer: LabMeasurer, settings: SearchSettings, min_load: float, max_load: float
            ) -> dict[str, tuple[float | None, float | None, float | None]]:
    """RFC 2544 section 26.1 throughput: halve the interval at the final trial duration until its
    relative width is at most the precision; one search per loss goal."""
    out = {}
    for name in settings.goals:
        loss, duration = GOALS[name], settings.final_trial_s
        if measurer.passes(duration, max_load, loss):
            out[name] = (max_load, max_load, None)
            continue
        low, high = min_load, max_load
        if not measurer.passes(duration, low, loss):
            out[name] = (None, None, low)
            continue
        while (high - low) / high > settings.precision:
            mid = math.sqrt(low * high) if high / low > 4 else (low + high) / 2
            if measurer.passes(duration, mid, loss):
                low = mid
            else:
                high = mid
        out[name] = (low, low, high)
    return out


def find_ndr(lab: PacedLab, base: TrialRecord, settings: SearchSettings, on_record: Callable[[TrialRecord], None],
             on_event: OnEvent | None = None, latency: bool = True, calibrations: Calibrations | None = None
             ) -> NdrResult:
    """NDR and PDR of a lab that is up (its host side labgen), then (``latency``) latency at 10/50/90% of PDR.

    ``calibrations`` (a run's lab session keeps one): the maximum load calibrated for this host side
    earlier in the run is reused (no calibration trials); when a goal's bound is found at that reused
    maximum, labgen is calibrated again, and when the new maximum is higher (by more than the
    precision) that goal is searched again up to it. Without ``calibrations`` every search calibrates."""
    settings.check()
    if lab.generator is None:
        raise UserError("workload.generator: an NDR/PDR search needs the paced generator (allowed: labgen)")
    started = time.monotonic()
    measurer = LabMeasurer(lab, base, settings.search, on_record, on_event)
    ports = measurer.ports
    key = calibration_key(lab.plan, settings.initial_trial_s)
    known = calibrations.get(key) if calibrations is not None else None
    if known is None:
        max_load, calibration_warnings = max_load_pps(measurer, settings.initial_trial_s)
    else:
        max_load, calibration_warnings = known[0], list(known[1])
        notify(on_event, "note", lab=lab.plan.name, message=f"maximum load {max_load * ports / 1e6:.3f} Mpps: "
                                                             "calibrated earlier in this run for this host side")
    if calibrations is not None:
        calibrations[key] = (max_load, list(calibration_warnings))
    search = _mlrsearch if settings.search == "mlrsearch" else _binary
    found = search(measurer, settings, max(max_load / 1000.0, 1000.0), max_load)
    capped = [name for name in settings.goals if _at_maximum(found[name], max_load, settings.precision)]
    if known is not None and capped and calibrations is not None:
        again, again_warnings = max_load_pps(measurer, settings.initial_trial_s)
        calibrations[key] = (again, list(again_warnings))
        if again > max_load * (1 + settings.precision):
            notify(on_event, "note", lab=lab.plan.name,
                   message=f"{', '.join(n.upper() for n in capped)} at the reused maximum load: labgen now paces "
                           f"{again * ports / 1e6:.3f} Mpps, searching again up to it")
            found.update(search(measurer, replace(settings, goals=tuple(capped)), max(again / 1000.0, 1000.0), again))
            max_load, calibration_warnings = again, again_warnings

    scale = ports / 1e6

    def bound(name: str) -> Bound:  # a goal not searched: all None
        value, lower, upper = found.get(name, (None, None, None))
        return Bound(*(None if x is None else round(x * scale, 6) for x in (value, lower, upper)))

    result = NdrResult(settings.search, bound("ndr"), bound("pdr"), max_load_mpps=round(max_load * ports / 1e6, 6),
                       warnings=calibration_warnings)
    for name in settings.goals:
        if _at_maximum(found[name], max_load, settings.precision):
            result.warnings.append(f"{name.upper()} is at the search's maximum load ({result.max_load_mpps:.3f} Mpps, "
                                   "the most labgen can pace here): the lab forwards at least this, maybe more")
    for name, (count, highest, lowest) in short_trial_misses(measurer.outcomes, settings.final_trial_s,
                                                                   settings.goals).items():
        result.short_trial_misses[name] = count
        if count:
            result.warnings.append(
                f"{name.upper()}: {count} loads passed in trials shorter than {settings.final_trial_s:g} s (up to "
                f"{highest * scale:.3f} Mpps) at or above the lowest load a final trial "
                f"failed ({lowest * scale:.3f}): short trials over-estimate this lab (on a host that pauses for "
                "milliseconds, longer trials meet more pauses), so the final trials searched again and the short "
                "ones saved little")
    if measurer.limited:
        result.warnings.append(f"{measurer.limited} loads stayed invalid (the generator fell behind): the search "
                               "treated their unsent frames as lost; the results may be limited by the generator")
    pdr_per_port = (found["pdr"][0] or found["pdr"][1]) if "pdr" in found else None
    if latency and pdr_per_port:
        for pct in LATENCY_LOADS:
            load = pdr_per_port * pct / 100.0
            trial, _record = measurer.trial(settings.final_trial_s, load, role="latency")
            lat = trial.latency
            result.latency.append({"load_pct": pct, "mpps": round(load * ports / 1e6, 6),
                                   "p50_us": lat.p50_us, "p90_us": lat.p90_us, "p99_us": lat.p99_us,
                                   "p999_us": lat.p999_us, "max_us": lat.max_us, "valid": trial.valid})
    elif latency and "pdr" in found:
        result.warnings.append("no PDR was found above the minimum load: latency was not measured")
    result.trials, result.trial_seconds = measurer.trials, measurer.trial_seconds  # the latency trials too
    result.calibration_trials, result.calibration_seconds = measurer.calibration_trials, measurer.calibration_seconds
    result.wall_s = time.monotonic() - started
    return result


def _at_maximum(found: tuple[float | None, float | None, float | None], max_load: float, precision: float) -> bool:
    """Whether a goal's lower bound is at the search's maximum load (within the precision)."""
    lower = found[1]
    return lower is not None and lower >= max_load * (1 - precision)


def summary_record(base: TrialRecord, result: NdrResult) -> TrialRecord:
    """The search's own record: NDR/PDR with their bounds in its metrics, the latency and the cost in details."""
    record = base.model_copy(deep=True, update={"metrics": result.metrics(), "finished_at": time.time()})
    record.details.update({"role": "ndr", "ndr": asdict(result.ndr), "pdr": asdict(result.pdr),
                           "search": result.search, "latency": result.latency, "trials": result.trials,
                           "trial_seconds": result.trial_seconds, "max_load_mpps": result.max_load_mpps,
                           "calibration_trials": result.calibration_trials,
                           "calibration_seconds": result.calibration_seconds,
                           "short_trial_misses": result.short_trial_misses})
    record.warnings.extend(result.warnings)
    if result.latency:
        mid = next((x for x in result.latency if x["load_pct"] == 50), result.latency[0])
        record.metrics.latency_p50_us, record.metrics.latency_p99_us = mid["p50_us"], mid["p99_us"]
    return record


def check_searchable(profile: Profile, settings: SearchSettings) -> None:
    """Refuse, before anything is created, a search that cannot run (UserError naming the field)."""
    settings.check()
    if profile.workload.generator != "labgen":
        raise UserError(f"workload.generator: {profile.workload.generator} cannot pace, and an NDR/PDR search "
                        "needs paced loads (allowed: labgen)")


def ndr_trial(loaded: LoadedProfile, settings: SearchSettings, session: LabSession,
              on_record: Callable[[TrialRecord], None], on_event: OnEvent | None = None, repeat_index: int = 0
              ) -> tuple[TrialRecord, NdrResult | None]:
    """One configuration's NDR/PDR search as one record (status ok or failed), on the run's labs, in the
    one trial loop (:func:`labctl.measure.trial.trial_loop`); every measurement is handed to ``on_record``
    as it finishes. The maximum load is calibrated once per host side of the session's run
    (``session.calibrations``)."""
    found: list[NdrResult] = []

    def search(trial: Trial) -> None:
        lab, record = trial.lab, trial.record
        record.warnings.extend(lab.record_warnings())
        record.details.update(lab.details())
        record.env = lab.environment(lab.pins(), lab.pollers > len(os.sched_getaffinity(0)))
        trial.phase(f"searching NDR/PDR ({settings.search})")
        trial.busy.start()
        base = record.model_copy(deep=True)  # what every measurement's record starts from
        result = find_ndr(lab, base, settings, on_record, on_event, calibrations=session.calibrations)
        trial.busy.check("search")
        _summarise(record, result)
        trial.note_busy()
        found.append(result)

    record = trial_loop(loaded, session, search, repeat_index, on_event)
    return record, (found[0] if found and record.status == "ok" else None)


def _summarise(record: TrialRecord, result: NdrResult) -> None:
    """The search's own record, in place: what :func:`summary_record` makes of a base record."""
    summary = summary_record(record, result)
    record.metrics, record.details, record.warnings = summary.metrics, summary.details, summary.warnings


def run_ndr(loaded: LoadedProfile, settings: SearchSettings, db: Any, on_event: OnEvent | None = None,
            wait: bool = True) -> NdrResult:
    """``labctl ndr``: one configuration's NDR/PDR search in a new run of ``db``, every measurement
    stored; the result (``run_id`` set) is also kept in the run's info."""
    profile = loaded.profile
    check_searchable(profile, settings)
    check_measurable(profile)
    with open_session(db, profile.name, base_data(loaded), [], on_event=on_event) as session, \
            LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:
        record, result = ndr_trial(loaded, settings, labs, session.add_measurement, on_event)
        session.add(record)
        if result is None:
            raise WorkloadError(f"the NDR/PDR search failed: {record.error}")
        result.run_id = session.run_id
        session.store.update_run_info(session.run_id, ndr=result.to_dict())
        return result
