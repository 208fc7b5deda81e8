"""Sweeps: cross the profile's sweep matrix, interleave repeats (A B C A B C), store every trial at once.

A sweep is a run in the result store with its plan (one entry per trial, in execution order).
``resume`` finishes the newest unfinished run of the profile without repeating finished trials.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from labctl.errors import UserError
from labctl.profile.knobs import crossed, with_knobs
from labctl.profile.load import LoadedProfile, validate_data
from labctl.results.record import TrialRecord
from labctl.signals import stoppable
from labctl.results.store import Store


def build_plan(sweep: dict[str, list[Any]], repeat: int) -> list[dict[str, Any]]:
    """Every configuration once per repeat, configurations interleaved: seq = repeat * n + index."""
    combos = list(crossed(sweep))
    return [{"seq": r * len(combos) + i, "config": combo, "repeat_index": r}
            for r in range(repeat) for i, combo in enumerate(combos)]


@dataclass
class SweepEvent:
    """What a progress display needs after each trial."""

    done: int
    total: int
    entry: dict[str, Any]
    record: TrialRecord | None = None
    elapsed_s: float = 0.0
    done_here: int = 0  # trials run by this invocation (a resumed sweep started with some done)

    @property
    def eta_s(self) -> float | None:
        return self.elapsed_s / self.done_here * (self.total - self.done) if self.done_here else None


@dataclass
class SweepResult:
    run_id: int
    ok: int = 0
    failed: int = 0
    aborted: int = 0
    trial_ids: list[int] = field(default_factory=list)


def _base_data(loaded: LoadedProfile) -> dict[str, Any]:
    data = loaded.profile.model_dump()
    data["sweep"] = {}
    return data


def _find_resumable(store: Store, name: str) -> int:
    for run in reversed(store.runs()):
        if run["profile_name"] == name and run["status"] in ("running", "aborted"):
            return int(run["id"])
    raise UserError(f"--resume: no unfinished run of profile {name} in {store.path} (allowed: start a new sweep)")


TrialRunner = Callable[[LoadedProfile, int], TrialRecord]


def _default_runner(loaded: LoadedProfile, repeat_index: int) -> TrialRecord:
    from labctl.measure.trial import run_trial

    return run_trial(loaded, repeat_index=repeat_index)


def run_sweep(loaded: LoadedProfile, db_path: str | Path, repeat: int | None = None, resume: bool = False,
              on_start: Callable[[int, int], None] | None = None,
              on_trial: Callable[[SweepEvent], None] | None = None,
              runner: TrialRunner = _default_runner,
              steadiness_s: float | None = None,
              on_steadiness: Callable[[Any], None] | None = None) -> SweepResult:
    """Run (or resume) the sweep of ``loaded``; every finished trial is committed before the next starts.

    ``steadiness_s``: first probe how steady the host's speed is for that many seconds
    (:func:`labctl.host.steadiness.probe`, after every check of the request and before the run is created
    or reopened); when it is unsteady, every trial of this sitting carries the probe's warning."""
    if steadiness_s is not None:
        from labctl.host.steadiness import check_arguments

        check_arguments(steadiness_s)
    profile = loaded.profile
    if profile.backend != "embedded":
        raise UserError(f"{loaded.source}: backend: {profile.backend} profiles cannot be swept yet "
                        "(allowed: embedded)")
    host_warning: str | None = None

    def probe_host() -> None:
        nonlocal host_warning
        if steadiness_s is None:
            return
        from labctl.host.steadiness import probe

        measured = probe(steadiness_s)
        host_warning = measured.trial_warning()
        if on_steadiness:
            on_steadiness(measured)

    with stoppable():
        base: dict[str, Any] = {}
        plan: list[dict[str, Any]] = []
        if not resume:
            base = _base_data(loaded)
            plan = build_plan(profile.sweep, repeat or profile.repeat)
            if steadiness_s is not None:
                Store.check_usable(db_path)  # a bad --db fails now, not after the probe
            probe_host()  # before the store is touched: an interrupted probe leaves nothing behind
        with Store(db_path) as store:
            if resume:
                run_id = _find_resumable(store, profile.name)
                probe_host()
                stored = store.run(run_id)
                base = stored["profile"]
                store.reopen_run(run_id)
                todo = store.missing_plan(run_id)
                total = len(stored["plan"])
                done_before = total - len(todo)
            else:
                run_id = store.create_run(profile.name, base, plan)
                todo, total, done_before = plan, len(plan), 0
            result = SweepResult(run_id)
            if on_start:
                on_start(run_id, total)
            started = time.monotonic()
            for number, entry in enumerate(todo, start=1):
                trial_profile = validate_data(with_knobs(copy.deepcopy(base), entry["config"]), loaded.source)
                try:
                    record = runner(trial_profile, entry["repeat_index"])
                except BaseException:
                    store.mark_aborted(run_id, entry["seq"])
                    store.finish_run(run_id, "aborted")
                    raise
                record.run_id = run_id
                if host_warning and host_warning not in record.warnings:
                    record.warnings.append(host_warning)
                trial_id = store.add_trial(record, entry["seq"])
                result.trial_ids.append(trial_id)
                if record.status == "ok":
                    result.ok += 1
                else:
                    result.failed += 1
                if on_trial:
                    on_trial(SweepEvent(done_before + number, total, entry, record, time.monotonic() - started,
                                        number))
            store.finish_run(run_id, "finished" if result.failed == 0 else "failed")
        return result
