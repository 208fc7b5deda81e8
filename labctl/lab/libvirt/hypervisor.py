"""libvirt through libvirt-python: connections, domains and networks. Never parses virsh."""

from __future__ import annotations

import contextlib
import threading
import xml.etree.ElementTree as ET
from typing import Any, Iterator

from labctl import paths
from labctl.lab.libvirt.domxml import METADATA_NS
from labctl.errors import HypervisorError, Interrupted

try:
    import libvirt
except ImportError:  # pragma: no cover - the package is a hard dependency
    libvirt = None  # type: ignore[assignment]

_CONNECTIONS: dict[str, Any] = {}
_LOCK = threading.Lock()


def _quiet(_ctx: Any, _err: Any) -> None:
    """libvirt prints every error to stderr by default; labctl reports them itself."""


def connect(uri: str, pool: dict[str, Any] | None = None):
    """One connection per URI per process (test:///default keeps its domains per connection); ``pool``: another
    set of them (:func:`event_connection`'s)."""
    if libvirt is None:
        raise HypervisorError("libvirt-python is not installed (make setup)")
    pool = _CONNECTIONS if pool is None else pool
    with _LOCK:
        conn = pool.get(uri)
        if conn is not None:
            try:
                if conn.isAlive():
                    return conn
            except libvirt.libvirtError:
                pass
        libvirt.registerErrorHandler(_quiet, None)
        try:
            conn = libvirt.open(uri)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"cannot connect to {uri}: {_message(exc)}") from None
        pool[uri] = conn
        return conn


_EVENT_CONNECTIONS: dict[str, Any] = {}
_EVENT_LOOP: list[threading.Thread] = []


def event_connection(uri: str):
    """A connection that delivers domain events: libvirt's default event loop implementation registered and run
    by a daemon thread (once per process), then a connection of its own opened after it (libvirt-python:
    ``virEventRegisterDefaultImpl`` must come before the connections that are to deliver events; labctl's
    other connections stay as they are)."""
    if libvirt is None:
        raise HypervisorError("libvirt-python is not installed (make setup)")
    with _LOCK:
        if not _EVENT_LOOP:
            libvirt.virEventRegisterDefaultImpl()

            def run() -> None:
                while True:
                    libvirt.virEventRunDefaultImpl()

            _EVENT_LOOP.append(threading.Thread(target=run, name="labctl-libvirt-events", daemon=True))
            _EVENT_LOOP[0].start()
    return connect(uri, _EVENT_CONNECTIONS)


def _message(exc: Exception) -> str:
    text = exc.get_error_message() if hasattr(exc, "get_error_message") else str(exc)
    return (text or str(exc)).splitlines()[0]


message_of = _message  # a libvirtError's first line (its message), for the rooms that call libvirt themselves


def domain_type_for(uri: str, kvm_usable: bool) -> str:
    if uri.startswith("test:"):
        return "test"
    return "kvm" if kvm_usable else "qemu"


def lookup(uri: str, name: str):
    conn = connect(uri)
    try:
        return conn.lookupByName(name)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
            return None
        raise HypervisorError(f"{name}: {_message(exc)}") from None


@contextlib.contextmanager
def _signals_pass() -> Iterator[None]:
    """A signal that lands while libvirt-python's C code runs comes out as a SystemError ("returned a
    result with an exception set") whose cause is the KeyboardInterrupt or Terminated: raise that."""
    try:
        yield
    except SystemError as exc:
        if isinstance(exc.__cause__, (KeyboardInterrupt, Interrupted)):
            raise exc.__cause__ from None
        raise


signals_pass = _signals_pass


def probe_emulators(uri: str) -> None:
    """Wait until the driver has probed its emulators (their capabilities are cached).

    The first domain defined after libvirtd starts with an empty capabilities cache (a fresh host, an
    upgraded QEMU) waits seconds while libvirtd probes QEMU; a labctl killed in that wait leaves the
    define running inside libvirtd, which finishes it after the client is gone. Probing first, while
    nothing is defined, shrinks that window to the define itself; and :func:`remove_domain` probes before
    it concludes there is no domain, so a define still in flight is waited for and then removed.
    ``getCapabilities`` takes the same cache lookups a define does (one per emulator)."""
    conn = connect(uri)
    try:
        with _signals_pass():
            conn.getCapabilities()
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{uri}: cannot read the hypervisor's capabilities: {_message(exc)}") from None


def define_and_start(uri: str, xml: str, start: bool = True):
    probe_emulators(uri)
    conn = connect(uri)
    try:
        with _signals_pass():
            dom = conn.defineXML(xml)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"libvirt refused the domain: {_message(exc)}") from None
    if start:
        try:
            with _signals_pass():
                dom.create()
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"{dom.name()} did not start: {_message(exc)}") from None
    return dom


def remove_domain(uri: str, name: str) -> bool:
    """Destroy and undefine, and remove the XML ``labctl apply`` kept of it (a lab domain's: nothing is left
    to restore it to); False when there was nothing to remove (after any define in flight)."""
    dom = lookup(uri, name)
    if dom is None:
        probe_emulators(uri)  # a killed labctl's define may still be running in libvirtd
        dom = lookup(uri, name)
    if dom is None:
        return False
    uuid = dom.UUIDString()
    try:
        if dom.isActive():
            dom.destroy()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_OPERATION_INVALID:
            raise HypervisorError(f"{name}: destroy failed: {_message(exc)}") from None
    try:
        dom.undefine()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise HypervisorError(f"{name}: undefine failed: {_message(exc)}") from None
    paths.domain_original(uuid).unlink(missing_ok=True)
    return True


