"""The guest's root tree: ``mmdebstrap`` of Debian's ``minbase`` variant with the image's packages, then
the files of ``files/rootfs`` copied over it, the slow or disk-writing units masked, fstab written and
the versions of what it holds read from its dpkg database.

Documentation, man pages and translations are never unpacked (dpkg ``path-exclude``; the copyright
files stay), apt's downloaded packages and lists are not kept (mmdebstrap's default).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from labctl.errors import GuestImageError
from labctl.lab.libvirt.guestimage.inputs import FILES_DIR, GuestInputs
from labctl.lab.libvirt.guestimage.layout import fstab_text
from labctl.lab.libvirt.guestimage.tools import Progress, run, say

DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/info/*",
    "force-unsafe-io",  # no fsync per unpacked file: the tree is only the source of mke2fs -d
)


def mmdebstrap_args(inputs: GuestInputs, target: Path) -> list[str]:
    args = ["mmdebstrap", "--mode=root", "--format=directory", "--variant=minbase",
            "--include=" + ",".join(inputs.packages)]
    args += [f"--dpkgopt={opt}" for opt in DPKG_EXCLUDES]
    return args + [inputs.suite, str(target), inputs.mirror]


def make_tree(inputs: GuestInputs, target: Path, progress: Progress = None) -> None:
    """mmdebstrap the root tree into ``target`` (a new, empty directory)."""
    say(progress, f"mmdebstrap {inputs.suite} from {inputs.mirror} ({len(inputs.packages)} packages)")
    run(mmdebstrap_args(inputs, target), timeout=3600)


def customize(inputs: GuestInputs, root: Path, uuid: str) -> None:
    """Copy files/rootfs over the tree, mask the units, write fstab, drop the initramfs backups."""
    shipped = FILES_DIR / "rootfs"
    if shipped.is_dir():
        shutil.copytree(shipped, root, dirs_exist_ok=True, symlinks=True)
    units = root / "etc/systemd/system"
    units.mkdir(parents=True, exist_ok=True)
    for unit in inputs.masked_units:
        link = units / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink("/dev/null", link)
    (root / "etc/fstab").write_text(fstab_text(uuid))
    for leftover in (root / "boot").glob("*.dpkg-bak"):
        leftover.unlink()
    for leftover in (root / "boot").glob("*.new"):
        leftover.unlink()


def boot_files(root: Path) -> tuple[str, Path, Path]:
    """(kernel release, kernel, initrd) of the one kernel in the tree's /boot."""
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if len(kernels) != 1:
        raise GuestImageError(f"expected one kernel in {root / 'boot'}, found {[k.name for k in kernels]}")
    release = kernels[0].name.removeprefix("vmlinuz-")
    initrd = root / "boot" / f"initrd.img-{release}"
    if not initrd.is_file() or initrd.stat().st_size == 0:
        raise GuestImageError(f"the initramfs {initrd} was not made (initramfs-tools)")
    return release, kernels[0], initrd


def package_versions(root: Path) -> dict[str, str]:
    """package -> version of everything installed in the tree (its dpkg database)."""
    proc = run(["dpkg-query", f"--admindir={root / 'var/lib/dpkg'}", "-W",
                "-f=${Package}\t${Version}\t${db:Status-Abbrev}\n"])
    versions = {}
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        if status.startswith("ii"):
            versions[name] = version
    return versions


def kernel_package(versions: dict[str, str], release: str) -> tuple[str, str]:
    """(package, Debian version) of the kernel image ``release`` (e.g. linux-image-6.1.0-50-amd64)."""
    for name in (f"linux-image-{release}", f"linux-image-{release}-unsigned"):
        if name in versions:
            return name, versions[name]
    for name, version in versions.items():
        if re.fullmatch(r"linux-image-\d.*", name):
            return name, version
    return "", ""
