"""Apply labctl's changes to a defined libvirt domain: keep its original, define the new XML, pin a
running domain live, restart on request, and undo.

The XML is edited by :func:`labctl.domain_edit.edit.apply_changes` (only the ``<driver>`` queue and ring
attributes, ``<cputune>`` pins and ``<memoryBacking>``); this module does what touches libvirt:

1. look the domain up (an unknown name or a transient domain: one line, exit 2, nothing done);
2. read its persistent XML (``VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE``: what ``defineXML``
   takes back without losing secrets such as a VNC password);
3. the hypervisor's CPUs (``virConnectGetCPUMap``): a cpuset naming a CPU the host lacks is refused;
4. keep the original (``originals.py``; the first one stays), then ``defineXML``;
5. a running domain: the new vCPU and emulator pins applied live (``virDomainPinVcpuFlags`` /
   ``virDomainPinEmulator`` with ``VIR_DOMAIN_AFFECT_LIVE``); with ``live=True`` each interface whose
   ``<driver>`` changed is swapped in place (:mod:`labctl.lab.libvirt.hotplug`: detached, the guest's
   release waited for through libvirt's device-removed event, attached again with the new settings at its
   PCI address; refused or not released in time: the old one stays or is plugged back, and a note says the
   change waits for the next start); what still needs a restart is listed, and ``restart=True`` shuts the
   domain down (ACPI, then destroy after a timeout) and starts it;
6. vhost pins: labctl's qemu hook (``hook.py``), and the running domain's vhost threads pinned now.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from labctl.domain_edit import hook, originals
from labctl.errors import HypervisorError, SwapError, UserError
from labctl.host.cpuset import format_cpuset, parse_cpuset
from labctl.lab.libvirt import hotplug, hypervisor

if TYPE_CHECKING:  # the XML core (labctl/domain_edit/edit.py, changes.py)
    from labctl.domain_edit.changes import Changes
    from labctl.domain_edit.edit import EditResult

DEFAULT_URI = "qemu:///system"
LOCAL_URIS = ("qemu:///system", "qemu:///session")


@dataclass
class LiveResult:
    edit: "EditResult"
    applied_live: list[str] = field(default_factory=list)
    restarted: bool = False
    saved_original: bool = False  # this apply kept the domain's original (its first change)
    notes: list[str] = field(default_factory=list)  # e.g. libvirtd must restart to run the vhost hook

    @property
    def changed(self) -> bool:
        return bool(self.edit.changed or self.applied_live or self.restarted)


def _libvirt():
    import libvirt

    return libvirt


def find_domain(name: str, uri: str):
    """The domain ``name`` on ``uri``; one line (exit 2) when there is none."""
    if not name or not isinstance(name, str):
        raise UserError("DOMAIN: a domain name is required (allowed: a defined domain: virsh list --all)")
    dom = hypervisor.lookup(uri, name)
    if dom is None:
        raise UserError(f"DOMAIN={name}: no such domain on {uri} (allowed: a defined domain's name: virsh list --all)")
    return dom


def _domain(name: str, uri: str):
    """A defined (persistent) domain: what apply and undo change."""
    dom = find_domain(name, uri)
    if not dom.isPersistent():
        raise UserError(f"DOMAIN={name}: a transient domain (not defined); labctl apply changes defined domains only "
                        "(allowed: a domain from virsh list --all --persistent)")
    return dom


def host_cpus(uri: str) -> tuple[set[int], int]:
    """The hypervisor host's online CPUs and the length of its CPU maps (``virConnectGetCPUMap``)."""
    conn = hypervisor.connect(uri)
    try:
        count, online, _n = conn.getCPUMap(0)
    except _libvirt().libvirtError as exc:
        raise HypervisorError(f"{uri}: cannot read the host's CPUs: {exc.get_error_message()}") from None
    return {i for i, on in enumerate(online) if on}, int(count)


def inactive_xml(dom) -> str:
    libvirt = _libvirt()
    try:
        return dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{dom.name()}: cannot read its XML: {exc.get_error_message()}") from None


def _define(uri: str, xml: str, name: str) -> None:
    libvirt = _libvirt()
    try:
        hypervisor.connect(uri).defineXML(xml)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{name}: libvirt refused the new XML: {exc.get_error_message()}") from None


def _cpus(value: Any) -> frozenset[int]:
    return frozenset(value) if isinstance(value, (set, frozenset, list, tuple)) else parse_cpuset(str(value))


def _vhost_cpuset(changes: Any) -> str | None:
    """The vhost pin asked for, if the changes carry one (``vhost`` or ``vhostpin``: a cpuset)."""
    for attribute in ("vhost", "vhostpin", "vhost_pin"):
        value = getattr(changes, attribute, None)
        if value:
            return format_cpuset(_cpus(value))
    return None


def _check_cpus(where: str, cpus: frozenset[int], online: set[int]) -> None:
    missing = sorted(cpus - online)
    if missing:
        raise UserError(f"{where}: CPU {format_cpuset(missing)} is not on this host (allowed: "
                        f"{format_cpuset(online)})")


