"""The guest image cache: its directory, its entries (``GuestImageInfo``), ``cached()`` and
``build_guest_image()``, the entry point, and ``copy_image()`` (a copy of the cached image at a path).

An entry is ``guest-<key>/`` holding ``guest.qcow2``, ``vmlinuz``, ``initrd.img``, ``cmdline`` and
``guest.json``. :class:`labctl.lab.libvirt.buildcache.BuildCache` builds it in a ``.build-guest-*`` directory
beside the entries and renames it into place (an entry is complete or absent), under a lock (``.guest.lock``: one
builder per cache directory). A build that was killed leaves its work directory; the next build, holding the
lock, stops its processes, unmounts and detaches what is under it and removes it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from labctl import paths
from labctl.digest import sha256_file
from labctl.errors import GuestImageError, UserError
from labctl.lab.libvirt.guestimage.builder import CMDLINE_NAME, IMAGE_NAME, build_entry
from labctl.lab.libvirt.guestimage.inputs import compute_key, gather_inputs
from labctl.lab.libvirt.guestimage.layout import INITRD_NAME, KERNEL_NAME
from labctl.lab.libvirt.buildcache import BuildCache
from labctl.lab.libvirt.guestimage.tools import Progress, say

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


def _cache(cache_dir: Path) -> BuildCache[GuestImageInfo]:
    """The guest images' :class:`~labctl.lab.libvirt.buildcache.BuildCache` in ``cache_dir`` (0755: QEMU's user
    reads the images)."""
    return BuildCache(cache_dir, load_entry, ENTRY_META, GuestImageError, entry_prefix=ENTRY_PREFIX,
                      build_prefix=BUILD_PREFIX, lock_name=".guest.lock", keep=KEEP_ENTRIES, mode=0o755)


def cached(cache_dir: Path | None = None) -> GuestImageInfo | None:
    """The entry for the current inputs, or None."""
    return _cache(Path(cache_dir) if cache_dir is not None else default_cache_dir()).lookup(
        compute_key(gather_inputs()))


def clean_stale(cache_dir: Path, keep: int = KEEP_ENTRIES) -> list[str]:
    """With the lock held: free and remove killed builds' work directories; keep the ``keep`` newest entries."""
    return _cache(cache_dir).clean(keep)


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
    cache = _cache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    inputs = gather_inputs()
    key = compute_key(inputs)
    info = cache.build(key, lambda work, entry: build_entry(inputs, key, work, entry, on_progress), force=force,
                       progress=on_progress, published=lambda meta: _remember(cache.directory, meta["sha256"]))
    if info.built:
        say(on_progress, f"built {info.entry.name[:18]} in {info.build_seconds:.0f} s: {info.size_bytes / 1e6:.0f} MB qcow2")
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
