"""The guest image cache: its directory, its entries (``GuestImageInfo``), ``cached()`` and
``build_guest_image()``, the entry point, and ``copy_image()`` (a copy of the cached image at a path).

An entry is ``guest-<key>/`` holding ``guest.qcow2``, ``vmlinuz``, ``initrd.img``, ``cmdline`` and
``guest.json``. It is built in a ``.build-guest-*`` directory beside the entries and renamed into place
(an entry is complete or absent), under a lock (one builder per cache directory). A build that was killed
leaves its work directory; the next build, holding the lock, unmounts and detaches what is under it and
removes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from labctl import paths
from labctl.digest import sha256_file
from labctl.errors import GuestImageError, UserError
from labctl.lab.libvirt.guestimage.builder import CMDLINE_NAME, IMAGE_NAME, build_entry
from labctl.lab.libvirt.guestimage.inputs import compute_key, gather_inputs
from labctl.lab.libvirt.guestimage.layout import INITRD_NAME, KERNEL_NAME
from labctl.lab.libvirt.guestimage.tools import Progress, release, say

CACHE_ENV = "LABCTL_IMAGE_CACHE_DIR"
ENTRY_PREFIX = "guest-"
ENTRY_META = "guest.json"
BUILD_PREFIX = ".build-guest-"
KNOWN_SHA256S = ".guest-sha256s"  # every image this cache has made: a copy of one may be replaced
KEEP_ENTRIES = 2  # each about 0.4 GB


@dataclass(frozen=True)
class GuestImageInfo:
    """A built guest image (a cache entry) and, after ``copy_image``, its copy."""

    path: Path  # the cached qcow2 (never booted directly: boot an overlay of it)
    kernel: Path
    initrd: Path
    cmdline: str  # the kernel command line its boot loader uses (root by UUID, console=ttyS0)
    format: str
    virtual_size: int
    sha256: str
    kernel_release: str  # uname -r in the guest
    kernel_package: str
    kernel_package_version: str  # Debian version of the linux-image package
    dpdk_version: str  # Debian version of dpdk
    key: str
    size_bytes: int  # the qcow2 on disk
    build_seconds: float = 0.0
    built: bool = False  # True when this call built it
    out: Path | None = None  # the copy copy_image made

    @property
    def entry(self) -> Path:
        return self.path.parent


def default_cache_dir() -> Path:
    """LABCTL_IMAGE_CACHE_DIR, else labctl's image cache (:func:`labctl.paths.cache_dir`)."""
    return paths.cache_dir(CACHE_ENV, "images")


def load_entry(path: Path, built: bool = False) -> GuestImageInfo | None:
    """The entry at ``path``, or None when it is incomplete or unreadable."""
    try:
        meta = json.loads((path / ENTRY_META).read_text())
        files = [path / IMAGE_NAME, path / KERNEL_NAME, path / INITRD_NAME]
        if not all(f.is_file() for f in files):
            return None
        return GuestImageInfo(
            path=files[0], kernel=files[1], initrd=files[2],
            cmdline=(path / CMDLINE_NAME).read_text().strip(),
            format=meta["format"], virtual_size=int(meta["virtual_size"]), sha256=meta["sha256"],
            kernel_release=meta["kernel_release"], kernel_package=meta.get("kernel_package", ""),
            kernel_package_version=meta.get("kernel_package_version", ""),
            dpdk_version=meta.get("dpdk_version", ""), key=meta["key"],
            size_bytes=files[0].stat().st_size, build_seconds=float(meta.get("build_seconds", 0.0)),
            built=built)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _entries(cache_dir: Path) -> list[GuestImageInfo]:
    """Complete entries, oldest first."""
    if not cache_dir.is_dir():
        return []
    found = [e for c in cache_dir.glob(ENTRY_PREFIX + "*") if (e := load_entry(c)) is not None]
    return sorted(found, key=lambda e: (e.entry / ENTRY_META).stat().st_mtime)


