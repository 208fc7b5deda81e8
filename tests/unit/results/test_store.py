"""The SQLite result store: round trips, durability, runs and resume bookkeeping, schema versions."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labctl.errors import NotAStoreError, StoreError, UnknownRunError
from labctl.results.record import Metrics, TrialRecord
from labctl.results.schema import SCHEMA_VERSION
from labctl.results.store import Store
from tests.conftest import ROOT
from tests.factories import ENV, plan, record


def test_records_round_trip(store: Store) -> None:
    run_id = store.create_run("demo", {"name": "demo", "guest": {"vcpus": 2}}, plan(3))
    sent = [
        record(run_id, rx=256),
        record(run_id, rx=1024, mpps=15.25, env=ENV.model_copy(update={"accel": "kvm"})),
        record(run_id, status="failed", error="ZeroForwardingError: nothing forwarded", metrics=Metrics(), warnings=[]),
    ]
    ids = [store.add_trial(r, seq=i) for i, r in enumerate(sent)]
    got = store.trials(run_id, status=None)
    assert got == [r.model_copy(update={"id": i}) for r, i in zip(sent, ids)]
    assert [r.id for r in store.trials(run_id)] == ids[:2]  # status="ok" by default
    assert [r.id for r in store.trials(status="failed")] == ids[2:]
    assert [r.id for r in store.trials(config_key=sent[1].config_key)] == [ids[1]]
    # identical configs and environments are stored once
    assert store._conn.execute("SELECT COUNT(*) FROM configs").fetchone()[0] == 2
    assert store._conn.execute("SELECT COUNT(*) FROM environments").fetchone()[0] == 2


def test_value_types_survive(store: Store) -> None:
    """1, 1.0, True and "1" are different knob values and come back as such."""
    run_id = store.create_run("types", {}, [])
    for value in (1, 1.0, True, "1", None):
        store.add_trial(TrialRecord(run_id=run_id, config={"k": value}))
    back = [r.config["k"] for r in store.trials(run_id)]
    assert back == [1, 1.0, True, "1", None]
    assert [type(v) for v in back] == [int, float, bool, str, type(None)]


def test_runs_listing_and_finish(store: Store) -> None:
    assert store.latest_run_id() is None
    first = store.create_run("a", {}, plan(2), host="lab1")
    second = store.create_run("b", {"x": 1}, plan(5))
    store.add_trial(record(second), seq=0)
    store.add_trial(record(second, status="failed"), seq=1)
    store.finish_run(first, "finished")
    assert store.latest_run_id() == second
    runs = {r["id"]: r for r in store.runs()}
    assert runs[first]["status"] == "finished" and runs[first]["finished_at"] is not None
    assert runs[first]["host"] == "lab1"
    assert (runs[second]["status"], runs[second]["planned"], runs[second]["ok"], runs[second]["failed"]) == (
        "running",
        5,
        1,
        1,
    )
    assert store.run(second)["profile"] == {"x": 1}
    with pytest.raises(UnknownRunError, match="run 99"):
        store.run(99)
    with pytest.raises(UnknownRunError):
        store.add_trial(record(99))
    with pytest.raises(ValueError):
        store.finish_run(first, "bogus")


def test_trial_is_durable_at_once(db: Path) -> None:
    writer = Store(db)
    run_id = writer.create_run("demo", {}, plan(1))
    trial_id = writer.add_trial(record(run_id), seq=0)
    # a second connection sees the trial while the first is still open, without any close/commit call
    reader = sqlite3.connect(db)
    try:
        assert reader.execute("SELECT status FROM trials WHERE id = ?", (trial_id,)).fetchone() == ("ok",)
        assert reader.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        reader.close()
    with Store(db) as other:
        assert [r.id for r in other.trials(run_id)] == [trial_id]
    writer.close()


def test_trial_survives_kill_9(db: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from labctl.results.record import TrialRecord
        from labctl.results.store import Store
        s = Store({str(db)!r})
        run = s.create_run("k", {{}}, [{{"seq": 0, "config": {{"a": 1}}, "repeat_index": 0}}])
        s.add_trial(TrialRecord(run_id=run, config={{"a": 1}}, metrics={{"mpps": 3.5}}), seq=0)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, timeout=60)
    assert proc.returncode == -9
    with Store(db) as s:
        (trial,) = s.trials()
        assert trial.metrics.mpps == 3.5
        assert s.finished_seqs(trial.run_id) == {0}


def test_resume_bookkeeping(store: Store) -> None:
    run_id = store.create_run("sweep", {}, plan(12))
    for seq in (0, 2, 5, 7):
        store.add_trial(record(run_id), seq=seq)
    store.add_trial(record(run_id, status="aborted", error="interrupted"), seq=9)
    assert store.finished_seqs(run_id) == {0, 2, 5, 7}
    # 4 ok + 1 aborted: the aborted entry is re-run, so 8 of 12 remain
    assert [e["seq"] for e in store.missing_plan(run_id)] == [1, 3, 4, 6, 8, 9, 10, 11]
    # a failed trial counts as done (it is not retried by --resume): 4 ok + 1 failed + 1 aborted -> 7
    store.add_trial(record(run_id, status="failed", error="boom"), seq=3)
    missing = store.missing_plan(run_id)
    assert [e["seq"] for e in missing] == [1, 4, 6, 8, 9, 10, 11]
    assert missing[4] == plan(12)[9]  # whole plan entries, the aborted one among them
    # a resumed run finishes seq 9; the aborted row stays as history
    store.add_trial(record(run_id), seq=9)
    assert 9 not in [e["seq"] for e in store.missing_plan(run_id)]
    assert len(store.trials(run_id, status="aborted")) == 1
    with pytest.raises(ValueError, match="seq 12"):
        store.add_trial(record(run_id), seq=12)


def test_mark_aborted(store: Store) -> None:
    run_id = store.create_run("sweep", {}, plan(3))
    store.add_trial(record(run_id, mpps=12.0), seq=0)
    assert [r.metrics.mpps for r in store.trials(run_id, status=None)] == [12.0]
    assert store.mark_aborted(run_id, seq=1) == 1
    (aborted,) = store.trials(run_id, status="aborted")
    assert aborted.error == "interrupted"
    # a plan entry with no trial at all gets an aborted trial from the plan
    assert store.mark_aborted(run_id, seq=2, error="SIGTERM") == 1
    last = store.trials(run_id, status="aborted")[-1]
    assert (last.config, last.error) == (plan(3)[2]["config"], "SIGTERM")
    assert store.mark_aborted(run_id, seq=0) == 0  # seq 0 finished: nothing to abort
    assert [e["seq"] for e in store.missing_plan(run_id)] == [1, 2]


def test_metrics_table_and_view(store: Store) -> None:
    run_id = store.create_run("m", {}, [])
    a = store.add_trial(record(run_id, mpps=9.0))
    b = store.add_trial(record(run_id, rx=1024, mpps=16.0))
    rows = store._conn.execute(
        "SELECT trial_id, value, accel FROM trial_metrics WHERE name = 'mpps' AND status = 'ok' ORDER BY value"
    ).fetchall()
    assert rows == [(a, 9.0, "tcg"), (b, 16.0, "tcg")]
    names = {r[0] for r in store._conn.execute("SELECT name FROM metrics WHERE trial_id = ?", (a,))}
    assert names == {"mpps", "loss_ratio", "tx_dropped", "drops.ring_full", "queue_shares.guest.port0.rxq0",
                     "cpu.vswitch_pmd"}  # fmt: skip


# The v1 schema exactly as labctl 0.1 wrote it (frozen here on purpose: old files do not change).
V1_DDL = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, profile_name TEXT NOT NULL, profile_json TEXT NOT NULL,
    plan_json TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL, finished_at REAL,
    status TEXT NOT NULL DEFAULT 'running'
    CHECK (status IN ('running', 'finished', 'failed', 'aborted', 'imported')), host TEXT);
CREATE TABLE configs (id INTEGER PRIMARY KEY, config_key TEXT NOT NULL UNIQUE, config_json TEXT NOT NULL);
CREATE TABLE environments (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE, env_json TEXT NOT NULL);
CREATE TABLE trials (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    config_id INTEGER NOT NULL REFERENCES configs(id), env_id INTEGER NOT NULL REFERENCES environments(id),
    repeat_index INTEGER NOT NULL DEFAULT 0, seq INTEGER,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'aborted', 'pending')), error TEXT,
    metrics_json TEXT NOT NULL DEFAULT '{}', details_json TEXT NOT NULL DEFAULT '{}',
    started_at REAL, finished_at REAL);
CREATE INDEX trials_run_seq ON trials(run_id, seq);
CREATE INDEX trials_config ON trials(config_id);
CREATE TABLE warnings (id INTEGER PRIMARY KEY, trial_id INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, text TEXT NOT NULL);
CREATE INDEX warnings_trial ON warnings(trial_id, position);
INSERT INTO runs VALUES (1, 'old', '{}', '[{"seq": 0, "config": {"a": 1}, "repeat_index": 0}]', 1.0, 2.0,
    'finished', 'lab1');
INSERT INTO configs VALUES (1, 'k1', '{"a": 1}');
INSERT INTO environments VALUES (1, 'e1', '{"host": "lab1", "accel": "kvm"}');
INSERT INTO trials VALUES (1, 1, 1, 1, 0, 0, 'ok', NULL, '{"mpps": 7.5, "drops": {"ring_full": 3}}', '{}', 1.0, 2.0);
INSERT INTO warnings VALUES (1, 1, 0, 'old warning');
PRAGMA user_version = 1;
"""


