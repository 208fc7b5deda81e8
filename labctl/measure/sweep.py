"""Sweeps: cross the profile's sweep matrix, interleave repeats (A B C A B C), store every trial at once.

A sweep is a run in the result store with its plan (one entry per trial, in execution order).
``resume`` finishes the newest unfinished run of the profile without repeating finished trials.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from labctl import signals
from labctl.errors import KnobError
from labctl.events import OnEvent, notify
from labctl.lab.plan import is_domain_knob
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.ndr import SearchSettings, ndr_trial
from labctl.measure.session import RunSession, base_data, find_resumable, open_session
from labctl.measure.until import Budget, Until, check_futility, check_until, run_until
from labctl.profile.knobs import crossed, with_knobs
from labctl.profile.load import LoadedProfile, validate_data
from labctl.results.metrics import DEFAULT_THRESHOLD_PCT, default_metric, lower_is_better, resolve
from labctl.results.record import TrialRecord
from labctl.results.store import Store

if TYPE_CHECKING:
    from labctl.host.steadiness import Steadiness

MAX_REPEAT = 100


ORDERS = ("interleaved", "random")


def build_plan(sweep: dict[str, list[Any]], repeat: int, fewest_boots: bool = False, order: str = "interleaved",
               seed: int | None = None) -> list[dict[str, Any]]:
    """Every configuration once per repeat, configurations interleaved: seq = repeat * n + index.

    ``fewest_boots`` (libvirt guests): inside a repeat cycle, configurations that share a domain
    (:func:`labctl.lab.plan.is_domain_knob`) come one after another, and every other cycle runs in
    reverse, so a cycle starts with the domain the last one ended with: a sweep of D domains and W
    workload settings boots D times in its first cycle and D - 1 in each later one.

    The knob ``build`` varies fastest of all: the builds alternate within every repeat (A B A B, each
    configuration of the other knobs measured on every build back to back, never all of A and then all of
    B), at the price of a restart (or a re-defined domain) per trial, as CSIT's per-patch A/B does.

    ``order`` random: each repeat's configurations are shuffled with ``random.Random(seed)`` (the same
    seed gives the same plan)."""
    if order not in ORDERS:
        raise KnobError(f"--order {order}: not an order (allowed: {', '.join(ORDERS)})")
    combos = list(crossed(sweep))
    index = {k: {repr(v): i for i, v in enumerate(values)} for k, values in sweep.items()}
    # first knob varies slowest (crossed's order), except build, which varies fastest
    names = [k for k in sweep if k != "build"] + (["build"] if "build" in sweep else [])
    if fewest_boots:
        domain = [k for k in names if is_domain_knob(k) and k != "build"]
        names = domain + [k for k in names if k not in domain]
    combos.sort(key=lambda c: tuple(index[k][repr(c[k])] for k in names))
    rng = random.Random(seed) if order == "random" else None
    plan = []
    for r in range(repeat):
        cycle = combos if r % 2 == 0 or not fewest_boots else list(reversed(combos))
        if rng is not None:
            cycle = list(cycle)
            rng.shuffle(cycle)
        plan += [{"seq": r * len(combos) + i, "config": combo, "repeat_index": r} for i, combo in enumerate(cycle)]
    return plan


@dataclass
class SweepResult:
    run_id: int
    ok: int = 0
    failed: int = 0
    trial_ids: list[int] = field(default_factory=list)
    steadiness: Any = None  # the probe's Steadiness, when one ran
    until: dict[str, Any] | None = None  # --until decided: its course and verdicts (Until.summary)


TrialRunner = Callable[..., TrialRecord]  # (loaded, repeat_index, on_event, session=LabSession)


def _default_runner(loaded: LoadedProfile, repeat_index: int, on_event: OnEvent | None,
                    session: LabSession | None = None) -> TrialRecord:
    from labctl.measure.trial import run_trial

    return run_trial(loaded, repeat_index=repeat_index, on_event=on_event, session=session)


def profile_sweeps(loaded: LoadedProfile) -> bool:
    return any(len(values) > 1 for values in loaded.profile.sweep.values())


def check_repeat(repeat: int | None) -> None:
    if repeat is not None and not 1 <= repeat <= MAX_REPEAT:
        raise KnobError(f"--repeat {repeat}: out of range (allowed: 1..{MAX_REPEAT})")


def run_sweep(loaded: LoadedProfile, db_path: str | Path, repeat: int | None = None, resume: bool = False,
              runner: TrialRunner = _default_runner, steadiness_s: float | None = None,
              on_event: OnEvent | None = None, search: SearchSettings | None = None, wait: bool = True,
              order: str | None = None, seed: int | None = None, until: str | None = None,
              budget: str | None = None, threshold_pct: float | None = None,
              verdict_metric: str | None = None, futility_pct: float | None = None) -> SweepResult:
    """Run (or resume) the sweep of ``loaded``; every finished trial is committed before the next starts.

    ``steadiness_s``: first probe how steady the host's speed is for that many seconds
    (:func:`labctl.host.steadiness.probe`, after every check of the request and before the run is
    created; an interrupted probe leaves nothing behind); when it is unsteady, every trial of this
    sitting carries the probe's warning. ``search``: every configuration's trial is an NDR/PDR search
    (:func:`labctl.measure.ndr.ndr_trial`), its measurements stored beside it (not counted as done:
    progress counts plan entries). ``order``/``seed``: the order within each repeat (:func:`build_plan`;
    None: the profile's ``order`` and ``seed``); a random order without a seed draws one, and both are
    recorded in the run's info (``order``, ``seed``).

    ``until`` ``decided`` with ``budget`` (trials or a duration): blocks of configurations, round by round,
    until every comparison is decided or the budget is spent (:mod:`labctl.measure.until`); the course
    and the verdicts go in the run's info (``until``) and :attr:`SweepResult.until`. ``threshold_pct``: the
    band of equivalence; ``verdict_metric``: what is judged (default: the run's own metric); ``futility_pct``:
    a comparison whose chance of a verdict by the budget's end falls below it is given up (default
    :data:`labctl.measure.until.FUTILITY`; 0: never, the whole budget is spent)."""
    check_repeat(repeat)
    request = check_until_request(loaded, resume, until, budget, threshold_pct, verdict_metric, futility_pct)
    order, seed = check_order(loaded, order, seed)
    if steadiness_s is not None:
        from labctl.host.steadiness import check_arguments

        check_arguments(steadiness_s)
    profile = loaded.profile
    check_measurable(profile)
    result = SweepResult(run_id=0)
    with signals.stoppable():
        if steadiness_s is not None:
            result.steadiness = _probe_host(db_path, profile.name, resume, steadiness_s, on_event)
        host_warning = result.steadiness.trial_warning() if result.steadiness is not None else None
        base = base_data(loaded)
        course = _until_course(profile.sweep, request, order, seed) if request is not None else None
        plan = [] if resume or course is not None else build_plan(profile.sweep, repeat or profile.repeat,
                                                                  profile.backend == "libvirt", order, seed)
        with open_session(db_path, profile.name, base, plan, resume, on_event) as session, \
                LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:
            result.run_id = session.run_id
            _record_setting(session, result.steadiness, order, seed, resume, "build" in profile.sweep)
            todo = session.store.missing_plan(session.run_id) if resume else plan
            if resume:
                base = session.store.run(session.run_id)["profile"]
            measure = _entry_measurer(loaded, base, session, labs, runner, search, on_event, host_warning)
            try:
                if course is not None:
                    result.until = _run_course(course, session, measure, on_event, profile.name)
                else:
                    for entry in todo:
                        measure(entry)
            finally:
                _record_boots(session, labs)
            result.ok, result.failed, result.trial_ids = session.ok, session.failed, session.trial_ids
    return result


@dataclass(frozen=True)
class UntilRequest:
    """``--until decided``'s arguments, checked."""

    limit: Budget
    threshold_pct: float
    futility: float
    verdict_metric: str | None


def check_until_request(loaded: LoadedProfile, resume: bool, until: str | None, budget: str | None,
                        threshold_pct: float | None, verdict_metric: str | None,
                        futility_pct: float | None) -> UntilRequest | None:
    """``--until decided`` with its budget, threshold, verdict metric and futility checked (one-line errors,
    before anything starts); None without ``--until``."""
    limit = check_until(until, budget)
    if limit is None:
        if futility_pct is not None:
            raise KnobError(f"--futility {futility_pct:g}: only with --until decided (allowed: --until decided "
                            "--budget ... --futility PCT)")
        return None
    if resume:
        raise KnobError("--resume: not with --until decided (allowed: --resume alone finishes an aborted run's "
                        "round)")
    threshold_pct = DEFAULT_THRESHOLD_PCT if threshold_pct is None else threshold_pct
    if not 0 < threshold_pct < 100:
        raise KnobError(f"--threshold {threshold_pct:g}: out of range (allowed: above 0 and below 100 per cent)")
    futility = check_futility(futility_pct)
    if verdict_metric is not None:
        verdict_metric = resolve(verdict_metric, option="--verdict-metric")
    if not profile_sweeps(loaded):
        raise KnobError("--until decided: the profile sweeps no knob, so there is nothing to compare "
                        "(allowed: a profile with a sweep: of two or more values)")
    return UntilRequest(limit, threshold_pct, futility, verdict_metric)


def check_order(loaded: LoadedProfile, order: str | None, seed: int | None) -> tuple[str, int | None]:
    """The order within each repeat and its seed (None: the profile's); a random order without a seed draws one."""
    order = order or loaded.profile.order
    if order not in ORDERS:
        raise KnobError(f"--order {order}: not an order (allowed: {', '.join(ORDERS)})")
    seed = seed if seed is not None else loaded.profile.seed
    if seed is not None and not 0 <= seed < 2**32:
        raise KnobError(f"--seed {seed}: out of range (allowed: 0..{2**32 - 1})")
    if order == "random" and seed is None:
        seed = random.SystemRandom().randrange(2**32)
    return order, seed


def _probe_host(db_path: str | Path, lab: str, resume: bool, seconds: float,
                on_event: OnEvent | None) -> Steadiness:
    """The steadiness probe, once the store (and the run to resume) is known to be usable: a bad ``--db`` fails
    now, not after the probe."""
    from labctl.host.steadiness import probe

    Store.check_usable(db_path)
    if resume:
        with Store(db_path) as store:
            find_resumable(store, lab)
    notify(on_event, "note", lab=lab, message=f"steadiness: probing the host for {seconds:g} s before the first trial")
    steadiness = probe(seconds)
    notify(on_event, "steadiness", lab=lab, data=steadiness, message=steadiness.describe())
    return steadiness


def _until_course(sweep: dict[str, list[Any]], request: UntilRequest, order: str, seed: int | None) -> Until:
    """The course of an until-decided sweep. A block is in the fewest-boots order on every lab (domain knobs
    slowest; the embedded lab restarts on them too), and the next block, reversed, starts where this one
    ended: one restart per block."""
    configs = [e["config"] for e in build_plan(sweep, 1, True)]
    course = Until(sweep, configs, request.limit, request.threshold_pct, request.verdict_metric, order=order,
                   seed=seed, futility=request.futility)
    if request.verdict_metric is not None:
        course.lower_is_better = lower_is_better(request.verdict_metric)
    return course


def _record_setting(session: RunSession, steadiness: Steadiness | None, order: str, seed: int | None, resume: bool,
                    sweeps_builds: bool) -> None:
    """Into the run's info: the probe (its page and JSON show it; not its samples), and the order and seed
    when they are not the plain interleaving (a random order, or builds alternating)."""
    if steadiness is not None:
        session.store.update_run_info(session.run_id, steadiness=steadiness.to_dict(samples=False))
    if not resume and (order != "interleaved" or sweeps_builds):
        session.store.update_run_info(session.run_id, order=order, seed=seed)


def _entry_measurer(loaded: LoadedProfile, base: dict[str, Any], session: RunSession, labs: LabSession,
                    runner: TrialRunner, search: SearchSettings | None, on_event: OnEvent | None,
                    host_warning: str | None) -> Callable[[dict[str, Any]], TrialRecord]:
    """Measure one plan entry: its profile (``base`` with the entry's knobs), a trial (or an NDR/PDR search, its
    measurements stored beside it) in ``labs``, the block it belongs to and the host's warning on the record,
    the record committed and counted."""

    def measure(entry: dict[str, Any]) -> TrialRecord:
        trial_profile = validate_data(with_knobs(copy.deepcopy(base), entry["config"]), loaded.source)
        with session.trial(entry["seq"]):
            if search is None:
                record = runner(trial_profile, entry["repeat_index"], on_event, session=labs)
            else:
                record, _result = ndr_trial(trial_profile, search, labs, session.add_measurement,
                                            on_event, entry["repeat_index"])
        if "block" in entry:
            record.details.update(block=entry["block"], block_position=entry["position"])
        if host_warning and host_warning not in record.warnings:
            record.warnings.append(host_warning)
        session.add(record, entry["seq"], entry)
        return record

    return measure


def _run_course(course: Until, session: RunSession, measure: Callable[[dict[str, Any]], TrialRecord],
                on_event: OnEvent | None, lab: str) -> dict[str, Any]:
    """An until-decided sweep's rounds, each added to the run's plan as it is planned; the course and the
    verdicts into the run's info (``until``)."""

    def extend(entries: list[dict[str, Any]]) -> None:
        session.store.extend_plan(session.run_id, entries)
        session.total += len(entries)

    session.store.update_run_info(session.run_id, order=course.order, seed=course.seed, blocked=True)
    summary = run_until(course, measure, extend, [], default_metric, lower_is_better, on_event, lab)
    session.store.update_run_info(session.run_id, until=summary)
    return summary


def _record_boots(session: RunSession, labs: LabSession) -> None:
    """The guests' boots and their time into the run's info (a resumed run adds to its first part)."""
    if not labs.boots:
        return
    info = labs.info()
    before = session.store.run(session.run_id)["info"]
    session.store.update_run_info(session.run_id, boots=before.get("boots", 0) + info["boots"],
                                  boot_s=round(before.get("boot_s", 0.0) + info["boot_s"], 2),
                                  run_s=round(before.get("run_s", 0.0) + info["run_s"], 2))
