"""Who did it: a process named by pid, start time and host, and whether it still runs.

The ledger records the owner of a lab's resources and the store the owner of a run in progress, so
"left by an earlier labctl" is said (and acted on) only when that labctl is gone, and a second
``--resume`` of a run that is still being run is refused. A pid alone is not enough: pids are reused,
so the start time must match too. The start time is the one the kernel keeps, in seconds after boot
(``/proc/PID/stat``, field 22): exact, and immune to clock steps (a wall-clock start time, as
``psutil.Process.create_time`` derives it from ``btime``, moves when NTP or a paused VM steps the clock,
and a live owner would then be taken for a dead one).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import psutil

_ME: dict[str, Any] | None = None


_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_started(pid: int) -> float | None:
    """When process ``pid`` started, in seconds after boot (None: there is no such process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # the command name may hold blanks and ')'
        return int(fields[19]) / _TICKS_PER_S  # field 22 of proc(5); fields[0] is field 3
    except (OSError, IndexError, ValueError):
        return None


def process_alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` started at ``started`` (:func:`process_started`) still runs (a reused
    pid, a zombie: no)."""
    if started is None:
        return False  # unknown start time: never mistake another process for it
    now = process_started(pid)
    if now is None or abs(now - started) > 1.5 / _TICKS_PER_S:
        return False  # gone, or the pid was reused by another process
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def me() -> dict[str, Any]:
    """This process as an owner record: ``{"pid", "started", "host"}``."""
    global _ME
    if _ME is None or _ME["pid"] != os.getpid():  # a fork is another owner
        _ME = {"pid": os.getpid(), "started": process_started(os.getpid()), "host": socket.gethostname()}
    return dict(_ME)


def alive(owner: Any) -> bool:
    """Whether the owner record (as :func:`me` made it) names a process of this host that still runs;
    a record of another host counts as alive (it cannot be checked from here)."""
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return False
    if owner.get("host") not in (None, socket.gethostname()):
        return True
    return process_alive(owner["pid"], owner.get("started"))


def describe(owner: Any) -> str:
    if not isinstance(owner, dict):
        return "an unknown process"
    host = owner.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"pid {owner.get('pid')}{where}"
