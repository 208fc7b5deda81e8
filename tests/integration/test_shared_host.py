"""Labs that share a host (defect 1 of the faults issue): two labs with different names, both pinned to
CPUs 0 and 1, started one second apart with ``labctl run``. They used to measure at once (0.63 vs
3.64 Mpps, both "ok"); now the later one waits for the CPUs, says for whom, and their windows never
overlap. ``--no-wait`` fails at once with exit 1; a busy process that is not labctl's is named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


from tests.conftest import ROOT
from tests.faults.harness import embedded_profile
from tests.integration.conftest import needs_dpdk

pytestmark = needs_dpdk

def _run(write_profile, name: str, *extra: str, duration: float = 2) -> subprocess.Popen:
    path = write_profile(embedded_profile(name, duration, 0.5), f"{name}.yaml")
    return subprocess.Popen([sys.executable, "-m", "labctl.cli", "run", str(path), "--json", *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_labs_on_the_same_cpus_never_measure_at_once(write_profile, no_leftovers):
    first = _run(write_profile, "fx-share-a")
    time.sleep(1.0)
    second = _run(write_profile, "fx-share-b")
    out_a, err_a = first.communicate(120)
    out_b, err_b = second.communicate(120)
    assert first.returncode == 0 and second.returncode == 0, (err_a, err_b)
    a, b = json.loads(out_a), json.loads(out_b)
    (a0, a1), (b0, b1) = a["details"]["window_at"], b["details"]["window_at"]
    assert a1 <= b0 or b1 <= a0, "the two windows overlapped"
    waiting = [line for line in err_b.splitlines() if line.startswith("waiting for CPU")]
    assert waiting and "CPUs 0-1" in waiting[0]  # b started while a measured (or a third labctl did)
    assert any("(lab fx-share-a, CPUs 0-1)" in line for line in waiting) or "fx-share-" not in waiting[0]
    assert b["details"]["cpu_wait_s"] > 0


def test_no_wait_fails_at_once_with_exit_1(write_profile, no_leftovers):
    first = _run(write_profile, "fx-share-c", duration=8)
    try:
        deadline = time.time() + 60
        from labctl.lab.hostlock import holder_of

        while time.time() < deadline and (holder_of(0) or {}).get("lab") != "fx-share-c":
            time.sleep(0.05)
        second = _run(write_profile, "fx-share-d", "--no-wait")
        _out, err = second.communicate(60)
        assert second.returncode == 1
        assert f"pid {first.pid} (lab fx-share-c, CPUs 0-1)" in err and "--no-wait" in err
        assert len([line for line in err.splitlines() if line.strip()]) == 1
    finally:
        first.communicate(120)


def test_a_busy_stranger_on_the_cpus_is_named_in_the_record(write_profile, no_leftovers):
    spin = subprocess.run(["/bin/sh", "-c", f"{sys.executable} -c 'import os,time\nos.sched_setaffinity(0,{{1}})\n"
                           "t=time.time()+30\nwhile time.time()<t: pass' >/dev/null 2>&1 & echo $!"],
                          capture_output=True, text=True, check=True)
    stranger = int(spin.stdout.strip())
    try:
        proc = _run(write_profile, "fx-share-e")
        out, err = proc.communicate(120)
        record = json.loads(out)
        assert any(f"pid {stranger} python" in w for w in record["warnings"]), record["warnings"]
        assert any(s["pid"] == stranger for s in record["details"]["busy_strangers"])
    finally:
        os.kill(stranger, signal.SIGKILL)
