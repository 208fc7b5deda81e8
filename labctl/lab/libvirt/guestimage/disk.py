"""The guest's disk: a raw file with an MBR partition table (sfdisk on the file), an ext4 root file system
made on an offset loop device (``losetup -o``: the kernel may not make ``/dev/loopNpM`` nodes here, so
``losetup -P`` is not used) and filled from the root tree (``mke2fs -d``), extlinux installed into it
through a mount of that loop device, and syslinux's ``mbr.bin`` written into the first sector; then
``qemu-img convert`` to a compressed qcow2.

Every mount and loop device is under (mounted at, or backed by a file in) the build directory, so
:func:`labctl.lab.libvirt.guestimage.tools.release` frees them all on every path, and the next build
frees those of a build that was killed.
"""

from __future__ import annotations

from pathlib import Path

from labctl.errors import GuestImageError
from labctl.lab.libvirt.guestimage.layout import (MBR_BOOT_CODE_BYTES, extlinux_conf, mkfs_args,
                                                  partition_bytes, partition_offset, sfdisk_script)
from labctl.lab.libvirt.guestimage.tools import Progress, run, say

MBR_BIN_PATHS = (Path("/usr/lib/syslinux/mbr/mbr.bin"), Path("/usr/lib/SYSLINUX/mbr.bin"))


def mbr_bin() -> Path:
    for path in MBR_BIN_PATHS:
        if path.is_file():
            return path
    raise GuestImageError("syslinux's mbr.bin is missing: install syslinux-common (scripts/apt-packages.txt)")


def make_raw(raw: Path, disk_bytes: int) -> None:
    """A sparse file of ``disk_bytes`` with the partition table."""
    with open(raw, "wb") as f:
        f.truncate(disk_bytes)
    run(["sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", str(raw)], input_text=sfdisk_script())


def _attach(raw: Path, disk_bytes: int) -> str:
    proc = run(["losetup", "--find", "--show", "--offset", str(partition_offset()),
                "--sizelimit", str(partition_bytes(disk_bytes)), str(raw)])
    dev = proc.stdout.strip()
    if not dev.startswith("/dev/loop"):
        raise GuestImageError(f"losetup gave no loop device for {raw}: {proc.stdout!r}")
    return dev


def fill(raw: Path, disk_bytes: int, tree: Path, uuid: str, boot: tuple[str, str, str], mnt: Path,
         progress: Progress = None) -> None:
    """Make the root file system from ``tree`` and install the boot loader.

    ``boot``: (kernel path, initrd path, kernel command line) as seen from the guest's root."""
    dev = _attach(raw, disk_bytes)
    try:
        say(progress, f"mkfs.ext4 on {dev} (offset {partition_offset()}) from the root tree")
        run(mkfs_args(dev, uuid, str(tree)))
        mnt.mkdir(exist_ok=True)
        run(["mount", "-t", "ext4", dev, str(mnt)])
        try:
            conf_dir = mnt / "boot/extlinux"
            conf_dir.mkdir(parents=True, exist_ok=True)
            (conf_dir / "extlinux.conf").write_text(extlinux_conf(*boot))
            say(progress, "extlinux --install /boot/extlinux")
            run(["extlinux", "--install", str(conf_dir)])
        finally:
            run(["umount", str(mnt)])
    finally:
        run(["losetup", "--detach", dev], check=False)
    code = mbr_bin().read_bytes()[:MBR_BOOT_CODE_BYTES]
    with open(raw, "r+b") as f:
        f.write(code)


def to_qcow2(raw: Path, qcow2: Path, progress: Progress = None) -> None:
    say(progress, "qemu-img convert -c -O qcow2")
    run(["qemu-img", "convert", "-c", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)])


def virtual_size(image: Path) -> tuple[str, int]:
    """(format, virtual size) as ``qemu-img info`` reads them."""
    import json

    proc = run(["qemu-img", "info", "--output=json", str(image)])
    info = json.loads(proc.stdout)
    return str(info["format"]), int(info["virtual-size"])