def test_v1_store_is_migrated(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.executescript(V1_DDL)
    conn.close()
    with Store(db) as s:
        assert s.schema_version == SCHEMA_VERSION == 4
        (trial,) = s.trials(1)
        assert (trial.config, trial.metrics.mpps, trial.env.accel, trial.warnings) == (
            {"a": 1},
            7.5,
            "kvm",
            ["old warning"],
        )
        # the v2 step back-filled the metrics table from the stored JSON
        rows = s._conn.execute("SELECT name, value FROM metrics WHERE trial_id = 1 ORDER BY name").fetchall()
        assert rows == [("drops.ring_full", 3.0), ("mpps", 7.5)]
        s.add_trial(TrialRecord(run_id=1, config={"a": 2}, metrics=Metrics(mpps=8.0)))
        assert len(s.trials(1)) == 2
        # the v3 step gave the old run an empty info, which takes facts now
        assert s.run(1)["info"] == {}
        s.update_run_info(1, boots=2, boot_s=30.5)
        s.update_run_info(1, run_s=100.0)
        assert s.run(1)["info"] == {"boots": 2, "boot_s": 30.5, "run_s": 100.0}
        # the v4 step added the bisects' tables, empty
        tables = {r[0] for r in s._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"bisects", "bisect_steps"} <= tables
        assert s._conn.execute("SELECT COUNT(*) FROM bisects").fetchone()[0] == 0
    with Store(db) as again:  # re-opening a current store changes nothing
        assert again.schema_version == 4


def test_newer_schema_is_refused(db: Path) -> None:
    with Store(db):
        pass
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(NotAStoreError, match=rf"schema version {SCHEMA_VERSION + 1}, newer .*\({SCHEMA_VERSION}\)"):
        Store(db)


def test_foreign_or_broken_files_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    from labctl.errors import NotAStoreError

    with pytest.raises(NotAStoreError, match="--db .*junk.db: not a labctl result store") as info:
        Store(junk)
    assert info.value.exit_code == 2
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE stuff (x)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAStoreError, match="not a labctl result store"):
        Store(other)
    conn = sqlite3.connect(other)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # refused before any change
    conn.close()
    with pytest.raises(StoreError):
        Store(tmp_path / "no" / "such" / "dir" / "x.db")