_STATES = {}
if libvirt is not None:
    _STATES = {
        libvirt.VIR_DOMAIN_NOSTATE: "no state", libvirt.VIR_DOMAIN_RUNNING: "running",
        libvirt.VIR_DOMAIN_BLOCKED: "blocked", libvirt.VIR_DOMAIN_PAUSED: "paused",
        libvirt.VIR_DOMAIN_SHUTDOWN: "shutting down", libvirt.VIR_DOMAIN_SHUTOFF: "shut off",
        libvirt.VIR_DOMAIN_CRASHED: "crashed", libvirt.VIR_DOMAIN_PMSUSPENDED: "suspended",
    }


def domain_state(dom) -> str:
    state, _reason = dom.state()
    return _STATES.get(state, f"state {state}")


def labctl_domains(uri: str) -> list[dict[str, Any]]:
    """Every domain on ``uri`` that labctl defined (it carries labctl's metadata element)."""
    conn = connect(uri)
    found = []
    for dom in conn.listAllDomains():
        try:
            meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS)
        except libvirt.libvirtError:
            continue
        profile = ET.fromstring(meta).get("name", "")
        found.append({"domain": dom.name(), "profile": profile, "state": domain_state(dom),
                      "id": dom.ID() if dom.isActive() else None})
    return found


def domain_pins(dom) -> dict[str, Any]:
    """The pins libvirt reports for a running domain: vcpu -> cpus, emulator -> cpus."""
    from labctl.host.cpuset import format_cpuset

    pins: dict[str, Any] = {"vcpus": {}, "emulator": None}
    try:
        for vcpu, cpumap in enumerate(dom.vcpuPinInfo(0)):
            pins["vcpus"][vcpu] = format_cpuset({i for i, on in enumerate(cpumap) if on})
        emulator = dom.emulatorPinInfo(0)
        pins["emulator"] = format_cpuset({i for i, on in enumerate(emulator) if on})
    except libvirt.libvirtError:
        pass
    return pins


def ensure_network(uri: str, name: str = "default") -> bool:
    """Start a libvirt network if it is inactive; True when labctl started it."""
    conn = connect(uri)
    try:
        net = conn.networkLookupByName(name)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"network {name}: {_message(exc)}") from None
    if net.isActive():
        return False
    try:
        net.create()
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"network {name} did not start: {_message(exc)}") from None
    return True


def stop_network(uri: str, name: str) -> None:
    conn = connect(uri)
    try:
        net = conn.networkLookupByName(name)
        if net.isActive():
            net.destroy()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_NETWORK:
            raise HypervisorError(f"network {name}: {_message(exc)}") from None


def network_active(uri: str, name: str) -> bool:
    conn = connect(uri)
    try:
        return bool(conn.networkLookupByName(name).isActive())
    except libvirt.libvirtError:
        return False


def live_xml(dom) -> ET.Element:
    try:
        return ET.fromstring(dom.XMLDesc(0))
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{dom.name()}: cannot read its XML: {_message(exc)}") from None


def channel_path(dom, name: str) -> str | None:
    """The host-side unix socket libvirt made for the virtio-serial channel ``name`` of a running domain."""
    for channel in live_xml(dom).findall("devices/channel"):
        target = channel.find("target")
        source = channel.find("source")
        if target is not None and target.get("name") == name and source is not None:
            return source.get("path")
    return None


def interface_devices(dom) -> dict[str, str]:
    """MAC -> host tap device of a running domain's interfaces (libvirt names network taps vnetN)."""
    found = {}
    for iface in live_xml(dom).findall("devices/interface"):
        mac, target = iface.find("mac"), iface.find("target")
        if mac is not None and target is not None and target.get("dev"):
            found[mac.get("address", "").lower()] = target.get("dev")
    return found


def pin_live(dom, vcpus: dict[int, frozenset[int]], emulator: frozenset[int] | None, host_cpus: int) -> None:
    """Apply vCPU and emulator pins to a running domain (libvirt virDomainPinVcpuFlags/PinEmulator, live)."""
    def cpumap(cpus: frozenset[int]) -> tuple[bool, ...]:
        return tuple(i in cpus for i in range(host_cpus))

    try:
        for vcpu, cpus in sorted(vcpus.items()):
            dom.pinVcpuFlags(vcpu, cpumap(cpus), libvirt.VIR_DOMAIN_AFFECT_LIVE)
        if emulator is not None:
            dom.pinEmulator(cpumap(emulator), libvirt.VIR_DOMAIN_AFFECT_LIVE)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{dom.name()}: live pinning failed: {_message(exc)}") from None


def shutdown_or_destroy(dom, timeout_s: float = 10.0) -> None:
    """Wait up to ``timeout_s`` for a domain that was asked to power off, then destroy it."""
    import time

    deadline = time.monotonic() + timeout_s
    try:
        while dom.isActive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if dom.isActive():
            dom.destroy()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() not in (libvirt.VIR_ERR_OPERATION_INVALID, libvirt.VIR_ERR_NO_DOMAIN):
            raise HypervisorError(f"{dom.name()}: destroy failed: {_message(exc)}") from None


def network_address(uri: str, name: str = "default") -> tuple[str, int]:
    """The host's IPv4 address on a libvirt network (its bridge) and the prefix length."""
    import ipaddress

    conn = connect(uri)
    try:
        root = ET.fromstring(conn.networkLookupByName(name).XMLDesc(0))
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"network {name}: {_message(exc)}") from None
    for ip in root.findall("ip"):
        if ip.get("family", "ipv4") == "ipv4" and ip.get("address"):
            if ip.get("prefix"):
                return ip.get("address", ""), int(ip.get("prefix", "24"))
            mask = ip.get("netmask", "255.255.255.0")
            return ip.get("address", ""), ipaddress.ip_network(f"0.0.0.0/{mask}").prefixlen
    raise HypervisorError(f"network {name} has no IPv4 address on the host")
