"""The ledger (state file): resources recorded before creation, removed after a kill, pids never reused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from labctl.lab.ledger import load_state, locked, teardown
from labctl.lab.libvirt.lifecycle import down


def test_state_records_before_creation_and_teardown_after_kill(tmp_path):
    """A process killed with SIGKILL after recording its resources leaves nothing `down` cannot remove."""
    marker = tmp_path / "made-by-child"
    child = subprocess.Popen([sys.executable, "-c", f"""
import os, time, subprocess, sys
from pathlib import Path
from labctl.lab.ledger import locked
with locked("crash") as state:
    state.record("path", {str(marker)!r})
    Path({str(marker)!r}).write_text("x")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    from labctl.owner import process_started
    state.record("process", str(sleeper.pid), started=process_started(sleeper.pid))
    print("ready", flush=True)
    time.sleep(600)
"""], stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert child.stdout.readline().strip() == "ready"
    state = load_state("crash")
    sleeper_pid = int(state.find("process")[0].ident)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert marker.exists() and _alive(sleeper_pid)
    assert down("crash") and not marker.exists()
    deadline = time.time() + 10
    while _alive(sleeper_pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(sleeper_pid)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_recycled_pid_is_not_killed():
    """A process resource whose pid now belongs to another process (other start time) is left alone."""
    with locked("recycled") as state:
        state.record("process", str(os.getpid()), started=1.0)
        assert teardown(state) == []
    assert _alive(os.getpid())


def test_unreadable_state_file_is_a_named_error(tmp_path):
    from labctl.errors import StateError
    from labctl.lab.ledger import state_path

    path = state_path("broken")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.raises(StateError, match="unreadable"):
        load_state("broken")


def test_leftovers_are_removed_only_when_their_labctl_has_exited(tmp_path):
    """The ledger knows who made the resources (pid + start time): a live owner's lab is refused, a dead
    one's leftovers are removed and said."""
    import subprocess
    import sys

    import pytest

    from labctl.errors import StateError
    from labctl.lab.ledger import locked
    from labctl.measure.labs import LabSession

    marker = tmp_path / "left"
    with locked("fx-owned") as state:
        state.record("path", str(marker))
    marker.write_text("x")
    with pytest.raises(StateError, match=rf"held by pid {os.getpid()}, which still runs"):
        LabSession("fx-owned").__enter__()
    assert marker.exists()
    child = subprocess.run([sys.executable, "-c", (
        "from labctl.lab.ledger import locked\n"
        "with locked('fx-owned') as s:\n"
        "    s.info['owner'] = None\n"
        "    s.record('path', '%s')\n") % marker], check=True, env=os.environ.copy())
    assert child.returncode == 0
    with LabSession("fx-owned") as session:
        assert "left by an earlier labctl (pid" in session.leftovers and "exited" in session.leftovers
    assert not marker.exists()
