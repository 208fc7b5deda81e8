"""labctl soak on the embedded lab: a soak of two minutes stores a point a second with its loss bound, and is
in the store after its first minute already (stored as it runs); one interrupted with SIGINT at its first
minute keeps that minute and says where it stopped.

Never a throughput or a wall-clock time: the load is far below what this host forwards; what is checked is
the series, the bound, the checkpoint and the interruption's record, and that nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from labctl.results.store import Store
from tests.conftest import DOMAINS, ROOT, default_sigint
from tests.integration.conftest import labctl_processes, needs_dpdk

pytestmark = needs_dpdk
QUICK = ["--set", "name=it-soak", "--set", "workload.warmup_s=1", "--rate", "0.1Mpps"]


def soak(db, duration: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "labctl.cli", "soak", str(DOMAINS / "quick.yaml"), *QUICK,
                             "--duration", duration, "--db", str(db)], cwd=ROOT, env=os.environ, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)


def wait_measuring(proc: subprocess.Popen, timeout_s: float = 120.0) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "[measure]" in line or not line:
            return lines
    raise AssertionError(f"the soak never reached its window: {lines[-5:]}")


def finish(proc: subprocess.Popen, timeout_s: float) -> tuple[str, str]:
    """The soak's output once it has ended (killed if it overruns the test's bound)."""
    try:
        return proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stored_points(db) -> int | None:
    """Points of the soak trial in the store now (None: none stored yet)."""
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT json_array_length(details_json, '$.soak.series') FROM trials").fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def test_a_soak_of_two_minutes_a_point_a_second_stored_as_it_runs(no_leftovers, tmp_path):
    db = tmp_path / "soak.db"
    proc = soak(db, "2m")
    wait_measuring(proc)
    started = time.monotonic()
    while stored_points(db) is None and proc.poll() is None and time.monotonic() - started < 100:
        time.sleep(1.0)
    checkpoint = stored_points(db)  # the first minute's checkpoint, while the soak runs on
    out, err = finish(proc, 240)
    assert proc.returncode == 0, err
    assert checkpoint is not None and 50 <= checkpoint <= 70
    with Store(db) as store:
        (trial,) = store.trials()
        run = store.run(trial.run_id)
    s = trial.details["soak"]
    assert s["complete"] and len(s["series"]) >= 110 and s["bin_s"] == pytest.approx(1.0, rel=0.01)
    assert [p["t_s"] for p in s["series"]] == sorted(p["t_s"] for p in s["series"])
    assert trial.metrics.loss_upper_bound is not None and trial.metrics.loss_upper_bound > 0
    assert s["offered"] == sum(p["offered"] for p in s["series"]) and s["lost"] >= 0
    if s["lost"] == 0:
        assert trial.metrics.loss_upper_bound == pytest.approx(3 / s["offered"], rel=0.01)  # zero in N: 3/N
    assert all(p["steal_ms"] is not None for p in s["series"][2:-2])  # the host beside every second
    assert run["status"] == "finished" and "one-sided 95% upper bound" in out


def test_sigint_at_the_first_minute_keeps_it(no_leftovers, tmp_path):
    db = tmp_path / "soak.db"
    proc = soak(db, "2m")
    wait_measuring(proc)
    time.sleep(60.0)
    proc.send_signal(signal.SIGINT)
    out, err = finish(proc, 120)
    assert proc.returncode == 130, err
    assert "soak stopped at" in err and "what it measured is kept as trial 1 of run 1" in err
    with Store(db) as store:
        (trial,) = store.trials(status=None)
        run = store.run(trial.run_id)
    s = trial.details["soak"]
    assert not s["complete"] and 55 <= s["stopped_at_s"] <= 75 and 50 <= len(s["series"]) <= 75
    assert any(w.startswith(f"soak stopped at {s['stopped_at_s']:.0f} s of 120 s: interrupted") for w in trial.warnings)
    assert trial.status == "ok" and trial.metrics.loss_upper_bound is not None
    assert run["status"] == "aborted"
    assert labctl_processes() == []
