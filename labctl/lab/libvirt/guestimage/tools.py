"""The guest image builder's plumbing: running host tools with their failures as ``GuestImageError``,
progress messages, hashes, and releasing every mount and loop device under a build directory (the
``finally`` of a build, and the clean-up of a build that was killed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from labctl.errors import GuestImageError
from labctl.host.processes import die_with_parent, stop_group  # noqa: F401  (stop_group: the builder's too)

Progress = Callable[[str], None] | None


def say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def run(args: list[str], *, input_text: str | None = None, timeout: float | None = 1800,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a host tool (an argv, never a shell) in a process group of its own; absence, timeout or failure is
    a ``GuestImageError``. Interrupted (SIGINT, SIGTERM, the timeout), the whole group is stopped before this
    returns, so nothing (mmdebstrap's dpkg, say) still writes in the build directory while it is removed."""
    try:
        proc = subprocess.Popen(args, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=die_with_parent)
    except FileNotFoundError as exc:
        raise GuestImageError(f"{args[0]} is not installed (scripts/apt-packages.txt lists it): {exc}") from exc
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        raise GuestImageError(f"{args[0]} timed out after {timeout} s") from None
    except BaseException:
        stop_group(proc)
        raise
    if check and proc.returncode != 0:
        detail = [line for line in (err or out).strip().splitlines() if line.strip()]
        raise GuestImageError(f"{' '.join(args[:3])} ... failed ({proc.returncode}): "
                              f"{detail[-1] if detail else 'no output'}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


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


def loops_under(directory: Path) -> list[str]:
    """Loop devices whose backing file is under ``directory`` (``losetup --list --json``)."""
    base = os.path.realpath(directory)
    proc = run(["losetup", "--list", "--json", "--output", "NAME,BACK-FILE"], check=False)
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


def release(directory: Path, remove: bool = True) -> list[str]:
    """Stop the processes working in ``directory``, unmount everything under it, detach its loop devices, then
    (``remove``) delete it.

    Never deletes through a mount that is still there (a mounted /proc or the image's file system)."""
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
        proc = run(["umount", point], check=False)
        if proc.returncode != 0:
            run(["umount", "--lazy", point], check=False)
        released.append(point)
    for dev in loops_under(directory):
        run(["losetup", "--detach", dev], check=False)
        released.append(dev)
    if remove and directory.exists():
        if mounts_under(directory):
            raise GuestImageError(f"{directory} still has mounts under it; not removed")
        for _ in range(5):  # a process that was just stopped may have written one more file
            shutil.rmtree(directory, ignore_errors=True)
            if not directory.exists():
                break
            time.sleep(1)
    return released
