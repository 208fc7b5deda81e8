"""Helpers of the appliance's /init (init.sh), run on their own in the appliance's shell (busybox ash).

init.sh runs its modes at the end, so a test takes the functions it needs out of the file by name and runs them
in a script of its own.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import labctl.lab.libvirt.appliance as appliance

INIT_SH = Path(appliance.__file__).parent / "files" / "init.sh"
SHELL = [shutil.which("busybox"), "sh"] if shutil.which("busybox") else ["sh"]


def functions(*names: str) -> str:
    """The text of init.sh's shell functions ``names`` (each from ``name() {`` to its closing ``}``)."""
    text = INIT_SH.read_text()
    out = []
    for name in names:
        match = re.search(rf"^{name}\(\) {{\n.*?^}}\n", text, re.S | re.M)
        assert match, f"init.sh has no function {name}"
        out.append(match.group(0))
    return "".join(out)


def run(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*SHELL, "-c", functions("mark_cs", "wait_file") + script], cwd=cwd,
                          capture_output=True, text=True, timeout=30, check=False)


def test_wait_file_answers_at_once_for_a_file_that_is_there(tmp_path):
    (tmp_path / "ready").touch()
    done = run('wait_file 5 missing ready; echo "rc=$?"', tmp_path)
    assert done.stdout.strip() == "rc=0", done.stderr


def test_wait_file_sees_a_file_that_appears_while_it_waits(tmp_path):
    done = run('(sleep 0.3; touch ended) & wait_file 20 ready ended; echo "rc=$? $(ls)"', tmp_path)
    assert done.stdout.strip() == "rc=0 ended", done.stderr


@pytest.mark.parametrize("seconds", ["1", "0"])
def test_wait_file_gives_up_after_its_seconds_of_uptime(tmp_path, seconds):
    done = run(f'wait_file {seconds} ready; echo "rc=$?"; ls', tmp_path)
    assert done.stdout.split() == ["rc=1"], done.stderr
