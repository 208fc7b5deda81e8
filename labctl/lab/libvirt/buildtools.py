"""The builders' plumbing, one set for the appliance and the guest image: progress messages, running a host tool
(apt, dpkg, busybox, mmdebstrap, mkfs, losetup ...), and freeing a build directory (its processes, mounts and loop
devices) before it is removed.

``run`` takes the caller's error class (``ApplianceError``, ``GuestImageError``: ``appliance/tools.py`` and
``guestimage/tools.py`` bind it with their default timeout). What it does, for both:

* an argv, never a shell; its output captured (text), its stdin closed unless ``input_text`` is given;
* in a process group of its own that gets SIGTERM when labctl dies, even by kill -9 (``prctl(PR_SET_PDEATHSIG)``);
* on a timeout, SIGINT, SIGTERM or a face's cancel the whole group is stopped (SIGTERM, SIGKILL after a grace)
  before ``run`` returns, so nothing (mmdebstrap's dpkg, apt's methods) still writes in a build directory while
  it is removed;
* a missing tool, a timeout or (``check``) a non-zero exit is one line of the caller's error naming the command
  (``shlex.join``, clipped to :data:`COMMAND_SHOWN` characters) and, for a failure, the exit code and the last
  line the tool printed (stderr, else stdout).
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from labctl.errors import LabFault

Progress = Callable[[str], None] | None

COMMAND_SHOWN = 200  # characters of a command line in an error (mmdebstrap's runs to 400 with its package list)
STOP_GRACE_S = 10.0  # SIGTERM to SIGKILL for a stopped tool's process group
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def say(progress: Progress, msg: str) -> None:
    """Pass ``msg`` to the caller's progress callback, if there is one."""
    if progress is not None:
        progress(msg)


def command_text(args: list[str]) -> str:
    """``args`` as one shell-quoted line for a message, clipped to :data:`COMMAND_SHOWN` characters."""
    text = shlex.join(args)
    return text if len(text) <= COMMAND_SHOWN else text[:COMMAND_SHOWN] + " ..."


def _last_line(*outputs: str | None) -> str:
    for text in outputs:
        lines = [line for line in (text or "").splitlines() if line.strip()]
        if lines:
            return lines[-1].strip()
    return "no output"


@cache
def die_with_parent() -> Callable[[], None]:
    """The child's pre-exec step (here and in a recipe's build, ``labctl.lab.recipes``): SIGTERM when labctl dies.
    ``prctl`` is looked up here, in the parent: the child of a threaded process only calls it (a ``dlopen``
    after fork could wait for a lock another thread held)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return in_child


def run(args: list[str], *, error: type[LabFault] = LabFault, cwd: Path | None = None,
        input_text: str | None = None, timeout: float | None = 900, check: bool = True
        ) -> subprocess.CompletedProcess[str]:
    """Run a host tool (see the module's docstring); absence, a timeout or (``check``) a failure is ``error``."""
    try:
        proc = subprocess.Popen(args, cwd=cwd, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=die_with_parent())
    except FileNotFoundError as exc:
        raise error(f"{args[0]} is not installed (scripts/apt-packages.txt lists it): {exc}") from exc
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise error(f"{command_text(args)} timed out after {timeout:g} s") from None
    except BaseException:
        stop_group(proc)
        raise
    if check and proc.returncode != 0:
        raise error(f"{command_text(args)} failed ({proc.returncode}): {_last_line(err, out)}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def stop_group(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM the process group of ``proc`` (its own session), SIGKILL it after ``grace_s``, reap the leader."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group once its leader has gone
    except ProcessLookupError:
        pass
    proc.wait()


def _unescape_mount(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts_under(directory: Path) -> list[str]:
    """Mount points at or under ``directory`` (deepest first), from /proc/self/mounts."""
    base = os.path.realpath(directory)
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 1:
            point = _unescape_mount(fields[1])
            if point == base or point.startswith(base + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def loops_under(directory: Path, error: type[LabFault] = LabFault) -> list[str]:
    """Loop devices whose backing file is under ``directory`` (``losetup --list --json``)."""
    base = os.path.realpath(directory)
    proc = run(["losetup", "--list", "--json", "--output", "NAME,BACK-FILE"], error=error, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return []
    found = []
    for dev in json.loads(proc.stdout).get("loopdevices", []):
        back = (dev.get("back-file") or "").removesuffix(" (deleted)")
        if back == base or back.startswith(base + "/"):
            found.append(dev["name"])
    return found


def processes_in(directory: Path) -> list:
    """Processes working in ``directory``: one naming it (or a path under it) in its command line, or whose
    root or working directory is under it (a killed build's mmdebstrap, apt, dpkg in its chroot)."""
    import psutil

    base = os.path.realpath(directory)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            places = [part.partition("=")[2] or part for part in proc.info["cmdline"] or []]
            places += [proc.cwd(), os.readlink(f"/proc/{proc.pid}/root")]
        except (psutil.Error, OSError):
            continue
        if any(p == base or p.startswith(base + "/") for p in places):
            found.append(proc)
    return found


def release(directory: Path, remove: bool = True, error: type[LabFault] = LabFault) -> list[str]:
    """Stop the processes working in ``directory``, unmount everything under it, detach its loop devices, then
    (``remove``) delete it. Returns what it freed.

    Never deletes through a mount that is still there (a mounted /proc or the image's file system): that is
    ``error``."""
    import psutil

    released = []
    procs = processes_in(directory)
    for proc in procs:
        try:
            proc.kill()
            released.append(f"process {proc.pid}")
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)
    for point in mounts_under(directory):
        if run(["umount", point], error=error, check=False).returncode != 0:
            run(["umount", "--lazy", point], error=error, check=False)
        released.append(point)
    for dev in loops_under(directory, error):
        run(["losetup", "--detach", dev], error=error, check=False)
        released.append(dev)
    if remove and directory.exists():
        if mounts_under(directory):
            raise error(f"{directory} still has mounts under it; not removed")
        for _ in range(5):  # a process that was just stopped may have written one more file
            shutil.rmtree(directory, ignore_errors=True)
            if not directory.exists():
                break
            time.sleep(1)
    return released
