"""A user's disk image (``guest.image``) as ``qemu-img info`` sees it, and its identity.

The format comes from ``qemu-img info --output=json`` (QEMU's qemu-img documentation), never from the file's
name; ``-U`` (force-share) lets it read an image a running QEMU holds. An image is accepted as ``qcow2`` or
``raw``; a raw one must look like a disk (a whole number of 512-byte sectors, at least 1 MiB), since
qemu-img calls any file raw. Every file of its backing chain must lie in the image's own directory (a
chain leaving it would make labctl read, and hand to QEMU, files the user did not name). The identity a
record carries is the size plus the sha256 of the first MiB: cheap on a multi-GiB image, and it changes
when the image is rebuilt.

QEMU runs as libvirt's QEMU user, and labctl never chowns or relabels the user's files (the domain XML
declares the chain with ``relabel='no'``), so every file of the chain must be readable, and every
directory above it searchable, by that user through the world bits or QEMU's group
(:data:`labctl.platform.QEMU_GROUP`); otherwise the image is refused before any boot.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from labctl.digest import sha256_file

FORMATS = ("qcow2", "raw")
SECTOR = 512
MIN_RAW_BYTES = 1 << 20
IDENTITY_BYTES = 1 << 20


class ImageProblem(Exception):
    """Why a file is not an image labctl boots (one line, without the field: the caller names it)."""


@dataclass(frozen=True)
class ImageInfo:
    path: str  # resolved
    format: str
    virtual_size: int
    size: int
    backing: tuple[str, ...]  # the backing chain's files, nearest first
    sha256_1mib: str
    backing_formats: tuple[str, ...] = ()  # their formats, as qemu-img names them

    @property
    def chain(self) -> tuple[tuple[str, str], ...]:
        """The image and its backing files as (path, format), nearest first (the domain XML declares them)."""
        return ((self.path, self.format), *zip(self.backing, self.backing_formats))

    @property
    def identity(self) -> str:
        return f"{self.size}:{self.sha256_1mib}"

    def record(self) -> dict[str, object]:
        return {"path": self.path, "format": self.format, "virtual_size": self.virtual_size, "size": self.size,
                "identity": self.identity, "backing": list(self.backing)}


def probe(path: str) -> ImageInfo:
    """The image at ``path`` checked (:class:`ImageProblem` when it is not one labctl boots)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise ImageProblem(f"{path}: {exc.strerror} (build one with `labctl image guest --out PATH`)") from None
    if not os.path.isfile(real):
        raise ImageProblem(f"{path} is not a regular file")
    return _probe(real, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=16)
def _probe(real: str, size: int, mtime_ns: int) -> ImageInfo:
    try:
        out = subprocess.run(["qemu-img", "info", "-U", "--output=json", "--backing-chain", real],
                             capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImageProblem(f"qemu-img info {real} failed ({exc})") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise ImageProblem(f"{real} is not a disk image qemu-img reads ({last[:120]})")
    try:
        chain = json.loads(out.stdout)
    except ValueError:
        raise ImageProblem(f"qemu-img info {real}: unreadable output") from None
    top = chain[0]
    fmt = str(top.get("format"))
    if fmt not in FORMATS:
        raise ImageProblem(f"{real} is a {fmt} image (allowed: {', '.join(FORMATS)})")
    if fmt == "raw" and (size % SECTOR or size < MIN_RAW_BYTES):
        raise ImageProblem(f"{real} is not a disk image (qemu-img calls it raw, but {size} bytes is not a whole "
                           f"number of {SECTOR}-byte sectors of at least 1 MiB; allowed: a qcow2 or raw disk image)")
    home = os.path.dirname(real)
    backing, formats = [], []
    for layer in chain[1:]:
        name = os.path.realpath(str(layer.get("filename", "")))
        if os.path.dirname(name) != home:
            raise ImageProblem(f"{real} has a backing file {name} outside {home} (allowed: a backing chain in the "
                               "image's own directory, or none; `qemu-img convert` makes a standalone copy)")
        if layer.get("format") not in FORMATS:
            raise ImageProblem(f"{real}: its backing file {name} is {layer.get('format')} (allowed: qcow2, raw)")
        backing.append(name)
        formats.append(str(layer["format"]))
    if top.get("backing-filename") and not backing:
        raise ImageProblem(f"{real}: its backing file {top.get('backing-filename')} cannot be opened")
    return ImageInfo(real, fmt, int(top.get("virtual-size", 0)), size, tuple(backing),
                     sha256_file(real, IDENTITY_BYTES), tuple(formats))


def qemu_can_read(path: str, gid: int | None) -> str | None:
    """Why QEMU's user (through the world bits or QEMU's group ``gid``) cannot read ``path``, or None."""
    def allowed(st: os.stat_result, world: int, group: int) -> bool:
        return bool(st.st_mode & world) or (gid is not None and st.st_gid == gid and bool(st.st_mode & group))

    st = os.stat(path)
    if not allowed(st, 0o004, 0o040):
        return f"{path} (mode {st.st_mode & 0o777:04o}) is not readable by QEMU's user"
    parent = os.path.dirname(path)
    while True:
        st = os.stat(parent)
        if not allowed(st, 0o001, 0o010):
            return f"its directory {parent} (mode {st.st_mode & 0o777:04o}) is not searchable by QEMU's user"
        if parent == os.path.dirname(parent):
            return None
        parent = os.path.dirname(parent)


def check_qemu_reads(info: ImageInfo) -> None:
    """Every file of ``info``'s chain readable by QEMU's user (:class:`ImageProblem` naming the first that is not)."""
    from labctl.platform import QEMU_GROUP
    from labctl.safefs import qemu_gid

    gid = qemu_gid()
    for path, _ in info.chain:
        why = qemu_can_read(path, gid)
        if why:
            raise ImageProblem(f"{why} (labctl never chowns or relabels your image; allowed: world-readable, "
                               f"or readable by the group {QEMU_GROUP}, e.g. chmod o+r / chgrp {QEMU_GROUP})")


def identity_of(path: str) -> str:
    """Size plus the sha256 of the first MiB, without qemu-img (the plan's domain key)."""
    try:
        real = Path(path).resolve()
        return f"{real.stat().st_size}:{sha256_file(real, IDENTITY_BYTES)}"
    except OSError:
        return "missing"
