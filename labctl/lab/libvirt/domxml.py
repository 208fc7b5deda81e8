"""Render a lab plan to libvirt domain XML with ElementTree (no string formatting of XML).

Pure: everything about the lab comes from its :class:`~labctl.lab.plan.LabPlan` (sizes, NICs with their
MACs, sockets and taps, pins), everything about the host from a :class:`RenderContext`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

from labctl import platform
from labctl.lab.plan import LabPlan, NicPlan

METADATA_NS = "urn:labctl:profile:1"
#: libvirt's QEMU namespace (formatdomain.html "QEMU command-line passthrough" / qemu:override, libvirt >= 8.2)
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
AGENT_CHANNEL = "org.qemu.guest_agent.0"  # the port qemu-guest-agent opens (QEMU guest agent documentation)


@dataclass(frozen=True)
class RenderContext:
    """Everything about the host that the XML depends on, so rendering itself is pure."""

    domain_type: str = "qemu"  # kvm | qemu (TCG) | test (libvirt's test driver)
    kernel: str = "/var/cache/labctl/appliance/vmlinuz"
    initrd: str = "/var/cache/labctl/appliance/initrd.img"
    cmdline: str = "console=ttyS0 labctl.mode=verify"
    extra_cmdline: tuple[str, ...] = field(default_factory=tuple)
    control_channel: str | None = None  # a virtio-serial port of this name, its socket made by libvirt
    vhost_net: bool = False  # tap/network NICs on the kernel's vhost-net worker (the host has /dev/vhost-net)
    emulator: str | None = None  # a build's QEMU (<emulator>, resolved); None: libvirt's default emulator
    # a user's image and its backing files as ``qemu-img info --backing-chain`` sees them, (path, format)
    # nearest first: declared under the overlay so libvirt neither probes nor relabels (chowns) them
    image_chain: tuple[tuple[str, str], ...] = ()


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, {k.rstrip("_"): v for k, v in attrs.items()})
    if text is not None:
        element.text = text
    return element


def _interface(devices: ET.Element, nic: NicPlan, vhost_net: bool = False, qemu_server: bool = False) -> None:
    if nic.backend == "vhostuser":
        iface = _sub(devices, "interface", type="vhostuser")
        # QEMU connects to the testpmd vswitch's servers; OVS's dpdkvhostuserclient ports connect to QEMU's
        _sub(iface, "source", type="unix", path=str(nic.socket), mode="server" if qemu_server else "client")
    elif nic.backend == "tap":
        iface = _sub(devices, "interface", type="ethernet")
        _sub(iface, "target", dev=nic.tap, managed="yes")
    else:
        iface = _sub(devices, "interface", type="network")
        _sub(iface, "source", network="default")
    _sub(iface, "mac", address=nic.mac)
    _sub(iface, "model", type=nic.model)
    if nic.model == "virtio":  # queues and ring sizes are virtio-net's; e1000/e1000e have neither
        driver_attrs = {"queues": str(nic.queues), "rx_queue_size": str(nic.rx_ring),
                        "tx_queue_size": str(nic.tx_ring)}
        if nic.backend != "vhostuser":
            # QEMU's userspace virtio backend, unless asked for vhost-net (no /dev/vhost-net on these hosts)
            driver_attrs = {"name": "vhost" if vhost_net else "qemu", **driver_attrs}
        _sub(iface, "driver", **driver_attrs)
    _sub(iface, "alias", name=f"ua-labctl-nic{nic.index}")


def interface_xml(plan: LabPlan, nic: NicPlan, ctx: RenderContext) -> ET.Element:
    """One NIC's ``<interface>`` as :func:`render` writes it into the domain (a hot-swap attaches it alone)."""
    holder = ET.Element("devices")
    _interface(holder, nic, ctx.vhost_net, qemu_server=plan.vswitch.kind == "ovs-dpdk")
    return holder[0]


def cmdline_for(plan: LabPlan, ctx: RenderContext) -> str:
    parts = [ctx.cmdline, *ctx.extra_cmdline]
    if ctx.domain_type == "qemu" and plan.needs_shared_memory and platform.TCG_VHOSTUSER_CMDLINE not in parts:
        parts.append(platform.TCG_VHOSTUSER_CMDLINE)  # TCG only, never on KVM (see labctl.platform)
    return " ".join(p for p in parts if p)


def image_cmdline(plan: LabPlan, ctx: RenderContext) -> str:
    """An image guest's direct-kernel-boot command line: the user's, plus the TCG vhost-user workaround."""
    assert plan.image is not None
    return cmdline_for(plan, replace(ctx, cmdline=plan.image.cmdline, extra_cmdline=()))


def _image_os(os_el: ET.Element, plan: LabPlan, ctx: RenderContext) -> None:
    image = plan.image
    assert image is not None
    if image.kernel:
        _sub(os_el, "kernel", image.kernel)
        if image.initrd:
            _sub(os_el, "initrd", image.initrd)
        _sub(os_el, "cmdline", image_cmdline(plan, ctx))
    else:
        _sub(os_el, "boot", dev="hd")  # the image's own boot loader (SeaBIOS reads its first disk)


