"""A face's way into a result store: open one by its path (with the one message for a missing store),
pick a run by id or name (or the newest), read its trials, keep one host's, resolve the baseline and
candidate runs a comparison reads.

Every error is a :class:`~labctl.errors.UserError` naming the option (``--db``, ``--baseline``,
``--host``, ...) and the allowed values. :mod:`labctl.api` calls these; nothing here creates a store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labctl.errors import UserError
from labctl.results.record import TrialRecord, judged_trials
from labctl.results.store import Store

__all__ = ["DEFAULT_DB", "open_store", "ids_text", "run_ids", "run_trials", "run_and_trials", "only_host", "resolve_run", "run_pair"]

#: The store a face reads and writes when not told otherwise (``--db``).
DEFAULT_DB = Path("labctl.db")

RUN_KEYS = ("id", "profile_name", "host", "created_at", "status")  # a run's facts a comparison shows


def open_store(db: str | Path, option: str = "--db") -> Store:
    """The existing store at ``db`` (never created here); ``option`` names it in the error."""
    db = Path(db)
    if not db.exists():
        raise UserError(f"{option} {db}: no such result store (run `labctl sweep` or `labctl import` first)")
    return Store(db)


def ids_text(ids: list[int]) -> str:
    """Run ids as an error message's allowed values: ``1..9``, ``2, 5`` or ``none``."""
    if not ids:
        return "none"
    if ids == list(range(ids[0], ids[-1] + 1)) and len(ids) > 2:
        return f"{ids[0]}..{ids[-1]}"
    return ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")


def run_ids(db: str | Path) -> list[int]:
    with open_store(db) as store:
        return [r["id"] for r in store.runs()]


def only_host(records: list[TrialRecord], host: str | None, where: str) -> list[TrialRecord]:
    """``records`` of ``host`` (all when None); none of that host is an error naming the hosts there are."""
    if host is None:
        return records
    hosts = sorted({r.env.host for r in records if r.env.host})
    kept = [r for r in records if r.env.host == host]
    if not kept:
        raise UserError(f"--host {host}: no trials of that host in {where} "
                        f"(allowed: {', '.join(hosts) or 'none recorded'})")
    return kept


def run_trials(db: str | Path, run: int | None = None, status: str | None = "ok", host: str | None = None,
               measurements: bool = False) -> tuple[int, list[TrialRecord], dict[str, Any]]:
    """(run id, its trials of ``status``, the run's info) for ``run`` or the newest run. The single
    measurements of an NDR/PDR search are left out unless ``measurements``."""
    with open_store(db) as store:
        run_id = run if run is not None else store.latest_run_id()
        if run_id is None:
            raise UserError(f"--db {db}: holds no runs")
        info = store.run(run_id)["info"]  # UnknownRunError for a bad id
        records = store.trials(run_id, status=status)
    if not measurements:
        records = judged_trials(records)
    return run_id, only_host(records, host, f"run {run_id}"), info


def run_and_trials(db: str | Path, run: int | None, option: str,
                   db_option: str = "--db") -> tuple[dict[str, Any], list[TrialRecord]]:
    """(the run's facts, its trials of every status): ``run``, or the newest run of ``db``; an unknown
    id is an error naming ``option`` and the ids there are."""
    with open_store(db, db_option) as store:
        ids = [r["id"] for r in store.runs()]
        if run is None and not ids:
            raise UserError(f"{db_option} {db}: holds no runs")
        run = ids[-1] if run is None else run
        if run not in ids:
            raise UserError(f"{option} {run}: no such run in {db} (allowed: {ids_text(ids)})")
        info = store.run(run)
        records = store.trials(run, status=None)
    return {**{k: info[k] for k in RUN_KEYS}, "db": str(db)}, records


def resolve_run(db: str | Path, value: int | str | None, option: str = "--run", exclude: int | None = None,
                db_option: str = "--db") -> int | None:
    """A run given as an id or a name (a face's text): the id. A whole number is an id (checked where
    the run is read); any other text names runs by their name, which is the profile's name for a run
    labctl measured and ``labctl import --name`` for an imported one. A name that several runs carry
    means the newest of them (a baseline accepted again under the same name replaces the older one),
    ``exclude`` left out (compare's candidate, when the baseline is looked up in the same store).
    ``None`` stays ``None`` (the caller's default run). An unknown name is a UserError naming the ids and
    names ``db`` holds."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    with open_store(db, db_option) as store:
        listed = store.runs()
    if text:
        named = [r["id"] for r in listed if r["profile_name"] == text and r["id"] != exclude]
        if named:
            return named[-1]
    ids = ids_text([r["id"] for r in listed])
    names = list(dict.fromkeys(r["profile_name"] for r in reversed(listed) if r["profile_name"]))
    shown = ", ".join(names[:8]) + (f", and {len(names) - 8} more" if len(names) > 8 else "")
    what = "no run of that name" if text else "empty"
    if text and exclude is not None and any(r["profile_name"] == text for r in listed):
        what = f"only the candidate run {exclude} has that name"
    raise UserError(f"{option} {value}: {what} in {db} (allowed: a run id, {ids}; or a run name, "
                    f"newest first: {shown or 'none'})")


def run_pair(db: str | Path, baseline: int | str | None, candidate: int | str | None,
             baseline_db: str | Path | None = None):
    """The runs a comparison reads: ((baseline facts, trials), (candidate facts, trials), a phrase naming
    both). The candidate is a run of ``db`` (default: its newest); the baseline a run of ``baseline_db``
    (default ``db``: then it is required, and by name it never resolves to the candidate, nor by id may it
    be the candidate). Either is an id or a name (:func:`resolve_run`)."""
    base_db = Path(db if baseline_db is None else baseline_db)
    base_option = "--db" if baseline_db is None else "--baseline-db"
    same = base_db.resolve() == Path(db).resolve()
    candidate = resolve_run(db, candidate, "--candidate")
    ids = run_ids(db) if same else []
    if same and baseline is None:
        raise UserError(f"--baseline: required when the baseline is in the candidate's store (allowed: a run "
                        f"of {db}: {ids_text(ids)}; or --baseline-db another store)")
    newest = (ids or [None])[-1] if same and candidate is None else candidate
    baseline = resolve_run(base_db, baseline, "--baseline", exclude=newest if same else None, db_option=base_option)
    cand_run, cand_records = run_and_trials(db, candidate, "--candidate")
    base_run, base_records = run_and_trials(base_db, baseline, "--baseline", base_option)
    if same and base_run["id"] == cand_run["id"]:
        others = [i for i in ids if i != cand_run["id"]]
        raise UserError(f"--baseline {baseline}: the candidate run itself (allowed: another run of {db}: "
                        f"{ids_text(others)})")
    where = (f"runs {base_run['id']} and {cand_run['id']}" if same else
             f"baseline run {base_run['id']} of {base_db} and candidate run {cand_run['id']} of {db}")
    return (base_run, base_records), (cand_run, cand_records), where
