"""A run in the result store, trial by trial: the lifecycle every measuring command shares.

``sweep`` (a plan of configurations known in advance) and ``tune`` (configurations chosen as results
come in) both open a :class:`RunSession`: the run is created (or, with ``--resume``, reopened), every
finished trial is committed before the next one starts, and an exception or signal that ends the run
early marks the trial in flight ``aborted`` and the run ``aborted`` (resumable); otherwise the run is
``finished`` (or ``failed`` when a trial failed).

A trial that is an NDR/PDR search stores its measurements too (:meth:`RunSession.add_measurement`):
they are trials of the run, but not its plan's entries, so progress (``done``/``total``) and the ok and
failed counts count the searches, one per plan entry, and never the measurements inside them.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Iterator

from labctl.errors import UserError
from labctl.events import OnEvent, notify
from labctl.owner import describe
from labctl.profile.load import LoadedProfile
from labctl.results.record import TrialRecord
from labctl.results.store import Store


class RunSession:
    def __init__(self, store: Store, run_id: int, total: int, done_before: int, on_event: OnEvent | None):
        self.store = store
        self.run_id = run_id
        self.total = total
        self.done_before = done_before
        self.on_event = on_event
        self.ok = 0
        self.failed = 0
        self.trial_ids: list[int] = []  # every trial stored, measurements included
        self.entries = 0  # the trials (plan entries, or a tune's evaluations) stored: not their measurements
        self.started = time.monotonic()
        self._in_flight: int | None = None

    @property
    def done(self) -> int:
        return self.done_before + self.entries

    @contextlib.contextmanager
    def trial(self, seq: int | None = None) -> Iterator[None]:
        """Around one trial: if it is interrupted, its plan entry is stored as ``aborted``."""
        self._in_flight = seq
        try:
            yield
        except BaseException:
            if seq is not None:
                self.store.mark_aborted(self.run_id, seq)
            raise
        finally:
            self._in_flight = None

    def add(self, record: TrialRecord, seq: int | None = None, entry: dict[str, Any] | None = None) -> int:
        """Commit a finished trial (status ok or failed) and report it: one more done."""
        trial_id = self._store(record, seq)
        self._count(record, entry)
        return trial_id

    def _count(self, record: TrialRecord, entry: dict[str, Any] | None) -> None:
        self.entries += 1
        if record.status == "ok":
            self.ok += 1
        else:
            self.failed += 1
        notify(self.on_event, "trial", run_id=self.run_id, record=record, done=self.done,
               total=self.total or None, data=entry, elapsed_s=time.monotonic() - self.started)

    def store_partial(self, record: TrialRecord) -> int:
        """Store a trial still in flight (a soak's first checkpoint): in the store at once, counted only when
        :meth:`replace` is told it is final."""
        return self._store(record, None)

    def replace(self, trial_id: int, record: TrialRecord, final: bool = False) -> None:
        """Rewrite a trial stored in flight (:meth:`store_partial`); ``final``: it finished (ok or failed) and
        counts as one more done, as :meth:`add` would."""
        record.run_id = self.run_id
        self.store.replace_trial(trial_id, record)
        record.id = trial_id
        if final:
            self._count(record, None)

    def add_measurement(self, record: TrialRecord) -> int:
        """Commit one measurement of a trial in flight (an NDR/PDR search's calibration, search or latency
        trial): stored and reported as a ``trial`` event whose ``done`` is unchanged (its ``data`` says
        ``measurement``), counted neither as done nor as ok or failed."""
        trial_id = self._store(record, None)
        notify(self.on_event, "trial", run_id=self.run_id, record=record, done=self.done,
               total=self.total or None, data={"measurement": record.details.get("role")},
               elapsed_s=time.monotonic() - self.started)
        return trial_id

    def _store(self, record: TrialRecord, seq: int | None) -> int:
        record.run_id = self.run_id
        trial_id = self.store.add_trial(record, seq)
        record.id = trial_id
        self.trial_ids.append(trial_id)
        return trial_id


def base_data(loaded: LoadedProfile) -> dict[str, Any]:
    """The profile every trial of a run starts from: the validated profile without its sweep."""
    data = loaded.profile.model_dump()
    data["sweep"] = {}
    return data


def find_resumable(store: Store, name: str) -> int:
    """The newest unfinished (running or aborted) run of profile ``name``."""
    for run in reversed(store.runs()):
        if run["profile_name"] == name and run["status"] in ("running", "aborted"):
            return int(run["id"])
    raise UserError(f"--resume: no unfinished run of profile {name} in {store.path} (allowed: start a new sweep)")


@contextlib.contextmanager
def open_session(db_path: str | Path, name: str, base: dict[str, Any] | None = None,
                 plan: list[dict[str, Any]] | None = None, resume: bool = False,
                 on_event: OnEvent | None = None, run: int | None = None) -> Iterator[RunSession]:
    """Create the run (``base`` profile data and ``plan``), or reopen the newest unfinished run of
    ``name`` (``resume``), or the unfinished run ``run`` (a bisect's step that was killed); yield its
    session; close the run as finished, failed or aborted."""
    with Store(db_path) as store:
        if resume or run is not None:
            run_id = find_resumable(store, name) if run is None else run
            stored = store.run(run_id)
            left = store.reopen_run(run_id)
            if left is not None:
                notify(on_event, "note", lab=name, message=f"run {run_id} was left running by {describe(left)}, "
                                                           "which has exited: resuming it")
            total = len(stored["plan"])
            done_before = total - len(store.missing_plan(run_id))
        else:
            run_id = store.create_run(name, base or {}, plan or [])
            total, done_before = len(plan or []), 0
        session = RunSession(store, run_id, total, done_before, on_event)
        notify(on_event, "run", run_id=run_id, total=total or None, done=done_before, lab=name)
        try:
            yield session
        except BaseException:
            store.finish_run(run_id, "aborted")
            raise
        store.finish_run(run_id, "finished" if session.failed == 0 else "failed")
