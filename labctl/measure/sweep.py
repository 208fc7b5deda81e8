"""Sweeps: cross the profile's sweep matrix, interleave repeats (A B C A B C), store every trial at once.

A sweep is a run in the result store with its plan (one entry per trial, in execution order).
``resume`` finishes the newest unfinished run of the profile without repeating finished trials.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.errors import KnobError, UserError
from labctl.events import OnEvent, notify
from labctl.measure.session import find_resumable, open_session
from labctl.profile.knobs import crossed, with_knobs
from labctl.profile.load import LoadedProfile, validate_data
from labctl.results.record import TrialRecord
from labctl.results.store import Store

MAX_REPEAT = 100


def build_plan(sweep: dict[str, list[Any]], repeat: int) -> list[dict[str, Any]]:
    """Every configuration once per repeat, configurations interleaved: seq = repeat * n + index."""
    combos = list(crossed(sweep))
    return [{"seq": r * len(combos) + i, "config": combo, "repeat_index": r}
            for r in range(repeat) for i, combo in enumerate(combos)]


@dataclass
class SweepResult:
    run_id: int
    ok: int = 0
    failed: int = 0
    trial_ids: list[int] = field(default_factory=list)
    steadiness: Any = None  # the probe's Steadiness, when one ran


def base_data(loaded: LoadedProfile) -> dict[str, Any]:
    """The profile every trial of a run starts from: the validated profile without its sweep."""
    data = loaded.profile.model_dump()
    data["sweep"] = {}
    return data


TrialRunner = Callable[[LoadedProfile, int, OnEvent | None], TrialRecord]


def _default_runner(loaded: LoadedProfile, repeat_index: int, on_event: OnEvent | None) -> TrialRecord:
    from labctl.measure.trial import run_trial

    return run_trial(loaded, repeat_index=repeat_index, on_event=on_event)


def check_repeat(repeat: int | None) -> None:
    if repeat is not None and not 1 <= repeat <= MAX_REPEAT:
        raise KnobError(f"--repeat {repeat}: out of range (allowed: 1..{MAX_REPEAT})")


def run_sweep(loaded: LoadedProfile, db_path: str | Path, repeat: int | None = None, resume: bool = False,
              runner: TrialRunner = _default_runner, steadiness_s: float | None = None,
              on_event: OnEvent | None = None) -> SweepResult:
    """Run (or resume) the sweep of ``loaded``; every finished trial is committed before the next starts.

    ``steadiness_s``: first probe how steady the host's speed is for that many seconds
    (:func:`labctl.host.steadiness.probe`, after every check of the request and before the run is
    created; an interrupted probe leaves nothing behind); when it is unsteady, every trial of this
    sitting carries the probe's warning."""
    check_repeat(repeat)
    if steadiness_s is not None:
        from labctl.host.steadiness import check_arguments

        check_arguments(steadiness_s)
    profile = loaded.profile
    if profile.backend != "embedded":
        raise UserError(f"{loaded.source}: backend: {profile.backend} profiles cannot be swept yet "
                        "(allowed: embedded)")
    result = SweepResult(run_id=0)
    with signals.stoppable():
        if steadiness_s is not None:
            Store.check_usable(db_path)  # a bad --db (or --resume without a run) fails now, not after the probe
            if resume:
                with Store(db_path) as store:
                    find_resumable(store, profile.name)
            from labctl.host.steadiness import probe

            notify(on_event, "note", lab=profile.name,
                   message=f"steadiness: probing the host for {steadiness_s:g} s before the first trial")
            result.steadiness = probe(steadiness_s)
            notify(on_event, "steadiness", lab=profile.name, data=result.steadiness,
                   message=result.steadiness.describe())
        host_warning = result.steadiness.trial_warning() if result.steadiness is not None else None
        base = base_data(loaded)
        plan = [] if resume else build_plan(profile.sweep, repeat or profile.repeat)
        with open_session(db_path, profile.name, base, plan, resume, on_event) as session:
            result.run_id = session.run_id
            todo = session.store.missing_plan(session.run_id) if resume else plan
            if resume:
                base = session.store.run(session.run_id)["profile"]
            for entry in todo:
                trial_profile = validate_data(with_knobs(copy.deepcopy(base), entry["config"]), loaded.source)
                with session.trial(entry["seq"]):
                    record = runner(trial_profile, entry["repeat_index"], on_event)
                if host_warning and host_warning not in record.warnings:
                    record.warnings.append(host_warning)
                session.add(record, entry["seq"], entry)
            result.ok, result.failed, result.trial_ids = session.ok, session.failed, session.trial_ids
    return result
