"""What a killed ``labctl fleet`` leaves is stopped by the next one (labctl.fleet.run.stop_orphans), and
the fault hook's TARGET field (labctl.faults.parse)."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from labctl import faults
from labctl.fleet.run import JOB_FILE, _is_module, stop_orphans


def _sleeper(tag: str) -> subprocess.Popen:
    """A process whose command line names ``tag`` (as a job's workers and local labctl name its ident)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag])


def _job(data_dir, ident: str, controller: dict) -> None:
    run = data_dir / ident
    (run / "ansible-local" / "ansible-local-1").mkdir(parents=True)
    (run / JOB_FILE).write_text(json.dumps({"controller": controller, "playbook": None}))


def test_a_job_whose_controller_is_gone_is_stopped_and_its_record_removed(tmp_path):
    ident = "20260101T000000Z-sweep-abc123"
    gone = subprocess.Popen(["true"])
    gone.wait()
    _job(tmp_path, ident, {"pid": gone.pid, "started": 1.0})
    left = _sleeper(f"/work/{ident}/local/profile.yaml")
    try:
        said = stop_orphans(tmp_path, grace_s=5)
        assert left.wait(10) is not None
        assert len(said) == 1 and ident in said[0] and "1 processes under it" in said[0]
        assert not (tmp_path / ident / JOB_FILE).exists()
        assert not (tmp_path / ident / "ansible-local").exists()
    finally:
        left.kill()
        left.wait()


def test_a_job_whose_controller_still_runs_is_left_alone(tmp_path):
    ident = "20260101T000000Z-sweep-def456"
    me = psutil.Process()
    _job(tmp_path, ident, {"pid": me.pid, "started": me.create_time()})
    running = _sleeper(f"/work/{ident}/local/profile.yaml")
    try:
        assert stop_orphans(tmp_path, grace_s=5) == []
        assert running.poll() is None
        assert (tmp_path / ident / JOB_FILE).exists()
    finally:
        running.kill()
        running.wait()


class _Proc:
    def __init__(self, argv):
        self.argv = argv

    def cmdline(self):
        return self.argv


def test_a_module_is_the_python_running_ansiballz_not_the_shell_around_it():
    script = "/tmp/x/ansible-tmp-1-2-3/AnsiballZ_command.py"
    assert _is_module(_Proc(["/usr/bin/python3", script]))
    assert not _is_module(_Proc(["/bin/sh", "-c", f"/usr/bin/python3 {script} && sleep 0"]))
    assert not _is_module(_Proc(["/bin/sh", "-c", f"LABCTL_HOST=local /usr/bin/python3 {script}"]))


def test_the_fault_target_defaults_to_this_process_and_names_the_fleet_controller():
    assert faults.parse("phase.measure:TERM") == ("phase.measure", "TERM", 1, 0.0, "self")
    assert faults.parse("phase.measure:INT:2:0.5:fleet") == ("phase.measure", "INT", 2, 0.5, "fleet")
    with pytest.raises(ValueError, match="targets: self, fleet"):
        faults.parse("phase.measure:INT:1:0:elsewhere")
    assert faults.fleet_controller() is None  # pytest does not run under `labctl fleet`
