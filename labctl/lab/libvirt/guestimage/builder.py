"""The build's steps, in a work directory: root tree, disk, boot loader, qcow2, and the kernel, initrd and
command line kept beside the image (for direct kernel boot). Returns the entry's metadata."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from labctl.digest import sha256_file
from labctl.lab.libvirt.guestimage import disk, rootfs
from labctl.lab.libvirt.guestimage.inputs import GuestInputs
from labctl.lab.libvirt.guestimage.layout import INITRD_NAME, KERNEL_NAME, kernel_cmdline, root_uuid
from labctl.lab.libvirt.guestimage.tools import Progress, say

IMAGE_NAME = "guest.qcow2"
CMDLINE_NAME = "cmdline"


def build_entry(inputs: GuestInputs, key: str, work: Path, entry: Path, progress: Progress = None) -> dict[str, Any]:
    """Make the image of ``inputs`` in ``entry`` (scratch space in ``work``); its metadata."""
    t0 = time.monotonic()
    tree = work / "root"
    rootfs.make_tree(inputs, tree, progress)
    fs_uuid = root_uuid(key)  # the same inputs, the same root UUID (a profile's boot.cmdline may name it)
    rootfs.customize(inputs, tree, fs_uuid)
    release, kernel, initrd = rootfs.boot_files(tree)
    versions = rootfs.package_versions(tree)
    cmdline = kernel_cmdline(fs_uuid)
    shutil.copyfile(kernel, entry / KERNEL_NAME)
    shutil.copyfile(initrd, entry / INITRD_NAME)
    (entry / CMDLINE_NAME).write_text(cmdline + "\n")

    raw = work / "disk.raw"
    disk.make_raw(raw, inputs.disk_bytes)
    boot = (f"/boot/{kernel.name}", f"/boot/{initrd.name}", cmdline)
    disk.fill(raw, inputs.disk_bytes, tree, fs_uuid, boot, work / "mnt", progress)
    shutil.rmtree(tree, ignore_errors=True)
    image = entry / IMAGE_NAME
    disk.to_qcow2(raw, image, progress)
    raw.unlink()
    fmt, vsize = disk.virtual_size(image)
    say(progress, f"sha256 of {IMAGE_NAME}")
    kpkg, kver = rootfs.kernel_package(versions, release)
    return {
        "key": key,
        "format": fmt,
        "virtual_size": vsize,
        "sha256": sha256_file(image),
        "kernel_release": release,
        "kernel_package": kpkg,
        "kernel_package_version": kver,
        "dpdk_version": versions.get("dpdk", ""),
        "qemu_guest_agent_version": versions.get("qemu-guest-agent", ""),
        "cmdline": cmdline,
        "root_uuid": fs_uuid,
        "inputs": {"suite": inputs.suite, "mirror": inputs.mirror, "packages": list(inputs.packages),
                   "masked_units": list(inputs.masked_units), "builder_version": inputs.builder_version},
        "packages": versions,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.monotonic() - t0, 1),
    }