def cached(cache_dir: Path | None = None) -> GuestImageInfo | None:
    """The entry for the current inputs, or None."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return load_entry(cache_dir / (ENTRY_PREFIX + compute_key(gather_inputs())))


def clean_stale(cache_dir: Path, keep: int = KEEP_ENTRIES) -> list[str]:
    """With the lock held: free and remove killed builds' work directories; keep the ``keep`` newest entries."""
    removed: list[str] = []
    for stale in cache_dir.glob(BUILD_PREFIX + "*"):
        removed += release(stale)
        removed.append(str(stale))
    entries = _entries(cache_dir)
    for old in entries[: max(0, len(entries) - keep)]:
        shutil.rmtree(old.entry, ignore_errors=True)
        removed.append(str(old.entry))
    return removed


def _remember(cache_dir: Path, sha256: str) -> None:
    with open(cache_dir / KNOWN_SHA256S, "a") as f:
        f.write(sha256 + "\n")


def known_sha256s(cache_dir: Path) -> set[str]:
    try:
        return set((cache_dir / KNOWN_SHA256S).read_text().split())
    except OSError:
        return set()


def build_guest_image(force: bool = False, on_progress: Progress = None,
                      cache_dir: Path | None = None) -> GuestImageInfo:
    """Build the guest image, or return the cached one made from the same inputs (``force``: rebuild)."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache_dir.chmod(0o755)
    inputs = gather_inputs()
    key = compute_key(inputs)
    final = cache_dir / (ENTRY_PREFIX + key)
    if not force and (hit := load_entry(final)) is not None:
        say(on_progress, f"cache hit {final}")
        return hit
    with open(cache_dir / ".guest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per cache directory
        if not force and (hit := load_entry(final)) is not None:  # another process built it meanwhile
            return hit
        for gone in clean_stale(cache_dir):
            say(on_progress, f"removed a killed build's leftover {gone}")
        work = Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=cache_dir))
        try:
            entry = work / "entry"
            entry.mkdir(mode=0o755)
            meta = build_entry(inputs, key, work, entry, on_progress)
            (entry / ENTRY_META).write_text(json.dumps(meta, indent=1) + "\n")
            entry.chmod(0o755)
            if final.exists():  # force: never leave a half entry
                os.rename(final, work / "old")
            os.rename(entry, final)
            _remember(cache_dir, meta["sha256"])
        finally:
            release(work)
        clean_stale(cache_dir)
    info = load_entry(final, built=True)
    if info is None:
        raise GuestImageError(f"the new cache entry {final} is unreadable")
    say(on_progress, f"built {final.name[:18]} in {info.build_seconds:.0f} s: {info.size_bytes / 1e6:.0f} MB qcow2")
    return info


def check_out(out: Path, force: bool, cache_dir: Path | None = None) -> None:
    """Refuse an ``--out`` that cannot be written, or an existing file that is not a copy this cache made."""
    if out.is_dir():
        raise UserError(f"--out: {out} is a directory; give the image file's path")
    if not out.parent.is_dir():
        raise UserError(f"--out: the directory {out.parent} does not exist")
    if out.exists() and not force:
        cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        if sha256_file(out) not in known_sha256s(cache_dir):
            raise UserError(f"--out: {out} exists and is not a guest image labctl made; "
                            "choose another path or pass --force")


def copy_image(info: GuestImageInfo, out: Path, progress: Progress = None) -> GuestImageInfo:
    """Copy the cached image to ``out`` (a temporary file renamed into place); unchanged when equal."""
    if out.is_file() and out.stat().st_size == info.size_bytes and sha256_file(out) == info.sha256:
        say(progress, f"{out} is already this image")
        return replace(info, out=out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{int(time.time())}.tmp")
    try:
        shutil.copyfile(info.path, tmp)
        tmp.chmod(0o644)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    say(progress, f"copied to {out}")
    return replace(info, out=out)
