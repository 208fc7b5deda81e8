"""``labctl bisect``'s records in the result store (tables ``bisects`` and ``bisect_steps``, schema v4).

A bisect is stored when it starts (its profile, recipe, repository, the good and bad commits, its key and
its owner: pid, start time, host), and each step the moment it is decided: the commit, its kind
(``measure``: built and measured against good and bad; ``skip``: it did not build; ``final``: the first
bad commit against its parent), its verdict, the run that holds its trials, and what it saw. A step is
unique per (bisect, commit, kind), so a resumed bisect cannot measure a commit twice; every write is one
transaction of :class:`~labctl.results.store.Store`, committed before the next step starts.

Resuming (:func:`resumable`) finds the newest unfinished bisect with the same key; one whose owner still
runs is refused (:class:`~labctl.errors.RunBusyError`), one whose owner has gone (killed) is claimed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from labctl import owner
from labctl.errors import RunBusyError, StoreError, UnknownRunError
from labctl.results.store import Store

STEP_KINDS = ("measure", "skip", "final")
STATUSES = ("running", "finished", "aborted")


@dataclass
class Step:
    position: int
    sha: str
    kind: str
    verdict: str  # good, bad, skip, cannot tell (a measure step); regression, progression, ... (the final pair)
    run_id: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@contextmanager
def _errors(store: Store, doing: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        raise StoreError(f"{store.path}: {doing}: {exc}") from exc


def create(store: Store, profile: str, recipe: str, repo: str, good: str, bad: str, key: str,
           info: dict[str, Any]) -> int:
    """A new bisect, owned by this process."""
    with store.transaction() as conn, _errors(store, "create a bisect"):
        cursor = conn.execute(
            "INSERT INTO bisects (profile_name, recipe, repo, good, bad, key, created_at, owner_json, info_json)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (profile, recipe, repo, good, bad, key, time.time(), json.dumps(owner.me()), json.dumps(info, default=str)))
        return int(cursor.lastrowid)


def resumable(store: Store, key: str) -> tuple[int, dict[str, Any] | None] | None:
    """The newest unfinished bisect of ``key``, claimed by this process: (id, the owner it had when that
    one had been killed, else None); None when there is none. A live owner is refused."""
    with store.transaction() as conn, _errors(store, "resume a bisect"):
        row = conn.execute("SELECT id, status, owner_json FROM bisects WHERE key = ? AND status != 'finished'"
                           " ORDER BY id DESC LIMIT 1", (key,)).fetchone()
        if row is None:
            return None
        previous = json.loads(row[2]) or None
        if row[1] == "running" and owner.alive(previous):
            raise RunBusyError(f"--good/--bad: bisect {row[0]} of this range is still being run by "
                               f"{owner.describe(previous)} (allowed: wait for it, or stop it and run again to resume)")
        conn.execute("UPDATE bisects SET status = 'running', finished_at = NULL, owner_json = ? WHERE id = ?",
                     (json.dumps(owner.me()), row[0]))
    return int(row[0]), (previous if row[1] == "running" else None)


def add_step(store: Store, bisect_id: int, sha: str, kind: str, verdict: str, run_id: int | None = None,
             detail: dict[str, Any] | None = None) -> Step:
    """Store one decided step (the next position); a commit already stepped on in this kind is refused."""
    if kind not in STEP_KINDS:
        raise ValueError(f"step kind {kind!r} (allowed: {', '.join(STEP_KINDS)})")
    with store.transaction() as conn, _errors(store, "store a bisect step"):
        position = int(conn.execute("SELECT COALESCE(MAX(position), 0) + 1 FROM bisect_steps WHERE bisect_id = ?",
                                    (bisect_id,)).fetchone()[0])
        conn.execute("INSERT INTO bisect_steps (bisect_id, position, sha, kind, verdict, run_id, detail_json)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (bisect_id, position, sha, kind, verdict, run_id, json.dumps(detail or {}, default=str)))
    return Step(position, sha, kind, verdict, run_id, detail or {})


def steps(store: Store, bisect_id: int) -> list[Step]:
    """The bisect's steps in the order they were decided."""
    with store.transaction() as conn, _errors(store, "read a bisect's steps"):
        rows = conn.execute("SELECT position, sha, kind, verdict, run_id, detail_json FROM bisect_steps"
                            " WHERE bisect_id = ? ORDER BY position", (bisect_id,)).fetchall()
    return [Step(p, sha, kind, verdict, run_id, json.loads(detail)) for p, sha, kind, verdict, run_id, detail in rows]


def update_info(store: Store, bisect_id: int, **info: Any) -> None:
    with store.transaction() as conn, _errors(store, "update a bisect"):
        row = conn.execute("SELECT info_json FROM bisects WHERE id = ?", (bisect_id,)).fetchone()
        if row is None:
            raise UnknownRunError(f"bisect {bisect_id}: no such bisect in {store.path}")
        merged = {**json.loads(row[0]), **info}
        conn.execute("UPDATE bisects SET info_json = ? WHERE id = ?", (json.dumps(merged, default=str), bisect_id))


def finish(store: Store, bisect_id: int, status: str = "finished") -> None:
    if status not in STATUSES[1:]:
        raise ValueError(f"a bisect ends as one of {', '.join(STATUSES[1:])}, not {status!r}")
    with store.transaction() as conn, _errors(store, "finish a bisect"):
        conn.execute("UPDATE bisects SET status = ?, finished_at = ?, owner_json = '{}' WHERE id = ?",
                     (status, time.time(), bisect_id))


_COLUMNS = ("id", "profile_name", "recipe", "repo", "good", "bad", "key", "created_at", "finished_at", "status")


def bisects(store: Store) -> list[dict[str, Any]]:
    """Every bisect of the store, oldest first (without their steps)."""
    with store.transaction() as conn, _errors(store, "list bisects"):
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)}, info_json FROM bisects ORDER BY id").fetchall()
    return [{**dict(zip(_COLUMNS, row[:-1])), "info": json.loads(row[-1])} for row in rows]


def bisect(store: Store, bisect_id: int | None = None) -> dict[str, Any]:
    """One bisect (default: the newest) with its info and steps."""
    found = bisects(store)
    if not found:
        raise UnknownRunError(f"--bisect: {store.path} holds no bisect (allowed: run labctl bisect first)")
    if bisect_id is None:
        chosen = found[-1]
    else:
        chosen = next((b for b in found if b["id"] == bisect_id), None)
        if chosen is None:
            raise UnknownRunError(f"--bisect {bisect_id}: no such bisect in {store.path} (allowed: "
                                  f"{', '.join(str(b['id']) for b in found)})")
    return {**chosen, "steps": [s.to_dict() for s in steps(store, chosen["id"])]}
