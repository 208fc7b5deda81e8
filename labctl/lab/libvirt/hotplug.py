"""A running domain's NICs swapped in place: the old ones unplugged, new ones with other settings plugged in.

    detach: each NIC's live ``<interface>`` handed to ``virDomainDetachDeviceFlags`` with
            ``VIR_DOMAIN_AFFECT_LIVE``. That is a request to the guest (ACPI PCI hot-unplug on labctl's ``pc``
            machine): libvirt answers at once, and the device is gone only when the guest's OS ejected it,
            which libvirt announces with ``VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED`` (libvirt's API documentation
            of virDomainDetachDeviceFlags: "detaching a device from a running domain may be asynchronous
            ... add a handler for the VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED event"). Every NIC's event is waited
            for, within :data:`DETACH_TIMEOUT_S` (a guest that never answers, or answers with
            ``VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED``, is a :class:`~labctl.errors.SwapError`: the caller
            boots instead). The live XML is read meanwhile too, so a missed event costs a second, not the bound.
    between: what the caller changes while no NIC is plugged (the host side restarted with another queue count:
            a vhost-user NIC's socket must be served when it is attached, libvirt's "vhostuser" interface docs)
    attach: each NIC of the new plan rendered as the domain XML renders it (:func:`domxml.interface_xml`: its
            ``<model>``, its ``<driver>`` queues and rings, the same MAC and alias) with the old device's PCI
            ``<address>``, so the guest finds it in the same slot and the DPDK port order (PCI order) is kept,
            through ``virDomainAttachDeviceFlags`` with ``VIR_DOMAIN_AFFECT_LIVE``.

The guest then sees the new devices (ACPI hot-plug; the kernel's acpiphp probes the slot) and the caller
re-reads what they negotiated (the appliance's REPROBE, the agent in a user's image). Facts probed on
libvirt 9.0 and QEMU 7.2: hot-plug works on the ``pc`` (i440fx) machine with ``<features><acpi/>`` (without
ACPI QEMU refuses: "Bus 'pci.0' does not support hotplugging"); on q35 each device needs a free
pcie-root-port (labctl renders ``pc``).

The events come on :func:`hypervisor.event_connection` (libvirt's default event loop in a daemon thread, and a
connection opened after it was registered: one opened before delivers no events).
"""

from __future__ import annotations

import copy
import threading
import time
import xml.etree.ElementTree as ET
from typing import Any, Callable

from labctl import signals
from labctl.errors import HypervisorError, SwapError
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.domxml import RenderContext, interface_xml
from labctl.lab.plan import LabPlan

#: How long a guest has to eject a NIC it was asked to release (a TCG guest here takes about a second per NIC;
#: a guest that has not answered in this time will not: it ignores ACPI, or it is hung).
DETACH_TIMEOUT_S = 30.0
XML_POLL_S = 1.0  # the live XML read while waiting for the events

def live_interfaces(dom: Any) -> list[ET.Element]:
    """The running domain's ``<interface>`` elements (its live XML)."""
    return hypervisor.live_xml(dom).findall("devices/interface")


def mac_of(interface: ET.Element) -> str:
    mac = interface.find("mac")
    return (mac.get("address", "") if mac is not None else "").lower()


def alias_of(interface: ET.Element) -> str:
    alias = interface.find("alias")
    return alias.get("name", "") if alias is not None else ""


class RemovalWatch:
    """``VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED`` (and ``..._REMOVAL_FAILED``) of one domain, collected while open.
    Without events (a driver that sends none, such as the test driver's separate connections) the live XML
    alone answers."""

    def __init__(self, uri: str, dom: Any):
        self.uri = uri
        self.dom = dom
        self.removed: set[str] = set()
        self.failed: set[str] = set()
        self._lock = threading.Lock()
        self._conn: Any = None
        self._ids: list[int] = []

    def __enter__(self) -> "RemovalWatch":
        libvirt = hypervisor.libvirt
        try:
            conn = hypervisor.event_connection(self.uri)
            watched = conn.lookupByUUIDString(self.dom.UUIDString())
            self._ids = [conn.domainEventRegisterAny(watched, libvirt.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
                                                     self._removed, None),
                         conn.domainEventRegisterAny(watched, libvirt.VIR_DOMAIN_EVENT_ID_DEVICE_REMOVAL_FAILED,
                                                     self._failed, None)]
            self._conn = conn
        except (libvirt.libvirtError, HypervisorError):
            self._conn, self._ids = None, []  # the live XML answers alone
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            for callback in self._ids:
                try:
                    self._conn.domainEventDeregisterAny(callback)
                except hypervisor.libvirt.libvirtError:
                    pass
        self._conn, self._ids = None, []

    def _removed(self, _conn: Any, _dom: Any, alias: str, _opaque: Any) -> None:
        with self._lock:
            self.removed.add(alias)

    def _failed(self, _conn: Any, _dom: Any, alias: str, _opaque: Any) -> None:
        with self._lock:
            self.failed.add(alias)

    @property
    def events(self) -> bool:
        return self._conn is not None

    def wait(self, aliases: set[str], macs: set[str], timeout_s: float, what: str) -> float:
        """Until every alias was removed (the event, or gone from the live XML); the seconds it took.
        SwapError when the guest refused (REMOVAL_FAILED) or did not answer within ``timeout_s``."""
        t0 = time.monotonic()
        next_poll = t0 + XML_POLL_S
        while True:
            with self._lock:
                removed, failed = set(self.removed), set(self.failed)
            if failed & aliases:
                raise SwapError(f"{what}: the guest refused to release {', '.join(sorted(failed & aliases))} "
                                "(libvirt's device-removal-failed event)")
            if aliases <= removed:
                return time.monotonic() - t0
            now = time.monotonic()
            if now >= next_poll or not self.events:
                left = {mac_of(i) for i in live_interfaces(self.dom)} & macs
                if not left:
                    return time.monotonic() - t0
                next_poll = now + XML_POLL_S
            if now - t0 > timeout_s:
                pending = sorted(aliases - removed)
                raise SwapError(f"{what}: the guest did not release {', '.join(pending)} within {timeout_s:.0f} s "
                                "(no ACPI eject: the guest's OS ignores PCI hot-unplug, or it hangs)")
            signals.sleep(0.05)


