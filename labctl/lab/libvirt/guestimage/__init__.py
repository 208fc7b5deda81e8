"""A guest to start from: a small Debian 12 disk image that boots the way a user's image does.

``build_guest_image()`` makes it from Debian packages and caches it by a hash of its inputs
(``inputs``: suite, mirror, package list, masked units, ``files/``, this package's source):

* ``rootfs``: mmdebstrap's ``minbase`` with its own kernel and initramfs, systemd as init,
  qemu-guest-agent (on the virtio-serial port ``org.qemu.guest_agent.0``), Debian's DPDK (dpdk-testpmd,
  dpdk-devbind.py), ethtool, kmod, iproute2, pciutils; no root password (the agent is the access);
* ``disk`` and ``layout``: a raw disk, one MBR partition at 1 MiB with ext4, extlinux as the boot loader
  (serial console ttyS0, root by UUID), converted to a compressed qcow2;
* ``cache``: the entries (``guest-<key>/``: the qcow2, and its kernel, initrd and command line for
  direct kernel boot), the lock, the atomic publish, ``copy_image`` for ``labctl image guest --out``;
* ``tools``: host tools as argv lists, and releasing every mount and loop device of a build directory.
"""

from labctl.lab.libvirt.guestimage.cache import GuestImageInfo, build_guest_image, cached, default_cache_dir

__all__ = ["GuestImageInfo", "build_guest_image", "cached", "default_cache_dir"]
