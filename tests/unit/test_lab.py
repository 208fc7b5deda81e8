"""up / down / status on libvirt's test driver, and the state file's crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from labctl.lab.libvirt import hypervisor
from labctl.errors import HypervisorError
from labctl.lab.libvirt.lifecycle import down, status, up
from labctl.profile.load import load_profile
from labctl.lab.ledger import load_state, locked, teardown
from tests.conftest import DOMAINS

TEST_URI = "test:///default"
CPUS = frozenset({0, 1})


@pytest.fixture
def tap_profile():
    return load_profile(DOMAINS / "tap-kernel.yaml", cpus=CPUS)


def test_up_status_down_on_test_driver(tap_profile, cli):
    result = up(tap_profile, TEST_URI)
    assert result.domain == "labctl-tap-kernel" and result.state == "running" and result.domain_type == "test"
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel").isActive()
    labs = status(TEST_URI)
    assert [lab["name"] for lab in labs] == ["tap-kernel"] and labs[0]["state"] == "running"
    code, out, _ = cli("status", "--json", "--uri", TEST_URI)
    assert code == 0 and json.loads(out)["labs"][0]["domain"] == "labctl-tap-kernel"
    removed = down("tap-kernel")
    assert "domain labctl-tap-kernel" in removed
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel") is None
    assert load_state("tap-kernel").resources == [] and not load_state("tap-kernel").path.exists()
    assert down("tap-kernel") == []  # a second down is a no-op


def test_cli_up_down(cli):
    code, out, _ = cli("up", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 0 and "running" in out
    code, _, err = cli("up", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 2 and "already up" in err
    code, out, _ = cli("down", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 0 and "removed" in out
    code, out, _ = cli("down", "tap-kernel")
    assert code == 0 and "nothing to remove" in out


def test_embedded_profile_cannot_go_up(cli):
    code, _, err = cli("up", str(DOMAINS / "quick.yaml"))
    assert code == 2 and "embedded" in err


def test_failed_define_leaves_nothing(tap_profile, monkeypatch, tmp_path):
    def refuse(uri, xml, start=True):
        raise HypervisorError("libvirt refused the domain: simulated")

    monkeypatch.setattr(hypervisor, "define_and_start", refuse)
    with pytest.raises(HypervisorError):
        up(tap_profile, TEST_URI)
    assert not load_state("tap-kernel").resources
    assert not (tmp_path / "run" / "tap-kernel").exists()


def test_down_finds_domain_without_state_file(tap_profile):
    up(tap_profile, TEST_URI)
    load_state("tap-kernel").path.unlink()  # the state file is lost
    assert "domain labctl-tap-kernel" in down("tap-kernel", TEST_URI)
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel") is None


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
    import psutil
    state.record("process", str(sleeper.pid), started=psutil.Process(sleeper.pid).create_time())
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
