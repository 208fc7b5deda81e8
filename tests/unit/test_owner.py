"""Owners named by pid and the kernel's start time: alive while they run, dead once gone or reused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

from labctl import owner


def test_the_start_time_is_the_kernels_and_matches_psutils_within_the_clock():
    started = owner.process_started(os.getpid())
    assert started is not None and started > 0
    since_boot = psutil.Process().create_time() - psutil.boot_time()
    assert abs(started - since_boot) < 1.0  # the same instant, counted from boot instead of the epoch
    assert owner.me()["started"] == started


def test_a_live_owner_is_alive_and_a_wrong_start_time_or_an_exited_one_is_not():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = owner.process_started(child.pid)
        assert owner.process_alive(child.pid, started)
        assert not owner.process_alive(child.pid, started - 5.0)  # a reused pid: another start time
        assert not owner.process_alive(child.pid, None)
        assert owner.alive({"pid": child.pid, "started": started, "host": None})
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while owner.process_alive(child.pid, started) and time.monotonic() < deadline:
        time.sleep(0.05)  # a zombie until reaped: counted as gone
    assert not owner.process_alive(child.pid, started)
    child.wait()
    assert owner.process_started(child.pid) is None
    assert not owner.alive({"pid": child.pid, "started": started, "host": None})


def test_a_command_name_with_blanks_and_parentheses_is_parsed(tmp_path):
    odd = tmp_path / "x) 1 2 (y"  # the kernel names the process after the file it executes
    odd.symlink_to("/bin/sleep")
    child = subprocess.Popen([str(odd), "30"])
    try:
        time.sleep(0.2)
        assert psutil.Process(child.pid).name() == "x) 1 2 (y"
        started = owner.process_started(child.pid)
        assert started is not None and owner.process_alive(child.pid, started)
    finally:
        child.kill()
        child.wait()
