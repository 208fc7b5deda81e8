"""One sweep per run (defect 2 of the faults issue): ``--resume`` beside a sweep still running that run
fails with exit 2 naming its pid, and never runs trials of it; once that labctl is dead, it resumes."""

from __future__ import annotations

import multiprocessing
import os
import signal

from labctl.measure.sweep import run_sweep
from labctl.profile.load import load_profile
from labctl.results.store import Store
from tests.conftest import CPUS, DOMAINS
from tests.unit.measure.test_sweep import fake_runner


def _slow_sweep(db: str, started, per_trial_s: float) -> None:
    from labctl import signals

    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    inner = fake_runner({256: 5.0, 1024: 6.0}, [])

    def runner(*args, **kw):
        started.set()
        signals.sleep(per_trial_s)
        return inner(*args, **kw)

    run_sweep(loaded, db, repeat=2, runner=runner)


def _start(db, per_trial_s):
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    proc = ctx.Process(target=_slow_sweep, args=(str(db), started, per_trial_s))
    proc.start()
    assert started.wait(20)
    return proc


def test_resume_beside_a_running_sweep_exits_2_naming_its_pid(tmp_path, cli):
    db = tmp_path / "s.db"
    proc = _start(db, 0.4)
    code, _out, err = cli("sweep", str(DOMAINS / "quick.yaml"), "--db", str(db), "--resume", "--json")
    assert code == 2, err
    assert f"run 1 is still being run by pid {proc.pid}" in err and len(err.strip().splitlines()) == 1
    proc.join(60)
    assert proc.exitcode == 0
    import sqlite3

    seqs = [r[0] for r in sqlite3.connect(db).execute("SELECT seq FROM trials WHERE run_id = 1 ORDER BY seq")]
    assert seqs == list(range(8))  # every plan entry once: nothing stored twice, nothing aborted
    with Store(db) as store:
        assert store.runs()[0]["status"] == "finished"
        assert "owner" not in store.run(1)["info"]  # a closed run has nobody running it


def test_resume_after_kill_9_completes_exactly_the_plan(tmp_path):
    db = tmp_path / "s.db"
    proc = _start(db, 0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    with Store(db) as store:
        assert store.runs()[0]["status"] == "running"  # killed: nobody closed it
    notes = []
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    result = run_sweep(loaded, db, resume=True, runner=fake_runner({256: 5.0, 1024: 6.0}, []),
                       on_event=lambda e: notes.append(e.message) if e.kind == "note" else None)
    assert any(f"left running by pid {proc.pid}, which has exited" in n for n in notes)
    with Store(db) as store:
        assert store.missing_plan(result.run_id) == []
        done = [t for t in store.trials(result.run_id, status=("ok", "failed"))]
        assert len(done) == 8
