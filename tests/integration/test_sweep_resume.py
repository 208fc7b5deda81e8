"""A real 2x2 sweep with repeat 3 on the embedded lab, killed with SIGKILL during trial 5, then resumed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

from labctl.lab.ledger import load_state
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import labctl_processes, needs_dpdk, stored_trials

pytestmark = needs_dpdk
FAST = ["--set", "workload.duration_s=1", "--set", "workload.warmup_s=0"]




def test_kill_9_during_trial_5_then_resume(tmp_path, no_leftovers):
    db = tmp_path / "sweep.db"
    argv = [sys.executable, "-m", "labctl.cli", "sweep", str(DOMAINS / "quick.yaml"), "--db", str(db),
            "--repeat", "3", "--json", *FAST]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and len(stored_trials(db)) < 4:
            time.sleep(0.1)
        assert len(stored_trials(db)) == 4
        while time.time() < deadline and len(labctl_processes()) < 2:  # trial 5 is running
            time.sleep(0.05)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert [seq for seq, _ in stored_trials(db)] == [0, 1, 2, 3]
    assert load_state("quick").resources, "the killed sweep left its resources in the state file"

    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    rows = stored_trials(db)
    assert sorted(seq for seq, _ in rows) == list(range(12))  # exactly the missing ones, none twice
    assert [seq for seq, _ in rows[4:]] == list(range(4, 12))
    assert all(status == "ok" for _, status in rows)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    assert labctl_processes() == []


def test_sweep_with_steadiness_probe_real(tmp_path, no_leftovers):
    """A real sweep that first probes the host: the JSON summary carries the probe, and the trials carry
    its warning exactly when the probe called the host unsteady; no probe worker is left."""
    import json

    from labctl.host.steadiness import UNSTEADY_WARNING
    from labctl.results.store import Store

    db = tmp_path / "sweep.db"
    proc = subprocess.run([sys.executable, "-m", "labctl.cli", "sweep", str(DOMAINS / "quick.yaml"), "--db", str(db),
                           "--repeat", "1", "--steadiness", "1", "--json", *FAST],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    verdict = summary["steadiness"]["verdict"]
    assert verdict in ("steady", "unsteady") and summary["ok"] == 4 and "samples" not in summary["steadiness"]
    with Store(db) as store:
        trials = store.trials(summary["run_id"])
    warned = [any(w.startswith(UNSTEADY_WARNING) for w in t.warnings) for t in trials]
    assert warned == [verdict == "unsteady"] * 4
    assert not subprocess.run(["pgrep", "-f", "labctl.host.steadiness"], capture_output=True).stdout
