"""The SQLite result store: runs, their planned trials, and every finished trial.

One file (default ``./labctl.db``), stdlib ``sqlite3``, WAL mode, a busy timeout so a reader (the TUI,
a report) and the sweep writer can share it. Every trial is committed the moment it is added
(``synchronous=FULL``): a ``kill -9`` of the sweep right after :meth:`Store.add_trial` returns loses
nothing.

Trials are stored as :class:`labctl.results.record.TrialRecord` (declared once in ``record.py``); the store
splits a record into normalised rows (the tables of :mod:`labctl.results.schema`, whose migrations it
applies on open) and rebuilds an equal record on the way out; :mod:`labctl.results.codecs` encodes the
values.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labctl import faults, owner
from labctl.errors import (LabError, NotAStoreError, ReadOnlyStoreError, RunBusyError, StoreError, UnknownRunError,
                           UserError)
from labctl.paths import can_create
from labctl.results.codecs import dumps, env_fingerprint, status_filter
from labctl.results.record import SEARCH_ROLES, TrialRecord
from labctl.results.schema import MIGRATIONS, SCHEMA_VERSION, insert_metrics

DEFAULT_PATH = Path("labctl.db")

RUN_STATUSES = ("running", "finished", "failed", "aborted", "imported")
DONE_STATUSES = ("ok", "failed")  # a plan entry with a trial in one of these is not re-run by --resume
#: SQL: the trial ``t`` stands for a plan entry (not one of an NDR/PDR search's single measurements);
#: takes SEARCH_ROLES as parameters.
_PLAN_ENTRY = ("COALESCE(json_extract(t.details_json, '$.role'), '') NOT IN ("
               + ", ".join("?" * len(SEARCH_ROLES)) + ")")


SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 8, 11, 13, 26  # primary result codes


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


THIS_HOST: Any = object()  # create_run(host=THIS_HOST): the machine running labctl


class Store:
    """The result store. Use as a context manager, or call :meth:`close`.

    Every public write commits before it returns, unless it runs inside :meth:`transaction`, in which
    case the whole block commits (or rolls back) at once.
    """

    def __init__(self, path: str | Path = DEFAULT_PATH, *, timeout_s: float = 5.0):
        self.path = Path(path)
        self._depth = 0
        # a store on a read-only file system is opened read-only (reports work; a write says why it fails)
        self.read_only = self.path.exists() and _read_only_fs(self.path)
        try:
            if self.read_only:
                uri = f"file:{quote(str(self.path.resolve()))}?mode=ro&immutable=1"
                self._conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None)
            else:
                self._conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: cannot open the result store: {exc}") from exc
        try:
            self._check_is_store()
            with self._errors("open"):
                self._conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
                self._conn.execute("PRAGMA foreign_keys = ON")
                if not self.read_only:
                    self._conn.execute("PRAGMA journal_mode = WAL")
                    self._conn.execute("PRAGMA synchronous = FULL")
            self._upgrade()
        except BaseException:
            self._conn.close()
            raise

    @classmethod
    def check_usable(cls, path: str | Path) -> None:
        """Raise the error opening ``path`` would raise, without creating anything: an existing file must
        be a labctl store; a new one needs an existing, writable directory."""
        path = Path(path)
        if path.exists():
            cls(path).close()
            return
        if not can_create(path):
            raise UserError(f"--db {path}: {path.parent} is not a writable directory "
                            "(allowed: a store made by labctl, or a new file in a writable directory)")

    def _check_is_store(self) -> None:
        """Refuse a file that is not a labctl store before changing anything in it (journal mode)."""
        try:
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            tables = self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == SQLITE_CORRUPT:
                raise self._error("read it", exc) from None
            raise NotAStoreError(f"--db {self.path}: not a labctl result store ({exc}) "
                                 "(allowed: a store made by labctl sweep/import, or a new file)") from None
        if version == 0 and tables:
            raise NotAStoreError(f"--db {self.path}: not a labctl result store (it holds tables "
                                 f"{', '.join(t[0] for t in tables[:5])}) (allowed: a store made by labctl, "
                                 "or a new file)")

    # -- plumbing ----------------------------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise self._error(doing, exc) from exc

    def _error(self, doing: str, exc: sqlite3.Error) -> LabError:
        """One line for an SQLite failure: the user's file (read-only, corrupted: exit 2) or the host's
        (a full disk: exit 1). A failed write is rolled back; what was stored before stays as it was."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code == SQLITE_READONLY:
            return ReadOnlyStoreError(f"--db {self.path}: is read-only, cannot {doing} "
                                      "(allowed: a writable store; reports read a read-only one)")
        if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
            return NotAStoreError(f"--db {self.path}: is corrupted, cannot {doing} ({exc}) (allowed: an intact "
                                  "store; `sqlite3 FILE .recover` may save its rows)")
        if code == SQLITE_FULL:
            return StoreError(f"{self.path}: the disk is full, cannot {doing} (nothing of it was stored; what "
                              "was stored before is intact)")
        return StoreError(f"{self.path}: {doing}: {exc}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``); nested uses join the outer one."""
        if self._depth:
            self._depth += 1
            try:
                yield self._conn
            finally:
                self._depth -= 1
            return
        with self._errors("begin"):
            self._conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self._conn
        except BaseException:
            self._depth = 0
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        self._depth = 0
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise self._error("commit", exc) from exc

    @contextlib.contextmanager
    def _snapshot(self) -> Iterator[None]:
        """Several reads that must see one consistent state (a writer may commit in between)."""
        if self._depth:
            yield
            return
        with self._errors("begin a read"):
            self._conn.execute("BEGIN DEFERRED")
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        with self._errors("read the schema version"):
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def _upgrade(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise NotAStoreError(
                f"--db {self.path}: the store has schema version {version}, newer than this labctl "
                f"understands ({SCHEMA_VERSION}) (allowed: upgrade labctl, or another --db)"
            )
        if version == SCHEMA_VERSION:
            return
        with self._errors("migrate"):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                # re-read under the write lock: another process may have migrated meanwhile
                version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
                if version == 0:
                    tables = self._conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                    ).fetchall()
                    if tables:
                        raise StoreError(
                            f"{self.path}: not a labctl result store (it holds tables "
                            f"{', '.join(t[0] for t in tables[:5])} but no schema version)"
                        )
                for step in range(version, SCHEMA_VERSION):
                    MIGRATIONS[step](self._conn)
                    self._conn.execute(f"PRAGMA user_version = {step + 1}")
                self._conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                raise

    # -- runs ----------------------------------------------------------------------------------------

    def create_run(
        self,
        profile_name: str,
        profile_data: dict[str, Any],
        plan: list[dict[str, Any]],
        *,
        host: str | None = THIS_HOST,
        status: str = "running",
    ) -> int:
        """Record a new run and its plan, ``[{"seq": i, "config": {...}, "repeat_index": r}, ...]``.
        ``host`` defaults to this machine's name (``None``: unknown or several)."""
        seqs: set[int] = set()
        for entry in plan:
            if not isinstance(entry, dict) or not isinstance(entry.get("seq"), int):
                raise ValueError(f"plan entry {entry!r} has no integer 'seq'")
            if not isinstance(entry.get("config"), dict):
                raise ValueError(f"plan entry {entry['seq']} has no 'config' dict")
            if entry["seq"] in seqs:
                raise ValueError(f"plan entry seq {entry['seq']} appears twice")
            seqs.add(entry["seq"])
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r} (one of {', '.join(RUN_STATUSES)})")
        profile_json = dumps(profile_data, "the profile")
        plan_json = dumps(plan, "the plan")
        now = time.time()
        with self.transaction() as conn, self._errors("create a run"):
            cursor = conn.execute(
                "INSERT INTO runs (profile_name, profile_json, plan_json, created_at, status, host, finished_at,"
                " info_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    profile_name,
                    profile_json,
                    plan_json,
                    now,
                    status,
                    socket.gethostname() if host is THIS_HOST else host,
                    None if status == "running" else now,
                    json.dumps({"owner": owner.me()} if status == "running" else {}),
                ),
            )
            return int(cursor.lastrowid)

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        """Close a run: ``finished``, ``failed``, ``aborted`` (interrupted; resumable) or ``imported``."""
        if status not in RUN_STATUSES or status == "running":
            raise ValueError(f"a run finishes as one of {', '.join(RUN_STATUSES[1:])}, not {status!r}")
        self._set_run_status(run_id, status, time.time())

    def reopen_run(self, run_id: int) -> dict[str, Any] | None:
        """Mark a run running again, by this process (``--resume``); returns the owner it had when that
        one is gone (a killed labctl), else None. A run still being run by a live labctl is refused with
        :class:`RunBusyError` naming its pid: the check and the claim are one write transaction, so two
        resumes started at once cannot both pass it."""
        with self.transaction() as conn, self._errors("update a run"):
            row = conn.execute("SELECT status, info_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UnknownRunError(f"run {run_id}: no such run in {self.path}")
            info = json.loads(row[1])
            previous = info.get("owner")
            if row[0] == "running" and owner.alive(previous):
                raise RunBusyError(f"--resume: run {run_id} is still being run by {owner.describe(previous)} "
                                   f"(allowed: wait for it to finish, or stop it and resume then)")
            info["owner"] = owner.me()
            conn.execute("UPDATE runs SET status = 'running', finished_at = NULL, info_json = ? WHERE id = ?",
                         (json.dumps(info), run_id))
        return previous if row[0] == "running" else None

    def _set_run_status(self, run_id: int, status: str, finished_at: float | None) -> None:
        with self.transaction() as conn, self._errors("update a run"):
            row = conn.execute("SELECT info_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UnknownRunError(f"run {run_id}: no such run in {self.path}")
            info = json.loads(row[0])
            info.pop("owner", None)  # a closed run has nobody running it
            conn.execute("UPDATE runs SET status = ?, finished_at = ?, info_json = ? WHERE id = ?",
                         (status, finished_at, json.dumps(info), run_id))

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first, with its trial counts per status and the planned count. Only trials that
        stand for a plan entry are counted: the single measurements of an NDR/PDR search
        (:data:`~labctl.results.record.SEARCH_ROLES`) are not (its record, role ``ndr``, is)."""
        with self._errors("list runs"):
            rows = self._conn.execute(
                "SELECT r.id, r.profile_name, r.status, r.host, r.created_at, r.finished_at,"
                " json_array_length(r.plan_json),"
                " SUM(t.status = 'ok' AND {plan}), SUM(t.status = 'failed' AND {plan}),"
                " SUM(t.status = 'aborted' AND {plan})"
                " FROM runs r LEFT JOIN trials t ON t.run_id = r.id GROUP BY r.id ORDER BY r.id"
                .format(plan=_PLAN_ENTRY), SEARCH_ROLES * 3,
            ).fetchall()
        keys = ("id", "profile_name", "status", "host", "created_at", "finished_at", "planned",
                "ok", "failed", "aborted")  # fmt: skip
        return [{k: (v or 0) if k in keys[6:] else v for k, v in zip(keys, row)} for row in rows]

    def run(self, run_id: int) -> dict[str, Any]:
        """One run with its profile data and plan."""
        with self._errors("read a run"):
            row = self._conn.execute(
                "SELECT id, profile_name, profile_json, plan_json, created_at, finished_at, status, host,"
                " info_json FROM runs WHERE id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            raise UnknownRunError(f"run {run_id}: no such run in {self.path}")
        return {
            "id": row[0],
            "profile_name": row[1],
            "profile": json.loads(row[2]),
            "plan": json.loads(row[3]),
            "created_at": row[4],
            "finished_at": row[5],
            "status": row[6],
            "host": row[7],
            "info": json.loads(row[8]),
        }

    def update_run_info(self, run_id: int, **info: Any) -> None:
        """Merge ``info`` into the run's own facts (``Store.run(id)["info"]``)."""
        with self.transaction() as conn, self._errors("update a run"):
            row = conn.execute("SELECT info_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UnknownRunError(f"run {run_id}: no such run in {self.path}")
            merged = {**json.loads(row[0]), **info}
            conn.execute("UPDATE runs SET info_json = ? WHERE id = ?", (dumps(merged, "the run info"), run_id))

    def plan(self, run_id: int) -> list[dict[str, Any]]:
        return self.run(run_id)["plan"]

    def extend_plan(self, run_id: int, entries: list[dict[str, Any]]) -> None:
        """Append ``entries`` to run ``run_id``'s plan in one write transaction (a sweep ``--until decided``
        plans round by round); a ``seq`` already planned (or twice in ``entries``) is refused, and nothing
        is written."""
        with self.transaction() as conn, self._errors("extend a run's plan"):
            row = conn.execute("SELECT plan_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise UnknownRunError(f"run {run_id}: no such run in {self.path}")
            plan = json.loads(row[0])
            seen = {e["seq"] for e in plan}
            for entry in entries:
                if entry["seq"] in seen:
                    raise ValueError(f"run {run_id}: seq {entry['seq']} is already in the plan")
                seen.add(entry["seq"])
            conn.execute("UPDATE runs SET plan_json = ? WHERE id = ?", (dumps(plan + entries, "the plan"), run_id))

    def latest_run_id(self) -> int | None:
        with self._errors("find the latest run"):
            row = self._conn.execute("SELECT MAX(id) FROM runs").fetchone()
        return row[0]

    # -- trials --------------------------------------------------------------------------------------

    def add_trial(self, record: TrialRecord, seq: int | None = None) -> int:
        """Store one trial of ``record.run_id`` and commit it at once; returns the trial id.

        ``seq`` is the plan position the trial carries out."""
        if record.run_id is None:
            raise ValueError("add_trial: the record has no run_id")
        metrics_json, details_json = self._texts(record)
        with self.transaction() as conn, self._errors("store a trial"):
            run = conn.execute("SELECT plan_json FROM runs WHERE id = ?", (record.run_id,)).fetchone()
            if run is None:
                raise UnknownRunError(f"run {record.run_id}: no such run in {self.path}")
            if seq is not None and seq not in {e["seq"] for e in json.loads(run[0])}:
                raise ValueError(f"add_trial: run {record.run_id} has no plan entry with seq {seq}")
            config_id, env_id = self._config_env(conn, record)
            values = (
                config_id, env_id, record.repeat_index, seq, record.status, record.error,
                metrics_json, details_json, record.started_at, record.finished_at,
            )  # fmt: skip
            cursor = conn.execute(
                "INSERT INTO trials (config_id, env_id, repeat_index, seq, status, error, metrics_json,"
                " details_json, started_at, finished_at, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, record.run_id),
            )
            trial_id = int(cursor.lastrowid)
            conn.executemany(
                "INSERT INTO warnings (trial_id, position, text) VALUES (?, ?, ?)",
                [(trial_id, i, text) for i, text in enumerate(record.warnings)],
            )
            insert_metrics(conn, trial_id, record.metrics)
            faults.point("store.commit")
        return trial_id

    def replace_trial(self, trial_id: int, record: TrialRecord) -> None:
        """Rewrite stored trial ``trial_id`` of ``record.run_id`` with ``record`` (its metrics, details, status,
        warnings, environment, config) in one transaction: a trial stored while it still runs (a soak's
        minute-by-minute checkpoints) is replaced by what it measured since."""
        if record.run_id is None:
            raise ValueError("replace_trial: the record has no run_id")
        metrics_json, details_json = self._texts(record)
        with self.transaction() as conn, self._errors("replace a trial"):
            row = conn.execute("SELECT run_id FROM trials WHERE id = ?", (trial_id,)).fetchone()
            if row is None or row[0] != record.run_id:
                raise ValueError(f"replace_trial: run {record.run_id} has no trial {trial_id}")
            config_id, env_id = self._config_env(conn, record)
            conn.execute(
                "UPDATE trials SET config_id = ?, env_id = ?, repeat_index = ?, status = ?, error = ?, metrics_json = ?,"
                " details_json = ?, started_at = ?, finished_at = ? WHERE id = ?",
                (config_id, env_id, record.repeat_index, record.status, record.error, metrics_json, details_json,
                 record.started_at, record.finished_at, trial_id),
            )
            conn.execute("DELETE FROM warnings WHERE trial_id = ?", (trial_id,))
            conn.executemany(
                "INSERT INTO warnings (trial_id, position, text) VALUES (?, ?, ?)",
                [(trial_id, i, text) for i, text in enumerate(record.warnings)],
            )
            conn.execute("DELETE FROM metrics WHERE trial_id = ?", (trial_id,))
            insert_metrics(conn, trial_id, record.metrics)
            faults.point("store.commit")

    @staticmethod
    def _texts(record: TrialRecord) -> tuple[str, str]:
        """A record's metrics and details as stored (checked encodable before any row is written)."""
        return (dumps(record.metrics.model_dump(exclude_defaults=True), "the metrics"),
                dumps(record.details, "the trial details"))

    def _config_env(self, conn: sqlite3.Connection, record: TrialRecord) -> tuple[int, int]:
        """The ids of a record's configuration and environment rows (interned: one row per distinct one)."""
        config_json = dumps(record.config, "the config")
        env_json = json.dumps(record.env.model_dump(mode="json"))
        config_id = self._intern(conn, "configs", "config_key", record.config_key, "config_json", config_json)
        env_id = self._intern(conn, "environments", "fingerprint", env_fingerprint(record.env), "env_json", env_json)
        return config_id, env_id

    @staticmethod
    def _intern(conn: sqlite3.Connection, table: str, key_col: str, key: str, json_col: str, text: str) -> int:
        conn.execute(f"INSERT OR IGNORE INTO {table} ({key_col}, {json_col}) VALUES (?, ?)", (key, text))
        return int(conn.execute(f"SELECT id FROM {table} WHERE {key_col} = ?", (key,)).fetchone()[0])

    def mark_aborted(self, run_id: int, seq: int, error: str = "interrupted") -> int:
        """Record an interruption of plan entry ``seq``: when it has no trial yet, an aborted trial is
        written for it from the plan (``--resume`` re-runs aborted entries). Returns how many trials
        were written (0 or 1). The run itself is closed with ``finish_run(run_id, "aborted")``."""
        with self.transaction() as conn, self._errors("mark a trial aborted"):
            entry = next((e for e in self.plan(run_id) if e["seq"] == seq), None)
            if entry is None:
                raise ValueError(f"mark_aborted: run {run_id} has no plan entry with seq {seq}")
            if conn.execute("SELECT 1 FROM trials WHERE run_id = ? AND seq = ?", (run_id, seq)).fetchone():
                return 0
            record = TrialRecord(run_id=run_id, config=entry["config"], repeat_index=entry.get("repeat_index", 0),
                                 status="aborted", error=error, finished_at=time.time())
            self.add_trial(record, seq=seq)
            return 1

    def finished_seqs(self, run_id: int) -> set[int]:
        """Plan positions that have a trial with status ok or failed (done; not re-run by --resume)."""
        with self._errors("read finished trials"):
            rows = self._conn.execute(
                "SELECT DISTINCT seq FROM trials WHERE run_id = ? AND seq IS NOT NULL AND status IN (?, ?)",
                (run_id, *DONE_STATUSES),
            ).fetchall()
        return {int(r[0]) for r in rows}

    def missing_plan(self, run_id: int) -> list[dict[str, Any]]:
        """The plan entries still to run for ``--resume``, in plan order (aborted ones included)."""
        with self._snapshot():
            done = self.finished_seqs(run_id)
            return [entry for entry in self.plan(run_id) if entry["seq"] not in done]

    def trials(
        self,
        run_id: int | None = None,
        status: str | Iterable[str] | None = "ok",
        *,
        config_key: str | None = None,
    ) -> list[TrialRecord]:
        """Stored trials as records (with ``id`` and ``run_id``), in the order they were stored.
        ``status=None`` returns every status."""
        statuses = status_filter(status)
        where, args = [], []
        if run_id is not None:
            where.append("t.run_id = ?")
            args.append(run_id)
        if statuses is not None:
            where.append(f"t.status IN ({', '.join('?' for _ in statuses)})")
            args.extend(statuses)
        if config_key is not None:
            where.append("c.config_key = ?")
            args.append(config_key)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        joins = " FROM trials t JOIN configs c ON c.id = t.config_id JOIN environments e ON e.id = t.env_id"
        with self._snapshot(), self._errors("read trials"):
            rows = self._conn.execute(
                "SELECT t.id, t.run_id, t.repeat_index, t.status, t.error, t.metrics_json, t.details_json,"
                " t.started_at, t.finished_at, c.config_json, e.env_json" + joins + clause + " ORDER BY t.id",
                args,
            ).fetchall()
            warnings: dict[int, list[str]] = {}
            for trial_id, text in self._conn.execute(
                "SELECT w.trial_id, w.text FROM warnings w JOIN trials t ON t.id = w.trial_id"
                " JOIN configs c ON c.id = t.config_id" + clause + " ORDER BY w.trial_id, w.position",
                args,
            ):
                warnings.setdefault(trial_id, []).append(text)
        records = []
        for row in rows:
            try:
                records.append(
                    TrialRecord.model_validate(
                        {
                            "id": row[0],
                            "run_id": row[1],
                            "repeat_index": row[2],
                            "status": row[3],
                            "error": row[4],
                            "metrics": json.loads(row[5]),
                            "details": json.loads(row[6]),
                            "started_at": row[7],
                            "finished_at": row[8],
                            "config": json.loads(row[9]),
                            "env": json.loads(row[10]),
                            "warnings": warnings.get(row[0], []),
                        }
                    )
                )
            except ValueError as exc:  # json.JSONDecodeError and pydantic.ValidationError
                raise StoreError(f"{self.path}: trial {row[0]} cannot be read back: {exc}") from exc
        return records
