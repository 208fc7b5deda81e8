"""Busy strangers on a trial's CPUs are named; the trial's own processes are not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from labctl.lab.busy import BusyWatch

SPIN = "import os,time\nos.sched_setaffinity(0,{0})\nt=time.time()+20\nwhile time.time()<t: pass"


def _stranger() -> int:
    """A busy loop pinned to CPU 0 that is not our descendant (its parent exits at once)."""
    out = subprocess.run(["/bin/sh", "-c", f"{sys.executable} -c '{SPIN}' >/dev/null 2>&1 & echo $!"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_a_busy_stranger_on_the_trials_cpus_is_named():
    pid = _stranger()
    try:
        watch = BusyWatch({0})
        watch.start()
        time.sleep(0.6)
        found = watch.check("window")
        assert pid in [s.pid for s in found]  # other engineers' busy processes may be named too
        (warning,) = watch.warnings()
        assert f"pid {pid} python" in warning and "CPUs 0 during the window" in warning
        elsewhere = BusyWatch({1})  # pinned to CPU 0: not on CPU 1
        elsewhere.start()
        time.sleep(0.4)
        assert pid not in [s.pid for s in elsewhere.check("window")]
    finally:
        os.kill(pid, signal.SIGKILL)


def test_own_processes_are_not_strangers():
    child = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        watch = BusyWatch({0}, own_pids=[child.pid])
        watch.start()
        time.sleep(0.5)
        assert child.pid not in [s.pid for s in watch.check("window")]
    finally:
        child.kill()
        child.wait()