def _call(action: Callable[..., Any], xml: str, what: str) -> None:
    libvirt = hypervisor.libvirt
    try:
        with hypervisor.signals_pass():
            action(xml, libvirt.VIR_DOMAIN_AFFECT_LIVE)
    except libvirt.libvirtError as exc:
        raise SwapError(f"{what}: {hypervisor.message_of(exc)}") from None


def unplug(uri: str, dom: Any, plan: LabPlan, timeout_s: float | None = None) -> list[ET.Element]:
    """Every NIC of ``plan`` detached from the running ``dom``, waited for until the guest released them all;
    their live ``<interface>`` elements (the PCI addresses :func:`plug` keeps), in the plan's order. SwapError:
    the domain lacks one of them, QEMU refused, or the guest did not release them within ``timeout_s``."""
    name = plan.domain_name
    live = {mac_of(i): i for i in live_interfaces(dom)}
    missing = [f"nic{n.index} ({n.mac})" for n in plan.nics if n.mac not in live]
    if missing:
        raise SwapError(f"{name}: the running domain has no interface for {', '.join(missing)}")
    olds = [live[n.mac] for n in plan.nics]
    detach(uri, dom, olds, [f"nic{n.index}" for n in plan.nics], name, timeout_s)
    return olds


def detach(uri: str, dom: Any, interfaces: list[ET.Element], labels: list[str], name: str,
           timeout_s: float | None = None) -> float:
    """The live ``interfaces`` detached from ``dom`` and waited for (:class:`RemovalWatch`, at most ``timeout_s``,
    :data:`DETACH_TIMEOUT_S` by default); the seconds it took."""
    timeout_s = DETACH_TIMEOUT_S if timeout_s is None else timeout_s
    with RemovalWatch(uri, dom) as watch:
        for label, interface in zip(labels, interfaces):
            _call(dom.detachDeviceFlags, ET.tostring(interface, encoding="unicode"), f"{name}: detaching {label}")
        return watch.wait({alias_of(i) for i in interfaces}, {mac_of(i) for i in interfaces}, timeout_s, name)


def attach(dom: Any, interface: ET.Element, previous: ET.Element, what: str) -> None:
    """``interface`` attached to the running ``dom`` at the PCI address of ``previous`` (the device it replaces)."""
    interface = copy.deepcopy(interface)
    for old in interface.findall("address"):
        interface.remove(old)
    address = previous.find("address")
    if address is not None:
        interface.append(copy.deepcopy(address))
    _call(dom.attachDeviceFlags, ET.tostring(interface, encoding="unicode"), what)


def plug(dom: Any, plan: LabPlan, olds: list[ET.Element], ctx: RenderContext) -> None:
    """Every NIC of ``plan`` attached to the running ``dom`` as the domain XML renders it, each at the PCI address
    of the device it replaces (``olds``, in the plan's order). SwapError: QEMU refused one."""
    for nic, previous in zip(plan.nics, olds):
        attach(dom, interface_xml(plan, nic, ctx), previous, f"{plan.domain_name}: attaching nic{nic.index}")


def swap_nics(uri: str, dom: Any, old: LabPlan, new: LabPlan, ctx: RenderContext,
              between: Callable[[], None] | None = None, timeout_s: float | None = None) -> dict[str, float]:
    """Every NIC of ``old`` unplugged from the running ``dom`` (:func:`unplug`), ``between`` run, every NIC of ``new``
    plugged in its place (:func:`plug`: same MAC, alias and PCI address; its ``<driver>`` from ``new``). Returns the
    seconds of each step (``detach_s``, ``between_s``, ``attach_s``)."""
    check_same_nics(old, new)
    t0 = time.monotonic()
    olds = unplug(uri, dom, old, timeout_s)
    t1 = time.monotonic()
    if between is not None:
        between()
    t2 = time.monotonic()
    plug(dom, new, olds, ctx)
    return {"detach_s": t1 - t0, "between_s": t2 - t1, "attach_s": time.monotonic() - t2}


def check_same_nics(old: LabPlan, new: LabPlan) -> None:
    """A swap keeps the NICs (their count, MACs and backends): only their settings change."""
    if [(n.mac, n.backend) for n in old.nics] != [(n.mac, n.backend) for n in new.nics]:
        raise SwapError(f"{old.domain_name}: the NICs' count, MACs or backends differ between the two plans "
                        "(a swap changes a NIC's settings only)")
