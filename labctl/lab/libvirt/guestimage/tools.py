"""The guest image builder's plumbing: running host tools with their failures as ``GuestImageError``,
progress messages, hashes, and releasing every mount and loop device under a build directory (the
``finally`` of a build, and the clean-up of a build that was killed)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from labctl.errors import GuestImageError

Progress = Callable[[str], None] | None


def say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def run(args: list[str], *, input_text: str | None = None, timeout: float | None = 1800,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a host tool (an argv, never a shell); absence, timeout or failure is a ``GuestImageError``."""
    try:
        proc = subprocess.run(args, input=input_text, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise GuestImageError(f"{args[0]} is not installed (scripts/apt-packages.txt lists it): {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise GuestImageError(f"{args[0]} timed out after {timeout} s") from exc
    if check and proc.returncode != 0:
        detail = [line for line in (proc.stderr or proc.stdout).strip().splitlines() if line.strip()]
        raise GuestImageError(f"{' '.join(args[:3])} ... failed ({proc.returncode}): "
                              f"{detail[-1] if detail else 'no output'}")
    return proc


def sha256_file(path: Path, limit: int | None = None) -> str:
    """SHA-256 of a file (of its first ``limit`` bytes when given), read in 1 MiB chunks."""
    h = hashlib.sha256()
    left = limit
    with open(path, "rb") as f:
        while left is None or left > 0:
            chunk = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    return h.hexdigest()


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


def release(directory: Path, remove: bool = True) -> list[str]:
    """Unmount everything under ``directory``, detach its loop devices, then (``remove``) delete it.

    Never deletes through a mount that is still there (a mounted /proc or the image's file system)."""
    released = []
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
        shutil.rmtree(directory, ignore_errors=True)
    return released
