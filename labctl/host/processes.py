"""Processes on this host that labctl started: stopping one (SIGTERM, then SIGKILL) without touching a
process that reused its pid, and finding the ones a lab tagged in their environment.

A pid alone names a process only until it exits: the start time (:func:`labctl.owner.process_started`)
must match too. ``stop_process`` sends SIGTERM, waits, then SIGKILL (signal(7)); ``tagged_processes``
reads each process's environment (``/proc/PID/environ``, proc(5)), which a process's own changes to its
environment do not alter: the tag given at ``execve`` stays.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil

from labctl.owner import process_alive

#: The environment variable that marks a process as one of a lab's (the ledger's ``tagged`` kind): a
#: lab's host-side iperf3 and sockperf clients and servers carry ``LABCTL_TAG=<the lab's tag>``.
TAG_VARIABLE = "LABCTL_TAG"


def stop_process(pid: int, started: float | None, timeout_s: float = 10.0) -> None:
    """SIGTERM process ``pid`` if it is still the one that started at ``started``; SIGKILL it when it
    has not exited after ``timeout_s``. A process that is gone (or a reused pid) is left alone."""
    if not process_alive(pid, started):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).wait(5)
    except psutil.Error:
        pass


def tagged_processes(tag: str, names: list[str] | tuple[str, ...] = ()) -> list[psutil.Process]:
    """Every process (named one of ``names``, when given) whose environment has ``LABCTL_TAG=tag``."""
    found = []
    for proc in psutil.process_iter(["name"]):
        if names and proc.info.get("name") not in names:
            continue
        try:
            if proc.environ().get(TAG_VARIABLE) == tag:
                found.append(proc)
        except psutil.Error:
            continue
    return found
