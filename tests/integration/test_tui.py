"""A sweep started in the TUI (``labctl tui`` in a tmux pane) on the embedded lab, cancelled while a
trial is in its measurement window: nothing of the lab is left, the run is aborted and resumable, and
``labctl sweep --resume`` from the CLI finishes exactly its plan."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from labctl.lab.ledger import load_state
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import dpdk_processes_of, labctl_processes, needs_dpdk, stored_trials
from tests.labgen_support import ensure_labgen
from tests.tmux_support import Pane, needs_tmux

pytestmark = [needs_dpdk, needs_tmux]
NAME = "tui4-cancel"


def profile(tmp_path: Path) -> Path:
    """domains/quick.yaml (2x2 configurations, repeat 1) as lab ``tui4-cancel``, with hugepages (so a
    hugetlbfs mount is part of what must go) and a short window."""
    text = (DOMAINS / "quick.yaml").read_text()
    text = text.replace("name: quick", f"name: {NAME}").replace("hugepages: false", "hugepages: true")
    text = text.replace("duration_s: 5", "duration_s: 4").replace("warmup_s: 1", "warmup_s: 0.5")
    assert f"name: {NAME}" in text and "hugepages: true" in text and "duration_s: 4" in text
    path = tmp_path / f"{NAME}.yaml"
    path.write_text(text)
    return path


def unwrapped(text: str) -> str:
    """``text`` without its blanks and line ends: a long path on the screen wraps at the edge, mid-word."""
    return "".join(text.split())


def lab_mounts(run_dir: str) -> list[str]:
    return [line for line in Path("/proc/mounts").read_text().splitlines() if run_dir in line]


def test_sweep_cancelled_in_the_tui_leaves_nothing_and_resumes_from_the_cli(clean_lab, no_leftovers, tmp_path):
    ensure_labgen()  # the profile's generator
    path, db = profile(tmp_path), tmp_path / "tui.db"
    run_dir = os.environ["LABCTL_RUN_DIR"]
    argv = [sys.executable, "-m", "labctl.cli", "tui", "--db", str(db), str(path)]
    with Pane(argv, cwd=ROOT, size=(80, 24), config_dir=tmp_path) as pane:
        pane.wait_for("labctl — Host", "q Quit")
        pane.send("s")
        pane.wait_for("labctl — Sweep", "no run yet")
        pane.send("g")
        # the second trial in its window: one stored before the cancel, the rest left to --resume (the
        # CPUs may first be held by another labctl's trial on this host: waiting for them is allowed)
        during = pane.wait_for(f"run 1 {NAME}: running, 1/4 trials", "phase: measure", absent=["-> failed"],
                               timeout=300)
        assert "last: rx_queue_size=256 burst=32 -> " in during and " Mpps" in during
        measured = len(stored_trials(db))  # the trial in its window has seq == measured
        assert measured == 1
        assert load_state(NAME).resources, "the trial in flight recorded its resources"
        assert len(dpdk_processes_of(f"labctl-{NAME}")) >= 2  # the vswitch and the guest forwarder
        mounted = bool(lab_mounts(run_dir))  # the lab's hugetlbfs (unless no pages could be reserved)

        pane.send("c")
        hint = f"cancelled (cleaned up); resume with u, or `labctl sweep {path} --db {db} --resume`"
        cancelled = pane.wait_until(lambda screen: unwrapped(hint) in unwrapped(screen),
                                    "the cancel and its resume hint", timeout=60)
        assert f"run 1 {NAME}: cancelled" in cancelled
        assert "phase: -" in cancelled

        # nothing of the lab is left while the TUI still runs
        assert dpdk_processes_of(f"labctl-{NAME}") == [] and labctl_processes() == []
        assert not load_state(NAME).resources
        assert lab_mounts(run_dir) == [], f"hugetlbfs left mounted (mounted during the trial: {mounted})"
        left = [p for p in Path(run_dir).rglob("*") if not p.is_dir()] if Path(run_dir).exists() else []
        assert left == []
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT status FROM runs").fetchall() == [("aborted",)]
        rows = stored_trials(db)
        assert rows == [(seq, "ok") for seq in range(measured)] + [(measured, "aborted")]

        pane.send("q")  # nothing in flight: quits without asking
        assert pane.wait_exit() == 0

    resumed = subprocess.run([sys.executable, "-m", "labctl.cli", "sweep", str(path), "--db", str(db), "--resume",
                              "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert (summary["run_id"], summary["ok"], summary["failed"]) == (1, 4 - measured, 0)
    rows = stored_trials(db)
    done = [seq for seq, status in rows if status in ("ok", "failed")]
    assert sorted(done) == [0, 1, 2, 3]  # the planned 4, each once: the cancelled one re-run, none twice
    assert [status for _seq, status in rows].count("aborted") == 1
    assert all(status == "ok" for seq, status in rows if status != "aborted")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("finished",)]
    assert dpdk_processes_of(f"labctl-{NAME}") == [] and not load_state(NAME).resources