def _wanted_live(edit: "EditResult") -> tuple[dict[int, frozenset[int]], frozenset[int] | None]:
    vcpus: dict[int, frozenset[int]] = {}
    emulator = None
    for key, value in (edit.live_pins or {}).items():
        if key == "emulator":
            emulator = _cpus(value)
        elif key == "vhost":
            continue  # the hook's (changes.vhostpin), not libvirt's
        else:
            vcpus[int(key)] = _cpus(value)
    return vcpus, emulator


def _pin_live(dom, vcpus: dict[int, frozenset[int]], emulator: frozenset[int] | None, cpumap_len: int) -> list[str]:
    """Pin what differs from the running domain's pins; one line per pin changed."""
    have = hypervisor.domain_pins(dom)
    todo = {v: c for v, c in vcpus.items() if have["vcpus"].get(v) != format_cpuset(c)}
    emu = emulator if emulator is not None and have.get("emulator") != format_cpuset(emulator) else None
    if not todo and emu is None:
        return []
    hypervisor.pin_live(dom, todo, emu, cpumap_len)
    lines = [f"vcpu {v}: pinned live to {format_cpuset(c)}" for v, c in sorted(todo.items())]
    if emu is not None:
        lines.append(f"emulator: pinned live to {format_cpuset(emu)}")
    return lines


def _restart(dom, timeout_s: float) -> None:
    libvirt = _libvirt()
    try:
        if dom.isActive():
            try:
                dom.shutdown()
            except libvirt.libvirtError:
                pass  # no ACPI in the guest: the timeout's destroy ends it
            hypervisor.shutdown_or_destroy(dom, timeout_s)
        dom.create()
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{dom.name()}: restart failed: {exc.get_error_message()}") from None


def _local(uri: str) -> bool:
    """A URI without a host part names this host's hypervisor (libvirt "Connection URIs")."""
    from urllib.parse import urlsplit

    return not urlsplit(uri).netloc


def _interfaces_by_mac(xml: str) -> dict[str, tuple[int, ET.Element]]:
    """A domain XML's ``<interface>`` elements by MAC, with their index among the interfaces."""
    root = ET.fromstring(xml)
    out = {}
    for index, interface in enumerate(root.findall("devices/interface")):
        mac = hotplug.mac_of(interface)
        if mac:
            out[mac] = (index, interface)
    return out


def _driver(interface: ET.Element) -> dict[str, str]:
    driver = interface.find("driver")
    return dict(driver.attrib) if driver is not None else {}


def _swap_live(uri: str, dom, name: str, before: str, after: str, result: LiveResult) -> list[int]:
    """Each interface whose ``<driver>`` changed between the two inactive XMLs swapped in the running domain (the
    new element attached at the live one's PCI address); the indexes swapped. What could not be is a note."""
    old_ifaces, new_ifaces = _interfaces_by_mac(before), _interfaces_by_mac(after)
    live = {hotplug.mac_of(i): i for i in hotplug.live_interfaces(dom)}
    swapped = []
    for mac, (index, new) in new_ifaces.items():
        old = old_ifaces.get(mac, (index, None))[1]
        if old is None or _driver(old) == _driver(new):
            continue
        label = f"interface {index} ({mac})"
        running = live.get(mac)
        if running is None:
            result.notes.append(f"{label}: not in the running domain; it takes the new settings at its next start")
            continue
        try:
            hotplug.detach(uri, dom, [running], [label], name)
        except SwapError as exc:
            result.notes.append(f"{label}: not swapped live ({exc}); it takes the new settings at its next start "
                                "(--restart)")
            continue
        try:
            hotplug.attach(dom, new, running, f"{name}: attaching {label}")
        except SwapError as exc:
            try:
                hotplug.attach(dom, old, running, f"{name}: plugging {label} back")
                back = "the old one was plugged back"
            except SwapError as again:
                back = f"the old one could not be plugged back either ({again}): the domain runs without it"
            result.notes.append(f"{label}: the new settings were refused live ({exc}); {back}; they take effect at "
                                "the next start (--restart)")
            continue
        settings = ", ".join(f"{k} {v}" for k, v in sorted(_driver(new).items()) if k != "name")
        result.applied_live.append(f"{label}: swapped live (unplugged, plugged again with {settings})")
        swapped.append(index)
    return swapped


