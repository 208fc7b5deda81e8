"""Render a lab profile to libvirt domain XML with ElementTree (no string formatting of XML)."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from labctl import platform
from labctl.profile.schema import Nic, Profile

METADATA_NS = "urn:labctl:profile:1"
RUN_DIR = Path("/run/labctl")
LOG_DIR = Path("/var/log/labctl")


@dataclass(frozen=True)
class RenderContext:
    """Everything about the host that the XML depends on, so rendering itself is pure."""

    domain_type: str = "qemu"  # kvm | qemu (TCG) | test (libvirt's test driver)
    kernel: str = "/var/cache/labctl/appliance/vmlinuz"
    initrd: str = "/var/cache/labctl/appliance/initrd.img"
    cmdline: str = "console=ttyS0 labctl.mode=verify"
    run_dir: Path = RUN_DIR
    log_dir: Path = LOG_DIR
    extra_cmdline: tuple[str, ...] = field(default_factory=tuple)


def socket_path(profile: Profile, nic_index: int, run_dir: Path = RUN_DIR) -> Path:
    return run_dir / profile.name / f"vhost-{nic_index}.sock"


def tap_name(profile: Profile, nic_index: int) -> str:
    """A tap device name under the kernel's 15-character limit, stable per profile and NIC."""
    digest = hashlib.sha1(profile.name.encode()).hexdigest()[:8]
    return f"lct{digest}n{nic_index}"


def serial_log(profile: Profile, log_dir: Path = LOG_DIR) -> Path:
    return log_dir / profile.name / "serial.log"


def needs_shared_memory(profile: Profile) -> bool:
    return any(nic.backend == "vhostuser" for nic in profile.guest.nics)


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, {k.rstrip("_"): v for k, v in attrs.items()})
    if text is not None:
        element.text = text
    return element


def _interface(devices: ET.Element, profile: Profile, index: int, nic: Nic, ctx: RenderContext) -> None:
    from labctl.lab.libvirt.negotiation import nic_mac

    if nic.backend == "vhostuser":
        iface = _sub(devices, "interface", type="vhostuser")
        _sub(iface, "source", type="unix", path=str(socket_path(profile, index, ctx.run_dir)), mode="client")
    elif nic.backend == "tap":
        iface = _sub(devices, "interface", type="ethernet")
        _sub(iface, "target", dev=tap_name(profile, index), managed="yes")
    else:
        iface = _sub(devices, "interface", type="network")
        _sub(iface, "source", network="default")
    _sub(iface, "mac", address=nic_mac(profile, index))
    _sub(iface, "model", type="virtio")
    driver_attrs = {"queues": str(nic.queues), "rx_queue_size": str(nic.rx_queue_size),
                    "tx_queue_size": str(nic.tx_queue_size)}
    if nic.backend != "vhostuser":
        # no /dev/vhost-net on these hosts: QEMU's userspace virtio backend
        driver_attrs = {"name": "qemu", **driver_attrs}
    _sub(iface, "driver", **driver_attrs)
    _sub(iface, "alias", name=f"ua-labctl-nic{index}")


def cmdline_for(profile: Profile, ctx: RenderContext) -> str:
    parts = [ctx.cmdline, *ctx.extra_cmdline]
    if ctx.domain_type == "qemu" and needs_shared_memory(profile) and platform.TCG_VHOSTUSER_CMDLINE not in parts:
        parts.append(platform.TCG_VHOSTUSER_CMDLINE)  # TCG only, never on KVM (see labctl.platform)
    return " ".join(p for p in parts if p)


def render(profile: Profile, ctx: RenderContext | None = None) -> str:
    ctx = ctx or RenderContext()
    guest = profile.guest
    ET.register_namespace("labctl", METADATA_NS)
    domain = ET.Element("domain", {"type": ctx.domain_type})
    _sub(domain, "name", profile.domain_name)
    metadata = _sub(domain, "metadata")
    ET.SubElement(metadata, f"{{{METADATA_NS}}}profile", {"name": profile.name, "backend": profile.backend})
    _sub(domain, "memory", str(guest.memory_mib), unit="MiB")
    _sub(domain, "vcpu", str(guest.vcpus), placement="static")

    shared = needs_shared_memory(profile)
    if guest.hugepages or shared:
        backing = _sub(domain, "memoryBacking")
        if guest.hugepages:
            pages = _sub(backing, "hugepages")
            _sub(pages, "page", size="2048", unit="KiB")
        else:
            _sub(backing, "source", type="memfd")
        if shared:
            _sub(backing, "access", mode="shared")

    pin = guest.pinning
    if pin.vcpus or pin.emulator:
        cputune = _sub(domain, "cputune")
        for vcpu in sorted(pin.vcpus):
            _sub(cputune, "vcpupin", vcpu=str(vcpu), cpuset=pin.vcpus[vcpu])
        if pin.emulator:
            _sub(cputune, "emulatorpin", cpuset=pin.emulator)

    os_el = _sub(domain, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="pc")
    _sub(os_el, "kernel", ctx.kernel)
    _sub(os_el, "initrd", ctx.initrd)
    _sub(os_el, "cmdline", cmdline_for(profile, ctx))
    features = _sub(domain, "features")
    _sub(features, "acpi")
    if ctx.domain_type == "kvm":
        _sub(domain, "cpu", mode="host-passthrough", check="none")
    elif ctx.domain_type == "qemu":
        # qemu64 lacks SSE4.2, which DPDK needs; 'maximum' gives sse4_2/avx2 under TCG
        _sub(domain, "cpu", mode="maximum", check="none")
    _sub(domain, "on_poweroff", "destroy")
    _sub(domain, "on_reboot", "destroy")
    _sub(domain, "on_crash", "destroy")

    devices = _sub(domain, "devices")
    for index, nic in enumerate(guest.nics):
        _interface(devices, profile, index, nic, ctx)
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=str(serial_log(profile, ctx.log_dir)))
    _sub(serial, "target", port="0")
    _sub(devices, "memballoon", model="none")

    ET.indent(domain, space="  ")
    return ET.tostring(domain, encoding="unicode") + "\n"
