"""The guest image (labctl image guest): build it (cached under /var/cache/labctl/images), boot an overlay
of it under libvirt (TCG) through its own boot loader, and reach its qemu-guest-agent: guest-ping, then
guest-exec of uname -r and dpkg-query. The image itself is never written (its sha256 is checked).

A cold build takes minutes (mmdebstrap downloads about 200 MB of Debian packages); later runs hit the cache.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labctl.digest import sha256_file
from labctl.lab.libvirt.guestimage import build_guest_image
from labctl.lab.libvirt.guestimage.tools import loops_under
from tests.integration.conftest import LIBVIRT_URI, needs_libvirtd

pytestmark = [pytest.mark.integration, needs_libvirtd]

AGENT_TIMEOUT = 240  # seconds from start to guest-ping answered (TCG, loaded host)
AGENT_CHANNEL = "org.qemu.guest_agent.0"


def domain_xml(name: str, overlay: Path, backing: Path, console: Path) -> str:
    """A minimal domain booting ``overlay`` with its own boot loader, serial console to a file, agent channel."""
    domain = ET.Element("domain", type="qemu")  # KVM is not usable here: TCG
    ET.SubElement(domain, "name").text = name
    ET.SubElement(domain, "memory", unit="MiB").text = "1024"
    ET.SubElement(domain, "vcpu").text = "2"
    os_el = ET.SubElement(domain, "os")
    ET.SubElement(os_el, "type", arch="x86_64", machine="pc").text = "hvm"
    ET.SubElement(os_el, "boot", dev="hd")
    ET.SubElement(ET.SubElement(domain, "features"), "acpi")
    ET.SubElement(domain, "cpu", mode="maximum", check="none")  # DPDK's build needs SSE4.2
    ET.SubElement(domain, "on_reboot").text = "destroy"
    devices = ET.SubElement(domain, "devices")
    ET.SubElement(devices, "emulator").text = shutil.which("qemu-system-x86_64") or "/usr/bin/qemu-system-x86_64"
    disk = ET.SubElement(devices, "disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk, "source", file=str(overlay))
    # the backing image is named here so that libvirt does not chown it to libvirt-qemu (it does, and leaves it so,
    # when it finds the chain itself): QEMU only reads it, and it is world-readable
    backing_store = ET.SubElement(disk, "backingStore", type="file")
    ET.SubElement(backing_store, "format", type="qcow2")
    source = ET.SubElement(backing_store, "source", file=str(backing))
    ET.SubElement(source, "seclabel", model="dac", relabel="no")
    ET.SubElement(backing_store, "backingStore")
    ET.SubElement(disk, "target", dev="vda", bus="virtio")
    serial = ET.SubElement(devices, "serial", type="file")
    ET.SubElement(serial, "source", path=str(console))
    ET.SubElement(serial, "target", port="0")
    channel = ET.SubElement(devices, "channel", type="unix")
    ET.SubElement(channel, "target", type="virtio", name=AGENT_CHANNEL)
    ET.SubElement(devices, "memballoon", model="none")
    return ET.tostring(domain, encoding="unicode")


def agent(dom, command: str, timeout: int = 10, **arguments) -> dict:
    import libvirt_qemu

    request = {"execute": command, **({"arguments": arguments} if arguments else {})}
    return json.loads(libvirt_qemu.qemuAgentCommand(dom, json.dumps(request), timeout, 0))["return"]


def wait_for_agent(dom, deadline: float) -> None:
    import libvirt

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # "agent is not connected" until it is: not printed
    last = ""
    while time.monotonic() < deadline:
        try:
            agent(dom, "guest-ping", timeout=5)
            return
        except libvirt.libvirtError as exc:
            last = str(exc)
        time.sleep(2)
    pytest.fail(f"qemu-guest-agent did not answer guest-ping within {AGENT_TIMEOUT} s: {last}")


def guest_exec(dom, path: str, *args: str, timeout: float = 120) -> tuple[int, str]:
    pid = agent(dom, "guest-exec", path=path, arg=list(args), **{"capture-output": True})["pid"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = agent(dom, "guest-exec-status", pid=pid)
        if status.get("exited"):
            out = base64.b64decode(status.get("out-data", "")).decode()
            return int(status.get("exitcode", -1)), out
        time.sleep(1)
    pytest.fail(f"{path} {' '.join(args)} did not exit in the guest within {timeout} s")


@pytest.fixture(scope="module")
def image():
    t0 = time.monotonic()
    info = build_guest_image(on_progress=lambda m: print(f"  {time.monotonic() - t0:6.1f} s {m}"))
    print(f"\nguest image {info.path} ({'built' if info.built else 'cached'} in {time.monotonic() - t0:.0f} s,"
          f" build {info.build_seconds:.0f} s): {info.size_bytes / 1e6:.0f} MB qcow2, virtual "
          f"{info.virtual_size >> 20} MiB, kernel {info.kernel_release}, dpdk {info.dpdk_version}")
    return info


def test_image_is_a_qcow2_with_its_kernel_beside_it(image):
    proc = subprocess.run(["qemu-img", "info", "--output=json", str(image.path)], capture_output=True, text=True,
                          check=True)
    info = json.loads(proc.stdout)
    assert info["format"] == "qcow2" and info["virtual-size"] == image.virtual_size and "backing-filename" not in info
    assert image.kernel.stat().st_size > 0 and image.initrd.stat().st_size > 0
    assert "root=UUID=" in image.cmdline and "console=ttyS0" in image.cmdline
    assert image.kernel_package.startswith("linux-image-") and image.dpdk_version.startswith("22.11")
    again = build_guest_image()
    assert not again.built and again.path == image.path  # the cache, not a rebuild


def test_boots_with_its_own_boot_loader_and_the_agent_answers(image, no_leftovers):
    import libvirt

    before = sha256_file(image.path)
    assert before == image.sha256
    work = Path("/run/labctl-test") / f"guestimage-{os.getpid()}"  # QEMU (libvirt-qemu) reaches it
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    name = f"labctl-it-guestimage-{os.getpid()}"
    overlay, console = work / "overlay.qcow2", work / "console.log"
    conn = libvirt.open(LIBVIRT_URI)
    dom = None
    try:
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image.path), "-F", "qcow2",
                        str(overlay)], check=True)
        t0 = time.monotonic()
        dom = conn.createXML(domain_xml(name, overlay, image.path, console), 0)  # transient: gone once destroyed
        live = ET.fromstring(dom.XMLDesc(0)).find("devices/disk/backingStore/source")
        assert live is not None and live.get("file") == str(image.path)
        # libvirt keeps the chain as declared: the image is not chowned to libvirt-qemu (its owner is not asserted:
        # another lab on this host booting the same image without this may have changed it)
        assert live.find("seclabel").get("relabel") == "no"
        wait_for_agent(dom, t0 + AGENT_TIMEOUT)
        print(f"\nboot to guest-ping: {time.monotonic() - t0:.0f} s (TCG, loaded host)")
        code, release = guest_exec(dom, "/usr/bin/uname", "-r")
        assert code == 0 and release.strip() == image.kernel_release
        code, versions = guest_exec(dom, "/usr/bin/dpkg-query", "-W", "-f=${Package} ${Version}\n", "dpdk",
                                    image.kernel_package)
        assert code == 0 and f"dpdk {image.dpdk_version}" in versions
        assert f"{image.kernel_package} {image.kernel_package_version}" in versions
        assert guest_exec(dom, "/usr/bin/test", "-x", "/usr/bin/dpdk-testpmd")[0] == 0
        code, modules = guest_exec(dom, "/usr/sbin/modinfo", "-n", "vfio-pci", "uio_pci_generic")
        assert code == 0 and "vfio-pci.ko" in modules and "uio_pci_generic.ko" in modules
        assert "Linux version" in console.read_text(errors="replace")  # the serial console reaches the log
    finally:
        if dom is not None:
            try:
                dom.destroy()
            except libvirt.libvirtError:
                pass
        shutil.rmtree(work, ignore_errors=True)
        conn.close()
    assert name not in [d.name() for d in libvirt.open(LIBVIRT_URI).listAllDomains()]
    assert sha256_file(image.path) == before  # the image is never written
    assert loops_under(image.entry) == []


def test_an_interrupted_disk_step_and_a_killed_builds_leftovers_release_every_loop_and_mount(tmp_path, monkeypatch,
                                                                                             no_leftovers):
    """The disk step on a small disk with real loop devices: SIGINT (KeyboardInterrupt) while the file system is
    mounted leaves no mount and no loop; and what a kill -9 would leave (a loop device and a mount under a build
    directory) is freed by ``release``, as the next build does for a killed one."""
    from labctl.lab.libvirt.guestimage import disk, layout
    from labctl.lab.libvirt.guestimage.tools import mounts_under, release, run

    work = tmp_path / ".build-guest-test"
    (work / "tree/boot").mkdir(parents=True)
    (work / "tree/boot/vmlinuz").write_bytes(b"k")
    size = 64 << 20
    raw = work / "disk.raw"
    disk.make_raw(raw, size)
    real_run = disk.run

    def interrupted(args, **kw):
        if args[0] == "extlinux":
            assert mounts_under(work) != [] and loops_under(work) != []  # the state SIGINT finds
            raise KeyboardInterrupt
        return real_run(args, **kw)

    monkeypatch.setattr(disk, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        disk.fill(raw, size, work / "tree", "0b7f1d64-51f6-4c55-a6b4-a1b2c3d4e5f6", ("/boot/vmlinuz", "/boot/i", "c"),
                  work / "mnt")
    assert mounts_under(work) == [] and loops_under(work) == []

    # what kill -9 leaves: an attached loop and a mount under the build directory
    dev = run(["losetup", "--find", "--show", "--offset", str(layout.partition_offset()), str(raw)]).stdout.strip()
    run(["mount", "-t", "ext4", dev, str(work / "mnt")])
    assert mounts_under(work) and loops_under(work) == [dev]
    released = release(work)
    assert dev in released and not work.exists()
    assert mounts_under(tmp_path) == [] and loops_under(tmp_path) == []
