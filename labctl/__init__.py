"""labctl: QEMU/KVM lab automation and virtio-net tuning advisor."""

__version__ = "0.1.0"