def apply_live(name: str, uri: str | None, changes: "Changes", restart: bool = False, dry_run: bool = False,
               shutdown_timeout_s: float = 60.0, live: bool = False) -> LiveResult:
    """Apply ``changes`` to the defined domain ``name`` (see the module's docstring for the steps); ``live``:
    a running domain's changed NICs are swapped in place."""
    from labctl.domain_edit.edit import apply_changes

    uri = uri or DEFAULT_URI
    dom = _domain(name, uri)
    online, cpumap_len = host_cpus(uri)
    vhost = _vhost_cpuset(changes)
    if vhost is not None:
        _check_cpus("guest.pinning.vhost", parse_cpuset(vhost), online)
        if not _local(uri):
            raise UserError(f"guest.pinning.vhost: needs the domain on this host (allowed with --uri {LOCAL_URIS[0]}; "
                            "for other hosts run labctl apply there: playbooks/apply.yml)")
    before = inactive_xml(dom)
    edit = apply_changes(before, changes, host_cpus=set(online))
    vcpus, emulator = _wanted_live(edit)
    for vcpu, cpus in vcpus.items():
        _check_cpus(f"guest.pinning.vcpus.{vcpu}", cpus, online)
    if emulator is not None:
        _check_cpus("guest.pinning.emulator", emulator, online)
    result = LiveResult(edit=edit)
    if dry_run:
        return result
    uuid = dom.UUIDString()
    if edit.changed or vhost is not None:
        result.saved_original = originals.save(uuid, name, before)
    if edit.changed:
        _define(uri, edit.xml, name)
    running = bool(dom.isActive())
    if running and (vcpus or emulator is not None):
        result.applied_live += _pin_live(dom, vcpus, emulator, cpumap_len)
    if live and edit.changed and changes.nics:
        if running:
            swapped = _swap_live(uri, dom, name, before, edit.xml, result)
            edit.restart_needed = [line for line in edit.restart_needed
                                   if not any(line.startswith(f"interface {i} (") for i in swapped)]
        else:
            result.notes.append(f"--live: {name} is not running; its NICs take the new settings when it starts")
    if vhost is not None:
        result.applied_live += _vhost(dom, uuid, name, vhost, running, result)
    if running and restart and edit.changed and edit.restart_needed:
        _restart(dom, shutdown_timeout_s)
        result.restarted = True
        if vhost is not None:
            result.applied_live += _vhost_now(name, vhost)
    return result


def _vhost(dom, uuid: str, name: str, cpuset: str, running: bool, result: LiveResult) -> list[str]:
    listed = hook.domains().get(uuid.lower(), {}).get("cpuset")
    hook.install(uuid, cpuset, name=name)
    lines = [] if listed == cpuset else [f"vhost: labctl's hook {hook.hook_path()} pins the vhost threads to {cpuset} "
                                          "on every start"]
    if not hook.libvirtd_sees_hooks():
        result.notes.append("vhost: libvirtd looks for hooks only when it starts (libvirt 9.0; SIGHUP does not "
                            "re-read them): restart libvirtd for the hook to pin at this domain's next start")
    return lines + (_vhost_now(name, cpuset) if running else [])


def _vhost_now(name: str, cpuset: str) -> list[str]:
    import os

    from labctl.host.threads import qemu_pid

    pid = qemu_pid(name)
    if pid is None:
        return []
    tids = [t for t in hook.vhost_threads(pid) if os.sched_getaffinity(t) != set(parse_cpuset(cpuset))]
    if not tids:
        return []
    hook.pin_now(pid, cpuset)
    return [f"vhost: threads {','.join(map(str, tids))} pinned live to {cpuset}"]


def _original_pins(xml: str, online: set[int]) -> tuple[dict[int, frozenset[int]], frozenset[int]]:
    """The pins the original XML gives each vCPU and the emulator (``<vcpupin>``, else ``<vcpu cpuset>``,
    else every host CPU: libvirt "Domain XML format", CPU Allocation and CPU Tuning)."""
    from lxml import etree

    root = etree.fromstring(xml.encode(), etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
    vcpu = root.find("vcpu")
    count = int((vcpu.text or "1").strip()) if vcpu is not None else 1
    default = frozenset(online)
    if vcpu is not None and vcpu.get("cpuset"):
        default = parse_cpuset(vcpu.get("cpuset")) & frozenset(online) or default
    vcpus = {i: default for i in range(count)}
    for pin in root.findall("cputune/vcpupin"):
        vcpus[int(pin.get("vcpu"))] = parse_cpuset(pin.get("cpuset"))
    emulator = root.find("cputune/emulatorpin")
    return vcpus, parse_cpuset(emulator.get("cpuset")) if emulator is not None else default


def undo(name: str, uri: str | None) -> str:
    """Restore the domain's original XML exactly (``defineXML`` of the kept text), put a running
    domain's pins back live, drop it from the vhost hook (the hook goes with the last domain) and forget
    the original. One line saying what was done."""
    uri = uri or DEFAULT_URI
    dom = _domain(name, uri)
    uuid = dom.UUIDString()
    original = originals.load(uuid)
    if original is None:
        raise UserError(f"DOMAIN={name}: nothing to undo (labctl apply has not changed this domain; allowed: a "
                        "domain labctl apply changed)")
    _define(uri, original.xml, name)
    pins: list[str] = []
    if dom.isActive():
        online, cpumap_len = host_cpus(uri)
        vcpus, emulator = _original_pins(original.xml, online)
        live = {v: c for v, c in vcpus.items() if v < dom.maxVcpus()} if vcpus else {}
        pins = _pin_live(dom, live, emulator, cpumap_len)
    hooked = hook.remove(uuid)
    originals.remove(uuid)
    parts = [f"{name}: original XML restored"]
    if pins:
        parts.append(f"{len(pins)} live pin(s) put back")
    if hooked:
        parts.append("vhost hook entry removed" + ("" if hook.installed() else " (hook removed: no domain left)"))
    return "; ".join(parts)
