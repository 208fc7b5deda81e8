"""What the guest image is made from (``GuestInputs``) and its cache key (``compute_key``).

The key is a hash of the Debian suite and mirror, the package list, the units masked, the files shipped in
the image (``files/``), the disk size and the builder's own source (``BUILDER_SOURCES``), so a
change to any of them makes a new image and nothing else does. Debian's package versions are not part of
the key (mmdebstrap takes the mirror's newest); the versions an image was made with are recorded in its
cache entry.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
#: LABCTL_GUEST_IMAGE_MIRROR overrides the mirror (it is part of the key)
MIRROR_ENV = "LABCTL_GUEST_IMAGE_MIRROR"

#: Debian packages installed on top of mmdebstrap's ``minbase`` variant (recommends are not installed).
PACKAGES: tuple[str, ...] = (
    "linux-image-amd64",  # its own kernel; vfio-pci and uio_pci_generic are modules of it
    "initramfs-tools",  # its own initramfs (virtio_blk and ext4 load from it)
    "systemd-sysv",  # systemd as init
    "udev",  # starts qemu-guest-agent when the virtio-serial port appears
    "qemu-guest-agent",  # the access: guest-exec, guest-file-* over org.qemu.guest_agent.0
    "dpdk",  # dpdk-devbind.py, dpdk-hugepages.py
    "dpdk-dev",  # Debian's dpdk-testpmd is in dpdk-dev
    "ethtool",  # negotiated rings (-g) and channels (-l)
    "kmod",  # modprobe vfio-pci / uio_pci_generic
    "iproute2",
    "pciutils",  # lspci
)

#: Units that only slow a boot or write to the disk behind the user's back: masked (linked to /dev/null).
MASKED_UNITS: tuple[str, ...] = (
    "apt-daily.timer",  # apt's daily index refresh
    "apt-daily-upgrade.timer",  # unattended upgrades
    "dpkg-db-backup.timer",  # a daily copy of dpkg's database
    "e2scrub_all.timer",  # weekly ext4 metadata scrub
    "e2scrub_reap.service",  # runs at every boot
    "fstrim.timer",  # weekly discard
    "systemd-timesyncd.service",  # no network to sync from
    "getty@tty1.service",  # no graphics console (the serial one stays)
    "getty-static.service",  # gettys on tty2-6 (no logind here)
    "dpdk.service",  # Debian's dpdk-init (binds /etc/dpdk/interfaces): labctl binds and reserves itself; 17 s of boot
)

DISK_BYTES = 2 << 30  # the image's virtual size
PARTITION_START_SECTOR = 2048  # 1 MiB, the usual alignment
SECTOR = 512

FILES_DIR = Path(__file__).with_name("files")
#: the modules whose code decides what the image holds (cache.py and tools.py only run and publish a build)
BUILDER_SOURCES = ("inputs.py", "rootfs.py", "layout.py", "disk.py", "builder.py")
# Bump when the builder makes a different image from the same inputs for a reason its source does not show.
BUILDER_VERSION = "1"


def mirror() -> str:
    return os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR


def _tree_hash(root: Path, pattern: str) -> dict[str, str]:
    """relative path -> sha256 of every file under ``root`` matching ``pattern`` (sorted)."""
    found: dict[str, str] = {}
    if not root.is_dir():
        return found
    for path in sorted(root.rglob(pattern)):
        if path.is_file() and "__pycache__" not in path.parts:
            found[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@dataclass(frozen=True)
class GuestInputs:
    """Everything the guest image is made from; ``compute_key`` hashes it."""

    suite: str = SUITE
    mirror: str = DEFAULT_MIRROR
    packages: tuple[str, ...] = PACKAGES
    masked_units: tuple[str, ...] = MASKED_UNITS
    disk_bytes: int = DISK_BYTES
    files: dict[str, str] = field(default_factory=dict)  # files shipped in the image: name -> sha256
    builder: dict[str, str] = field(default_factory=dict)  # this package's source: name -> sha256
    builder_version: str = BUILDER_VERSION

    def canonical(self) -> str:
        data = asdict(self)
        data["packages"] = sorted(self.packages)
        data["masked_units"] = sorted(self.masked_units)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def gather_inputs() -> GuestInputs:
    """The inputs as they are now: this package's files and source, the mirror from the environment."""
    package_dir = Path(__file__).parent
    builder = {name: hashlib.sha256((package_dir / name).read_bytes()).hexdigest() for name in BUILDER_SOURCES}
    return GuestInputs(mirror=mirror(), files=_tree_hash(FILES_DIR, "*"), builder=builder)


def compute_key(inputs: GuestInputs) -> str:
    """The cache key: SHA-256 of the canonical form of the inputs."""
    return hashlib.sha256(inputs.canonical().encode()).hexdigest()
