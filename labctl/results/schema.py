"""The result store's schema: its tables, the migrations that make them, and the rows of ``metrics``.

:class:`labctl.results.store.Store` splits a :class:`labctl.results.record.TrialRecord` into these rows:

=============  =============================================================================
runs           id, profile_name, profile_json, plan_json, created_at, finished_at, status, host,
               info_json (v3: what the run says about itself, e.g. guest boots and their time)
configs        id, config_key UNIQUE, config_json (every knob, flattened dotted paths)
environments   id, fingerprint UNIQUE, env_json
trials         id, run_id, config_id, env_id, repeat_index, seq (plan position), status,
               error, metrics_json, details_json, started_at, finished_at
warnings       id, trial_id, position, text
metrics        trial_id, name, value  (v2: one row per scalar metric, for per-metric queries;
               dict metrics appear as ``drops.<cause>``, ``cpu.<role>``, ``queue_shares.<q>``)
trial_metrics  view: metrics joined with trial status, run, config key, host and accel
bisects        id, profile_name, recipe, repo, good, bad (full shas), key (what makes a bisect the
               same one again), created_at, finished_at, status, owner_json, info_json
               (v4: ``labctl bisect``, :mod:`labctl.results.bisects`)
bisect_steps   bisect_id, position, sha, kind (measure, skip, final), verdict, run_id (the step's
               measured run), detail_json; one step per (bisect, commit, kind): never measured twice
=============  =============================================================================

The schema version is ``PRAGMA user_version``; :data:`MIGRATIONS` are applied in order on open (by
:class:`labctl.results.store.Store`), each in its own transaction, so an older store is brought up to date
and a newer one is refused.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from labctl.results.codecs import metric_items
from labctl.results.record import Metrics

_V1 = """
CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    profile_name  TEXT NOT NULL,
    profile_json  TEXT NOT NULL,
    plan_json     TEXT NOT NULL DEFAULT '[]',
    created_at    REAL NOT NULL,
    finished_at   REAL,
    status        TEXT NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'finished', 'failed', 'aborted', 'imported')),
    host          TEXT
);
CREATE TABLE configs (
    id            INTEGER PRIMARY KEY,
    config_key    TEXT NOT NULL UNIQUE,
    config_json   TEXT NOT NULL
);
CREATE TABLE environments (
    id            INTEGER PRIMARY KEY,
    fingerprint   TEXT NOT NULL UNIQUE,
    env_json      TEXT NOT NULL
);
CREATE TABLE trials (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    config_id     INTEGER NOT NULL REFERENCES configs(id),
    env_id        INTEGER NOT NULL REFERENCES environments(id),
    repeat_index  INTEGER NOT NULL DEFAULT 0,
    seq           INTEGER,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'aborted', 'pending')),
    error         TEXT,
    metrics_json  TEXT NOT NULL DEFAULT '{}',
    details_json  TEXT NOT NULL DEFAULT '{}',
    started_at    REAL,
    finished_at   REAL
);
CREATE INDEX trials_run_seq ON trials(run_id, seq);
CREATE INDEX trials_config ON trials(config_id);
CREATE TABLE warnings (
    id            INTEGER PRIMARY KEY,
    trial_id      INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    text          TEXT NOT NULL
);
CREATE INDEX warnings_trial ON warnings(trial_id, position);
"""

_V2 = """
CREATE TABLE metrics (
    trial_id      INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    value         REAL NOT NULL,
    PRIMARY KEY (trial_id, name)
) WITHOUT ROWID;
CREATE INDEX metrics_name_value ON metrics(name, value);
CREATE VIEW trial_metrics AS
    SELECT m.trial_id, t.run_id, t.seq, t.repeat_index, t.status, c.config_key,
           json_extract(e.env_json, '$.host') AS host, json_extract(e.env_json, '$.accel') AS accel,
           m.name, m.value
    FROM metrics m
    JOIN trials t ON t.id = m.trial_id
    JOIN configs c ON c.id = t.config_id
    JOIN environments e ON e.id = t.env_id;
"""


def _migrate_v1(conn: sqlite3.Connection) -> None:
    for statement in _split(_V1):
        conn.execute(statement)


def _migrate_v2(conn: sqlite3.Connection) -> None:
    """Add the per-metric table and view, and fill them from the trials already stored."""
    for statement in _split(_V2):
        conn.execute(statement)
    rows = conn.execute("SELECT id, metrics_json FROM trials").fetchall()
    for trial_id, metrics_json in rows:
        metrics = Metrics.model_validate(json.loads(metrics_json))
        insert_metrics(conn, trial_id, metrics)


#: Applied in order; after step ``i`` (0-based) the schema version is ``i + 1``. Append, never edit.
def _migrate_v3(conn: sqlite3.Connection) -> None:
    """A run's own facts (``{"boots": 2, "boot_s": 41.0, "run_s": 180.2}``): older runs get ``{}``."""
    conn.execute("ALTER TABLE runs ADD COLUMN info_json TEXT NOT NULL DEFAULT '{}'")


_V4 = """
CREATE TABLE bisects (
    id            INTEGER PRIMARY KEY,
    profile_name  TEXT NOT NULL,
    recipe        TEXT NOT NULL,
    repo          TEXT NOT NULL,
    good          TEXT NOT NULL,
    bad           TEXT NOT NULL,
    key           TEXT NOT NULL,
    created_at    REAL NOT NULL,
    finished_at   REAL,
    status        TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'aborted')),
    owner_json    TEXT NOT NULL DEFAULT '{}',
    info_json     TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX bisects_key ON bisects(key);
CREATE TABLE bisect_steps (
    bisect_id     INTEGER NOT NULL REFERENCES bisects(id) ON DELETE CASCADE,
    position      INTEGER NOT NULL,
    sha           TEXT NOT NULL,
    kind          TEXT NOT NULL CHECK (kind IN ('measure', 'skip', 'final')),
    verdict       TEXT NOT NULL,
    run_id        INTEGER REFERENCES runs(id),
    detail_json   TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (bisect_id, position),
    UNIQUE (bisect_id, sha, kind)
);
"""


def _migrate_v4(conn: sqlite3.Connection) -> None:
    """``labctl bisect``: a bisect and its steps, so that a killed one resumes without repeating a step."""
    for statement in _split(_V4):
        conn.execute(statement)


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_migrate_v1, _migrate_v2, _migrate_v3, _migrate_v4)
SCHEMA_VERSION = len(MIGRATIONS)


def _split(script: str) -> list[str]:
    """Split a DDL script into statements (``executescript`` would commit behind our back)."""
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(current).strip())
            current = []
    return [s for s in statements if s]


def insert_metrics(conn: sqlite3.Connection, trial_id: int, metrics: Metrics) -> None:
    """One ``metrics`` row per numeric metric of a trial (:func:`labctl.results.codecs.metric_items`)."""
    conn.executemany(
        "INSERT INTO metrics (trial_id, name, value) VALUES (?, ?, ?)",
        [(trial_id, name, float(value)) for name, value in metric_items(metrics).items()],
    )
