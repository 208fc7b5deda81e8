"""The kernel modules of the appliance: the groups init.sh loads, the module index of the kernel package,
dependency order and decompression.

Only the userspace driver uio_pci_generic is usable with Debian's kernel on a guest without an IOMMU:
Debian 12 builds the kernel without ``CONFIG_VFIO_NOIOMMU``, so vfio-pci needs a virtual IOMMU in the
guest. The vfio modules are still in the initramfs for that case (``labctl.driver=vfio-pci``).
"""

from __future__ import annotations

import gzip
import lzma
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from labctl.errors import ApplianceError

# Module groups, loaded by init.sh from /etc/labctl/modules.<group>. Each list is completed with its
# dependencies and put in dependency order at build time; the order below is the load order the
# virtio stack needs (virtio_ring, virtio, virtio_pci_legacy_dev, virtio_pci_modern_dev, virtio_pci,
# failover, net_failover, virtio_net).
MODULE_GROUPS: dict[str, tuple[str, ...]] = {
    "net": (
        "virtio_ring",
        "virtio",
        "virtio_pci_legacy_dev",
        "virtio_pci_modern_dev",
        "virtio_pci",
        "failover",
        "net_failover",
        "virtio_net",
        "virtio_console",
        "e1000",  # QEMU's e1000 and e1000e NICs (guest.nics.*.model)
        "e1000e",
    ),
    "uio": ("uio", "uio_pci_generic"),
    "vfio": ("vfio", "vfio_iommu_type1", "vfio_pci_core", "vfio_pci"),
}

_MOD_SUFFIXES = (".ko.xz", ".ko.zst", ".ko.gz", ".ko")


def _module_name(filename: str) -> str:
    for suffix in _MOD_SUFFIXES:
        if filename.endswith(suffix):
            return filename[: -len(suffix)].replace("-", "_")
    raise ValueError(filename)


def _decompress_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko.zst"):
        proc = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=False)
        if proc.returncode != 0:
            raise ApplianceError(f"cannot decompress {path.name}: is zstd installed?")
        return proc.stdout
    return data


def _modinfo_depends(ko: bytes) -> list[str]:
    """The ``depends=`` field of a module's .modinfo section (NUL-separated key=value strings)."""
    m = re.search(rb"(?:^|\x00)depends=([^\x00]*)\x00", ko)
    if not m or not m.group(1):
        return []
    return [d.decode().replace("-", "_") for d in m.group(1).split(b",") if d]


def module_index(moddir: Path) -> tuple[dict[str, Path], set[str]]:
    """Module name -> file under ``moddir`` (lib/modules/VERSION), and the names built in."""
    index: dict[str, Path] = {}
    for path in (moddir / "kernel").rglob("*.ko*"):
        try:
            index[_module_name(path.name)] = path
        except ValueError:
            continue
    builtin: set[str] = set()
    listing = moddir / "modules.builtin"
    if listing.is_file():
        for line in listing.read_text().splitlines():
            builtin.add(_module_name(Path(line.strip()).name))
    return index, builtin


def module_load_order(wanted: Iterable[str], index: Mapping[str, Path], builtin: set[str],
                      loaded: dict[str, bytes]) -> list[str]:
    """``wanted`` with their dependencies, each after what it depends on, built-ins left out.

    ``loaded`` caches name -> decompressed module bytes (filled as a side effect).
    """
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in order or name in builtin:
            return
        if name in visiting:
            raise ApplianceError(f"module dependency cycle at {name}")
        if name not in index:
            raise ApplianceError(f"kernel module {name} is neither in the kernel package nor built in")
        visiting.add(name)
        if name not in loaded:
            loaded[name] = _decompress_module(index[name])
        for dep in _modinfo_depends(loaded[name]):
            visit(dep)
        visiting.discard(name)
        order.append(name)

    for name in wanted:
        visit(name)
    return order
