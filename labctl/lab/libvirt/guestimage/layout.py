"""The guest disk's layout as text and numbers (pure: no device is touched here).

One MBR partition, bootable, from 1 MiB to the end of the disk, holding an ext4 root file system that
extlinux (syslinux 6.04) boots: the ext4 features syslinux 6.04 cannot read are turned off (``64bit``,
``metadata_csum_seed``; the syslinux wiki's "Filesystem" page lists what its ext2/3/4 driver reads).
The kernel command line names the root by file-system UUID (the disk's bus is the user's choice, so
``/dev/vda1`` is not assumed), sends the console to the first serial port (libvirt's console log) and
keeps the classic ``ethN`` names. The UUID comes from the cache key (:func:`root_uuid`), so a rebuild of
the same inputs names its root as the last one did, and a profile whose ``boot.cmdline`` copied it keeps
booting (with a random UUID, a rebuilt cache left such a profile at "UUID=... does not exist" in the
initramfs, and ``labctl up`` waiting out its agent bound).
"""

from __future__ import annotations

import uuid as uuidlib

from labctl.lab.libvirt.guestimage.inputs import PARTITION_START_SECTOR, SECTOR

MBR_BOOT_CODE_BYTES = 440  # syslinux's mbr.bin: the boot code before the disk signature and the table
#: mke2fs -O: features syslinux 6.04's ext4 reader does not handle
EXT4_FEATURES_OFF = ("^64bit", "^metadata_csum_seed")
ROOT_LABEL = "labctl-root"
KERNEL_NAME = "vmlinuz"
INITRD_NAME = "initrd.img"


def partition_offset() -> int:
    """Byte offset of the root partition in the disk image."""
    return PARTITION_START_SECTOR * SECTOR


def partition_bytes(disk_bytes: int) -> int:
    """Size of the root partition: the rest of the disk after the 1 MiB gap."""
    if disk_bytes <= partition_offset() or disk_bytes % SECTOR:
        raise ValueError(f"disk size {disk_bytes} must be a multiple of {SECTOR} above {partition_offset()}")
    return disk_bytes - partition_offset()


def sfdisk_script() -> str:
    """sfdisk's input: a DOS label, one bootable Linux partition at 1 MiB filling the disk."""
    return f"label: dos\nstart={PARTITION_START_SECTOR}, type=83, bootable\n"


def mkfs_args(device: str, uuid: str, source_dir: str) -> list[str]:
    """mke2fs populating the file system from ``source_dir`` (``-d``) with the given UUID."""
    return ["mkfs.ext4", "-q", "-F", "-L", ROOT_LABEL, "-U", uuid, "-O", ",".join(EXT4_FEATURES_OFF),
            "-d", source_dir, device]


#: the namespace of the root file systems' UUIDs (uuid5 of the cache key)
ROOT_UUID_NAMESPACE = uuidlib.UUID("8b1e6f0c-4d1a-5c3e-9a57-6c61625f726f")


def root_uuid(key: str) -> str:
    """The root file system's UUID for the image of cache key ``key``: the same key, the same UUID."""
    return str(uuidlib.uuid5(ROOT_UUID_NAMESPACE, key))


def kernel_cmdline(uuid: str) -> str:
    """The guest kernel's command line: root by UUID, console on ttyS0, ethN names."""
    return f"root=UUID={uuid} ro console=ttyS0,115200 net.ifnames=0 biosdevname=0"


def fstab_text(uuid: str) -> str:
    return f"# written by labctl image guest\nUUID={uuid} / ext4 errors=remount-ro 0 1\n"


def extlinux_conf(kernel: str, initrd: str, cmdline: str) -> str:
    """extlinux.conf booting ``kernel`` (paths relative to the root of the file system) at once."""
    return ("# written by labctl image guest\n"
            "SERIAL 0 115200\n"
            "DEFAULT linux\n"
            "TIMEOUT 0\n"
            "PROMPT 0\n"
            "LABEL linux\n"
            f"  LINUX /{kernel.lstrip('/')}\n"
            f"  INITRD /{initrd.lstrip('/')}\n"
            f"  APPEND {cmdline}\n")