def test_runs_count_only_the_trials_that_stand_for_plan_entries(store: Store) -> None:
    """A sweep by --metric ndr stores each search's measurements (roles calibration, warmup, search,
    latency) beside its record (role ndr): the listing counts the records against the planned searches,
    never the measurements (it showed 258/6)."""
    from labctl.results.record import SEARCH_ROLES

    run = store.create_run("a", {}, plan(2))
    for seq in range(2):
        for i, role in enumerate([*SEARCH_ROLES, "search", "search"]):
            store.add_trial(record(run, details={"role": role}), seq=None)
        store.add_trial(record(run, mpps=None, details={"role": "ndr"}), seq=seq)
    store.add_trial(record(run, status="failed", details={"role": "search"}))
    (listed,) = store.runs()
    assert (listed["planned"], listed["ok"], listed["failed"], listed["aborted"]) == (2, 2, 0, 0)


def test_extend_plan_appends_in_one_transaction_and_refuses_a_duplicate_seq(store: Store) -> None:
    run_id = store.create_run("sweep", {}, plan(3))
    more = [{**e, "seq": e["seq"] + 3, "block": 1} for e in plan(3)]
    store.extend_plan(run_id, more)
    assert [e["seq"] for e in store.plan(run_id)] == [0, 1, 2, 3, 4, 5]
    assert store.plan(run_id)[3]["block"] == 1
    store.add_trial(record(run_id), seq=5)  # an extended entry is a planned one
    with pytest.raises(ValueError, match="seq 4 is already in the plan"):
        store.extend_plan(run_id, [{**plan(1)[0], "seq": 6}, {**plan(1)[0], "seq": 4}])
    assert [e["seq"] for e in store.plan(run_id)] == [0, 1, 2, 3, 4, 5]  # nothing half-written
    with pytest.raises(ValueError, match="seq 7"):
        store.extend_plan(run_id, [{**plan(1)[0], "seq": 7}, {**plan(1)[0], "seq": 7}])
    with pytest.raises(UnknownRunError):
        store.extend_plan(run_id + 1, more)


def test_a_trial_stored_in_flight_is_replaced_whole(store: Store) -> None:
    """A soak's checkpoints: the trial is stored after its first minute and rewritten with what it measured since."""
    run_id = store.create_run("soak", {}, [])
    first = record(run_id, mpps=1.0, warnings=["soak stopped at 59 s of 120 s: a checkpoint"],
                   details={"soak": {"series": [1] * 59}}, status="ok")
    trial_id = store.add_trial(first)
    later = record(run_id, mpps=1.1, warnings=[], details={"soak": {"series": [1] * 119}},
                   metrics=Metrics(mpps=1.1, loss_upper_bound=2.5e-8))
    store.replace_trial(trial_id, later)
    (back,) = store.trials(run_id, status=None)
    assert back.id == trial_id and back.warnings == [] and len(back.details["soak"]["series"]) == 119
    assert back.metrics.loss_upper_bound == 2.5e-8 and back.metrics.loss_ratio is None
    rows = store._conn.execute("SELECT name, value FROM metrics WHERE trial_id = ? ORDER BY name", (trial_id,)).fetchall()
    assert rows == [("loss_upper_bound", 2.5e-8), ("mpps", 1.1)]  # the per-metric rows follow
    other = store.create_run("other", {}, [])
    with pytest.raises(ValueError, match=f"run {other} has no trial {trial_id}"):
        store.replace_trial(trial_id, record(other))
