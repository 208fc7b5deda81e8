"""The appliance cache: its directory, its entries (``Appliance``), ``cached()`` and ``build()``, the entry
points.

A build with the same inputs (``gather_inputs``, hashed by ``compute_key``) is a cache hit and returns
at once; a miss is built, published and cleaned up by :class:`labctl.lab.libvirt.buildcache.BuildCache`
(lock, re-check, a work directory beside the entries, one rename), so an entry is either complete or absent.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from labctl import paths
from labctl.digest import sha256_file
from labctl.errors import ApplianceError
from labctl.lab.libvirt.appliance.console import kernel_cmdline
from labctl.lab.libvirt.appliance.image import INITRD_NAME, KERNEL_NAME, _stage, init_sh_text
from labctl.lab.libvirt.appliance.kernel import _fetch_kernel_deb, package_versions, resolve_kernel
from labctl.lab.libvirt.appliance.key import KeyInputs, compute_key
from labctl.lab.libvirt.appliance.tools import Progress, say
from labctl.lab.libvirt.buildcache import BuildCache

KEEP_ENTRIES = 3  # cache entries kept after a build (each about 17 MB)
ENTRY_META = "appliance.json"


@dataclass(frozen=True)
class Appliance:
    """A built appliance in the cache."""

    kernel: Path
    initrd: Path
    key: str
    kernel_version: str
    size_bytes: int  # kernel + initramfs on disk
    initrd_bytes: int = 0
    kernel_package: str = ""
    built: bool = False  # True when this call built it, False for a cache hit

    @property
    def path(self) -> Path:
        return self.kernel.parent

    def cmdline(self, mode: str = "verify", console: str = "ttyS0", extra: Iterable[str] = (),
                **params: object) -> str:
        """The kernel command line for ``mode`` with ``labctl.NAME=VALUE`` for every keyword."""
        return kernel_cmdline(mode, console=console, extra=extra, **params)


def default_cache_dir() -> Path:
    """LABCTL_CACHE_DIR, else labctl's appliance cache (:func:`labctl.paths.cache_dir`)."""
    return paths.cache_dir("LABCTL_CACHE_DIR", "appliance")


def gather_inputs(progress: Progress = None, cache_dir: Path | None = None,
                  update_apt: bool = True, forwarder: str | None = None) -> KeyInputs:
    """What the appliance would be made from now, from apt's index and dpkg (no download); ``forwarder``: a
    build's dpdk-testpmd (a resolved path) the appliance carries instead of Debian's."""
    image, version, sha256, filename = resolve_kernel(progress, memo_dir=cache_dir,
                                                      update_apt=update_apt)
    return KeyInputs(
        kernel_package=image,
        kernel_deb_version=version,
        kernel_deb_sha256=sha256,
        packages=package_versions(),
        init_sh_sha256=hashlib.sha256(init_sh_text()).hexdigest(),
        kernel_deb_filename=filename,
        forwarder_sha256=sha256_file(Path(forwarder)) if forwarder else "",
        forwarder_path=forwarder or "",
    )


def _load_entry(path: Path, built: bool = False) -> Appliance | None:
    meta_path = path / ENTRY_META
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    kernel, initrd = path / str(meta.get("kernel_file", KERNEL_NAME)), path / INITRD_NAME
    if not kernel.is_file() or not initrd.is_file():
        return None
    return Appliance(
        kernel=kernel,
        initrd=initrd,
        key=meta["key"],
        kernel_version=meta["kernel_version"],
        size_bytes=kernel.stat().st_size + initrd.stat().st_size,
        initrd_bytes=initrd.stat().st_size,
        kernel_package=meta.get("kernel_package", ""),
        built=built,
    )


def _entry_forwarder(path: Path) -> str:
    """The sha256 of the build's forwarder an entry carries ("" for Debian's testpmd)."""
    try:
        return str(json.loads((path / ENTRY_META).read_text()).get("forwarder_sha256", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def _cache(cache_dir: Path) -> BuildCache[Appliance]:
    """The appliance's :class:`~labctl.lab.libvirt.buildcache.BuildCache` in ``cache_dir``: entries named by
    their key, ``.lock``, work directories ``.build-appliance-*``."""
    return BuildCache(cache_dir, _load_entry, ENTRY_META, ApplianceError, build_prefix=".build-appliance-",
                      keep=KEEP_ENTRIES)


def cached(cache_dir: Path | None = None, forwarder: str | None = None) -> Appliance | None:
    """The cached appliance for the current inputs (with ``forwarder``: the one carrying that binary), or None.

    When apt cannot say what the inputs are (no apt lists, no network), the newest complete entry carrying
    the same forwarder (by sha256; none: Debian's).
    """
    cache = _cache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    try:
        key = compute_key(gather_inputs(cache_dir=cache.directory, update_apt=False, forwarder=forwarder))
    except ApplianceError:
        wanted = sha256_file(Path(forwarder)) if forwarder else ""
        entries = [e for path, e in cache.entries() if _entry_forwarder(path) == wanted]
        return entries[-1] if entries else None
    return cache.lookup(key)


def build(cache_dir: Path | None = None, force: bool = False, progress: Progress = None,
          forwarder: str | None = None) -> Appliance:
    """Build the appliance, or return the cached one made from the same inputs. ``forwarder``: a build's
    dpdk-testpmd (resolved path; :func:`labctl.lab.libvirt.appliance.image.missing_libraries` checked first)
    carried instead of Debian's, in an entry of its own (its sha256 is part of the key)."""
    cache = _cache(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    cache.directory.mkdir(parents=True, exist_ok=True)  # apt's resolution is remembered there
    inputs = gather_inputs(progress, cache_dir=cache.directory, forwarder=forwarder)
    key = compute_key(inputs)

    def make(work: Path, entry: Path) -> dict:
        t0 = time.monotonic()
        deb = _fetch_kernel_deb(inputs, cache.directory, work, progress)
        kver, kernel_file = _stage(inputs, key, deb, work, entry, progress)
        return {
            "key": key,
            "kernel_version": kver,
            "kernel_file": kernel_file,
            "kernel_package": inputs.kernel_package,
            "kernel_deb_version": inputs.kernel_deb_version,
            "kernel_deb_sha256": inputs.kernel_deb_sha256,
            "packages": dict(inputs.packages),
            "builder_version": inputs.builder_version,
            "init_sh_sha256": inputs.init_sh_sha256,
            **({"forwarder_sha256": inputs.forwarder_sha256, "forwarder_path": inputs.forwarder_path}
               if inputs.forwarder_sha256 else {}),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - t0, 1),
        }

    app = cache.build(key, make, force=force, progress=progress)
    if app.built:
        say(progress, f"built {key[:12]}: initramfs {app.initrd_bytes / 1e6:.1f} MB")
    return app