def _backing_chain(disk: ET.Element, chain: tuple[tuple[str, str], ...]) -> None:
    """The user's image (and its own backing files) under the overlay, each with ``<seclabel model='dac'
    relabel='no'/>``: left to discover the chain itself, libvirt's DAC driver chowns the backing image to
    QEMU's user and leaves it so (libvirt's "Disks" documentation, ``backingStore`` and ``seclabel``);
    the user's file is read by QEMU through its group and world read bits, never re-owned. The empty
    ``<backingStore/>`` ends the chain."""
    parent = disk
    for path, fmt in chain:
        store = _sub(parent, "backingStore", type="file")
        _sub(store, "format", type=fmt)
        source = _sub(store, "source", file=path)
        _sub(source, "seclabel", model="dac", relabel="no")
        parent = store
    _sub(parent, "backingStore")


def _image_devices(devices: ET.Element, plan: LabPlan, chain: tuple[tuple[str, str], ...] = ()) -> None:
    """The overlay as a virtio disk (its backing chain declared, when known) and the guest agent's
    virtio-serial channel (libvirt picks its socket)."""
    assert plan.image is not None
    disk = _sub(devices, "disk", type="file", device="disk")
    _sub(disk, "driver", name="qemu", type="qcow2", discard="unmap")
    _sub(disk, "source", file=str(plan.image.overlay(plan.dirs)))
    if chain:
        _backing_chain(disk, chain)
    _sub(disk, "target", dev="vda", bus="virtio")
    channel = _sub(devices, "channel", type="unix")
    _sub(channel, "source", mode="bind")
    _sub(channel, "target", type="virtio", name=AGENT_CHANNEL)


def _no_msix(domain: ET.Element, plan: LabPlan) -> None:
    """TCG + vhost-user without a kernel command line of labctl's (the image's own boot loader): QEMU 7.2
    crashes with vhost-user and MSI-X under TCG, and ``pci=nomsi`` cannot be given, so each virtio NIC gets
    ``vectors=0`` (no MSI-X table) through libvirt's qemu:override of the device's frontend properties."""
    override = ET.SubElement(domain, f"{{{QEMU_NS}}}override")
    for nic in plan.vhostuser_nics:
        device = ET.SubElement(override, f"{{{QEMU_NS}}}device", {"alias": f"ua-labctl-nic{nic.index}"})
        frontend = ET.SubElement(device, f"{{{QEMU_NS}}}frontend")
        ET.SubElement(frontend, f"{{{QEMU_NS}}}property", {"name": "vectors", "type": "unsigned", "value": "0"})


def render(plan: LabPlan, ctx: RenderContext | None = None) -> str:
    ctx = ctx or RenderContext()
    ET.register_namespace("labctl", METADATA_NS)
    ET.register_namespace("qemu", QEMU_NS)
    domain = ET.Element("domain", {"type": ctx.domain_type})
    _sub(domain, "name", plan.domain_name)
    metadata = _sub(domain, "metadata")
    ET.SubElement(metadata, f"{{{METADATA_NS}}}profile", {"name": plan.name, "backend": plan.lab})
    _sub(domain, "memory", str(plan.memory_mib), unit="MiB")
    _sub(domain, "vcpu", str(plan.vcpus), placement="static")

    shared = plan.needs_shared_memory
    if plan.hugepages or shared:
        backing = _sub(domain, "memoryBacking")
        if plan.hugepages:
            pages = _sub(backing, "hugepages")
            _sub(pages, "page", size="2048", unit="KiB")
        else:
            _sub(backing, "source", type="memfd")
        if shared:
            _sub(backing, "access", mode="shared")

    pin = plan.pins
    if pin.vcpus or pin.emulator:
        cputune = _sub(domain, "cputune")
        for vcpu in sorted(pin.vcpus):
            _sub(cputune, "vcpupin", vcpu=str(vcpu), cpuset=pin.vcpus[vcpu])
        if pin.emulator:
            _sub(cputune, "emulatorpin", cpuset=pin.emulator)

    os_el = _sub(domain, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="pc")
    if plan.image is not None:
        _image_os(os_el, plan, ctx)
    else:
        _sub(os_el, "kernel", ctx.kernel)
        _sub(os_el, "initrd", ctx.initrd)
        _sub(os_el, "cmdline", cmdline_for(plan, ctx))
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
    if ctx.emulator is not None:
        _sub(devices, "emulator", ctx.emulator)  # libvirt formatdomain.html#devices: the first device
    if plan.image is not None:
        _image_devices(devices, plan, ctx.image_chain)
    for nic in plan.nics:
        _interface(devices, nic, ctx.vhost_net, qemu_server=plan.vswitch.kind == "ovs-dpdk")
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=str(plan.dirs.serial_log))
    _sub(serial, "target", port="0")
    if ctx.control_channel:
        channel = _sub(devices, "channel", type="unix")
        _sub(channel, "source", mode="bind")  # libvirt picks the path (read back from the live XML)
        _sub(channel, "target", type="virtio", name=ctx.control_channel)
    _sub(devices, "memballoon", model="none")
    if plan.image is not None and not plan.image.kernel and ctx.domain_type == "qemu" and plan.needs_shared_memory:
        _no_msix(domain, plan)

    ET.indent(domain, space="  ")
    return ET.tostring(domain, encoding="unicode") + "\n"
