"""The result store under faults: a full disk, a read-only store, a corrupted file, a newer schema, a
reader beside a writer, hostile JSONL imports. Each gets one line (exit 2 where it is the user's input)
and nothing already stored is lost or changed."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sqlite3
import subprocess
from pathlib import Path

import pytest

from labctl.errors import StoreError
from labctl.results.store import Store
from tests import factories


def _stored(db: Path) -> str:
    """Every trial of the store as exported JSONL (what must not change)."""
    with Store(db) as store:
        return json.dumps([r.model_dump(mode="json") for r in store.trials(None, status=None)], sort_keys=True)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store_db(tmp_path) -> Path:
    db = tmp_path / "s.db"
    with Store(db) as store:
        run = store.create_run("demo", {}, factories.plan(3))
        for seq in range(3):
            store.add_trial(factories.record(run, mpps=9.0 + seq), seq)
        store.finish_run(run)
    conn = sqlite3.connect(db)  # fold the WAL in: the file alone holds everything
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return db


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_one_trial_in_one_line_and_keeps_the_rest(small_tmpfs, cli):
    db = small_tmpfs / "s.db"
    kept = 0
    with Store(db) as store:
        run = store.create_run("demo", {}, [])
        with pytest.raises(StoreError, match="the disk is full") as caught:
            for _ in range(10_000):
                store.add_trial(factories.record(run, details={"blob": "x" * 4000}))
                kept += 1
    assert "\n" not in str(caught.value) and kept > 0
    with Store(db) as store:  # reopened: intact, every committed trial there, no half-written one
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert len(store.trials(run, status=None)) == kept
        orphans = store._conn.execute("SELECT COUNT(*) FROM warnings WHERE trial_id NOT IN "
                                      "(SELECT id FROM trials)").fetchone()[0]
        assert orphans == 0
    source = small_tmpfs.parent / "big.jsonl"
    source.write_text("\n".join(json.dumps({"config": {"a": i}, "details": {"b": "y" * 3000}})
                                for i in range(200)) + "\n")
    before = _stored(db)
    code, _out, err = cli("import", str(source), "--db", str(db))
    assert code in (1, 2) and "disk is full" in _one_line(err)
    assert _stored(db) == before  # all or nothing: the import left no trial behind


def test_a_read_only_store_is_read_and_never_written(store_db, tmp_path, cli):
    before, digest = _stored(store_db), _digest(store_db)
    ro = subprocess.run(["mount", "--bind", str(store_db.parent), str(store_db.parent)], capture_output=True)
    if ro.returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(store_db.parent)], check=True)
        code, out, err = cli("report", "--db", str(store_db))
        assert code == 0 and "median" in out, err
        source = tmp_path.parent / f"{tmp_path.name}-one.jsonl"
        source.write_text(json.dumps({"config": {"a": 1}}) + "\n")
        code, _out, err = cli("import", str(source), "--db", str(store_db))
        assert code == 2 and "is read-only" in _one_line(err)
        assert _stored(store_db) == before
    finally:
        subprocess.run(["umount", str(store_db.parent)], check=False)
    assert _digest(store_db) == digest


def test_a_corrupted_store_is_refused_in_one_line_and_left_as_it_is(store_db, tmp_path, cli):
    data = bytearray(store_db.read_bytes())
    data[4096:] = bytes(len(data) - 4096)  # every page but the header's zeroed
    store_db.write_bytes(bytes(data))
    digest = _digest(store_db)
    for args in (["report"], ["export", "--format", "jsonl"], ["import", str(_line(tmp_path))]):
        code, _out, err = cli(*args, "--db", str(store_db))
        assert code == 2 and ("corrupted" in _one_line(err) or "not a labctl result store" in err), err
    assert _digest(store_db) == digest


def _line(tmp_path: Path) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"config": {"a": 1}}) + "\n")
    return path


def test_a_store_of_a_newer_schema_is_refused_in_one_line(store_db, tmp_path, cli):
    conn = sqlite3.connect(store_db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    digest = _digest(store_db)
    for args in (["report"], ["import", str(_line(tmp_path))]):
        code, _out, err = cli(*args, "--db", str(store_db))
        assert code == 2 and "schema version 99, newer" in _one_line(err)
    assert _digest(store_db) == digest


def _writer(db: str, n: int) -> None:
    with Store(db) as store:
        run = store.create_run("demo", {}, factories.plan(n))
        for seq in range(n):
            store.add_trial(factories.record(run, mpps=8.0 + seq % 3), seq)
        store.finish_run(run)


def test_a_report_beside_a_writing_sweep_reads_consistent_states(store_db):
    from labctl import api
    from labctl.errors import UserError

    ctx = multiprocessing.get_context("spawn")  # SQLite's state must not cross a fork (sqlite.org/howtocorrupt)
    writer = ctx.Process(target=_writer, args=(str(store_db), 150))
    writer.start()
    seen = []
    while writer.is_alive():
        with Store(store_db) as store:
            seen.append(len(store.trials(None, status=None)))
        try:
            api.report(store_db)  # never "database is locked", never a half-written trial
        except UserError as exc:  # the writer's run exists and holds no trial yet: a consistent state too
            assert str(exc) == "no successful trials in run 2 to report"
    writer.join(60)
    assert writer.exitcode == 0
    assert seen == sorted(seen)  # trials only ever appear, whole
    with Store(store_db) as store:
        assert len(store.trials(None, status=None)) == 153


HOSTILE = {
    "huge line": '{"config": {"a": "' + "x" * (2 << 20) + '"}}',
    "NaN": '{"config": {"a": 1}, "metrics": {"mpps": NaN}}',
    "Infinity": '{"config": {"a": Infinity}}',
    "wrong type": '{"config": {"a": 1}, "metrics": {"mpps": "fast"}}',
    "not an object": "[1, 2, 3]",
    "duplicate key": '{"config": {"a": 1}, "status": "ok", "status": "failed"}',
    "duplicate ids": '{"id": 7, "config": {"a": 1}}\n{"id": 7, "config": {"a": 1}}',
    "deep nesting": '{"config": {"a": 1}, "details": ' + "[" * 50000 + "]" * 50000 + "}",
    "not UTF-8": None,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_imports_exit_2_in_one_line_and_change_nothing(case, store_db, tmp_path, cli):
    source = tmp_path / "hostile.jsonl"
    good = json.dumps({"config": {"a": 0}})
    if HOSTILE[case] is None:
        source.write_bytes(good.encode() + b"\n\xff\xfe garbage\n")
    else:
        source.write_text(good + "\n" + HOSTILE[case] + "\n")
    before = _stored(store_db)
    runs_before = len(Store(store_db).runs())
    code, _out, err = cli("import", str(source), "--db", str(store_db))
    assert code == 2, err
    assert len(_one_line(err)) < 400
    assert _stored(store_db) == before and len(Store(store_db).runs()) == runs_before
