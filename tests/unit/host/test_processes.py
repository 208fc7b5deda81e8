"""labctl.host.processes: stopping a process by pid and start time, finding a lab's tagged processes."""

from __future__ import annotations

import os
import subprocess
import sys

from labctl.host.processes import TAG_VARIABLE, stop_process, tagged_processes
from labctl.owner import process_alive, process_started


def test_stop_process_terminates_the_process_that_started_then():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = process_started(proc.pid)
        stop_process(proc.pid, started, timeout_s=5.0)
        assert not process_alive(proc.pid, started)  # stopped and reaped (psutil waited for it)
    finally:
        proc.kill()
        proc.wait()


def test_stop_process_kills_one_that_ignores_sigterm():
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"1"  # the handler is set
        started = process_started(proc.pid)
        stop_process(proc.pid, started, timeout_s=0.3)  # SIGTERM ignored: SIGKILL after 0.3 s
        assert not process_alive(proc.pid, started)
    finally:
        proc.kill()
        proc.wait()


def test_stop_process_spares_a_pid_with_another_start_time():
    proc = subprocess.Popen(["sleep", "30"])
    try:
        started = process_started(proc.pid)
        assert started is not None
        stop_process(proc.pid, started - 1.0)  # the recorded process was another one: it is gone
        stop_process(proc.pid, None)  # an unknown start time never names a live process
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_tagged_processes_finds_only_its_tag_and_names():
    tag = f"labctl-unit-processes-{os.getpid()}"
    mine = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_VARIABLE: tag})
    other = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_VARIABLE: tag + "-other"})
    try:
        assert [p.pid for p in tagged_processes(tag)] == [mine.pid]
        assert [p.pid for p in tagged_processes(tag, ["sleep"])] == [mine.pid]
        assert tagged_processes(tag, ["iperf3"]) == []
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()
