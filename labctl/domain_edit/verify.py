"""What a running domain's NICs got, against what its XML asks for, one line per NIC as ``labctl up``
prints them (``labctl.results.lines.describe_nics``).

Two sources, the better one first:

* **negotiated**, read in the guest through the QEMU guest agent, where the domain has an
  ``org.qemu.guest_agent.0`` channel and the agent answers ``guest-ping``: the interface with the NIC's
  MAC (``guest-network-get-interfaces``), then ``ethtool -l`` and ``ethtool -g`` on it through
  ``guest-exec`` / ``guest-exec-status`` (QEMU "QEMU Guest Agent Protocol Reference"; the output comes
  back base64-encoded in ``out-data``);
* otherwise **configured**: QEMU's own properties of the virtio-net device (``qom-get`` on
  ``/machine/peripheral/<alias>``, the device id libvirt gives it: ``net0``, or ``ua-NAME`` for a user
  alias; QEMU "QEMU QMP Reference Manual"), through libvirt's monitor passthrough. These are what QEMU
  was told, not what the guest's driver set up, and the lines say so. libvirt marks a domain whose
  monitor was used this way as tainted (``custom-monitor``) in its log.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Callable

from lxml import etree

from labctl import platform
from labctl.errors import HypervisorError, UserError
from labctl.lab.libvirt.negotiation import parse_ethtool
from labctl.results.lines import describe_nics

AGENT_CHANNEL = "org.qemu.guest_agent.0"
#: QEMU's virtio-net defaults when the XML names no size or queue count (hw/net/virtio-net.c:
#: VIRTIO_NET_RX_QUEUE_DEFAULT_SIZE, VIRTIO_NET_TX_QUEUE_DEFAULT_SIZE; one queue pair).
DEFAULT_RING = 256
CONFIGURED_NOTE = "(configured, not negotiated: QEMU's device properties; no guest agent answered)"

Agent = Callable[[str], Any]  # one guest-agent command (JSON text) -> its "return"
Monitor = Callable[[str], Any]  # one QMP command (JSON text) -> its "return"


def _parse(xml: str) -> etree._Element:
    return etree.fromstring(xml.encode(), etree.XMLParser(resolve_entities=False, no_network=True))


def requested_nics(xml: str) -> list[dict[str, Any]]:
    """Every ``<interface>`` of a domain XML: index, MAC, type, model, and the queues and rings its
    ``<driver>`` asks for (QEMU's defaults where it names none), with the device alias when present."""
    nics = []
    for index, iface in enumerate(_parse(xml).findall("devices/interface")):
        mac, model = iface.find("mac"), iface.find("model")
        driver, alias = iface.find("driver"), iface.find("alias")

        def attr(key: str, default: int) -> int:
            value = driver.get(key) if driver is not None else None
            return int(value) if value and value.isdigit() else default

        nics.append({"index": index, "mac": (mac.get("address", "") if mac is not None else "").lower(),
                     "type": iface.get("type", ""), "model": model.get("type", "") if model is not None else "",
                     "alias": alias.get("name") if alias is not None else None,
                     "queues": attr("queues", 1), "rx_ring": attr("rx_queue_size", DEFAULT_RING),
                     "tx_ring": attr("tx_queue_size", DEFAULT_RING)})
    return nics


def has_agent_channel(live_xml: str) -> bool:
    return any(t.get("name") == AGENT_CHANNEL for t in _parse(live_xml).findall("devices/channel/target"))


# --- the guest agent ---------------------------------------------------------------------------------



def agent_exec(agent: Agent, path: str, args: list[str], timeout_s: float = 10.0) -> str:
    """Run a program in the guest (``guest-exec``), wait for it (``guest-exec-status``), its stdout."""
    started = agent(json.dumps({"execute": "guest-exec",
                                "arguments": {"path": path, "arg": args, "capture-output": True}}))
    pid = int(started["pid"])
    deadline = time.monotonic() + timeout_s
    while True:
        status = agent(json.dumps({"execute": "guest-exec-status", "arguments": {"pid": pid}}))
        if status.get("exited"):
            break
        if time.monotonic() > deadline:
            raise HypervisorError(f"guest agent: {path} {' '.join(args)} did not finish in {timeout_s:.0f} s")
        time.sleep(0.1)
    if status.get("exitcode", 0) != 0:
        raise HypervisorError(f"guest agent: {path} {' '.join(args)} exited {status.get('exitcode')}")
    return base64.b64decode(status.get("out-data", "")).decode("utf-8", "replace")


def agent_nics(agent: Agent, macs: list[str]) -> dict[str, dict[str, Any]]:
    """MAC -> what the guest's driver set up on the interface with that MAC (absent: no such interface)."""
    interfaces = agent(json.dumps({"execute": "guest-network-get-interfaces"}))
    by_mac = {str(i.get("hardware-address", "")).lower(): i.get("name") for i in interfaces}
    found = {}
    for mac in macs:
        ifname = by_mac.get(mac)
        if not ifname:
            continue
        rings = parse_ethtool(agent_exec(agent, "ethtool", ["-g", ifname]))
        channels = parse_ethtool(agent_exec(agent, "ethtool", ["-l", ifname]))
        found[mac] = {"ifname": ifname, "queues": channels["current"].get("combined"),
                      "max_queues": channels["max"].get("combined"),
                      "rx_ring": rings["current"].get("rx"), "tx_ring": rings["current"].get("tx"),
                      "rx_ring_max": rings["max"].get("rx"), "tx_ring_max": rings["max"].get("tx")}
    return found


# --- QEMU's monitor ------------------------------------------------------------------------------------

def monitor_nic(monitor: Monitor, alias: str) -> dict[str, Any]:
    """The virtio-net device ``alias``'s configured rings and queues (``qom-list``, then ``qom-get`` of
    each property the device has; queues from ``mq`` and ``vectors``, which libvirt sets to 2N+2)."""
    path = f"/machine/peripheral/{alias}"
    names = {p.get("name") for p in monitor(json.dumps({"execute": "qom-list", "arguments": {"path": path}}))}

    def get(prop: str) -> Any:
        if prop not in names:
            return None
        return monitor(json.dumps({"execute": "qom-get", "arguments": {"path": path, "property": prop}}))

    mq, vectors = get("mq"), get("vectors")
    queues = 1
    if mq is True and isinstance(vectors, int) and vectors >= 4:
        queues = (vectors - 2) // 2
    return {"ifname": alias, "queues": queues, "rx_ring": get("rx_queue_size"), "tx_ring": get("tx_queue_size")}


def _agent_of(dom) -> Agent:
    import libvirt
    import libvirt_qemu

    def command(text: str) -> Any:
        try:
            reply = libvirt_qemu.qemuAgentCommand(dom, text, 10, 0)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"{dom.name()}: guest agent: {exc.get_error_message()}") from None
        return json.loads(reply)["return"]

    return command


def _monitor_of(dom) -> Monitor:
    import libvirt
    import libvirt_qemu

    def command(text: str) -> Any:
        try:
            reply = json.loads(libvirt_qemu.qemuMonitorCommand(dom, text, 0))
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"{dom.name()}: QEMU monitor: {exc.get_error_message()}") from None
        if "error" in reply:
            raise HypervisorError(f"{dom.name()}: QEMU monitor: {reply['error'].get('desc', reply['error'])}")
        return reply["return"]

    return command


def _agent_answers(agent: Agent) -> bool:
    try:
        agent(json.dumps({"execute": "guest-ping"}))
        return True
    except HypervisorError:
        return False


# --- the lines ------------------------------------------------------------------------------------------

def differences(nic: dict[str, Any], got: dict[str, Any] | None) -> list[str]:
    if got is None:
        return ["the guest reported no interface with this NIC's MAC (driver not bound, or no agent command)"]
    reasons = []
    if got.get("queues") is not None and got["queues"] != nic["queues"]:
        reasons.append(f"queues: {got['queues']} of the {nic['queues']} asked for"
                       + (f" ({got['max_queues']} offered)" if got.get("max_queues") is not None else ""))
    for key in ("rx_ring", "tx_ring"):
        have, want = got.get(key), nic[key]
        if have is None or have == want:
            continue
        cap = platform.tx_ring_cap(nic["type"])
        if key == "tx_ring" and cap is not None and have == cap:
            reasons.append(f"tx_ring: QEMU caps tx_queue_size at {cap} for a {nic['type']} interface (asked {want}; "
                           "only vhost-user gets more)")
        else:
            reasons.append(f"{key}: {have} entries, not the {want} asked for")
    return reasons


def nic_lines(nics: list[dict[str, Any]], got: dict[str, dict[str, Any]], configured: bool) -> list[str]:
    """One ``labctl up`` line per NIC (``describe_nics``), its reasons below; configured values say so."""
    lines = []
    for nic in nics:
        if nic["model"] != "virtio":
            lines.append(f"nic{nic['index']} {nic['type']:<9} not virtio (model {nic['model'] or 'none'}): nothing to verify")
            continue
        have = got.get(nic["mac"])
        entry = {"index": nic["index"], "negotiated": have, "differences": differences(nic, have),
                 "requested": {"backend": nic["type"], "queues": nic["queues"], "rx_ring": nic["rx_ring"],
                               "tx_ring": nic["tx_ring"]}}
        described = describe_nics([entry])
        if configured:
            described[0] += f"  {CONFIGURED_NOTE}"
        lines += described
    return lines


def verify(name: str, uri: str | None) -> list[str]:
    """Per NIC of the running domain ``name``: requested (its XML) against negotiated (the guest agent)
    or, without an agent, configured (QEMU's device properties)."""
    import libvirt

    from labctl.domain_edit.live import DEFAULT_URI, find_domain

    uri = uri or DEFAULT_URI
    dom = find_domain(name, uri)
    if not dom.isActive():
        raise UserError(f"DOMAIN={name}: not running: nothing negotiated to read (allowed: a running domain; "
                        "start it, or --restart when applying)")
    try:
        persistent = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) if dom.isPersistent() else dom.XMLDesc(0)
        live = dom.XMLDesc(0)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{name}: cannot read its XML: {exc.get_error_message()}") from None
    nics = requested_nics(persistent)
    aliases = {n["mac"]: n["alias"] for n in requested_nics(live)}
    virtio = [n for n in nics if n["model"] == "virtio"]
    agent = _agent_of(dom)
    if has_agent_channel(live) and _agent_answers(agent):
        return nic_lines(nics, agent_nics(agent, [n["mac"] for n in virtio]), configured=False)
    monitor = _monitor_of(dom)
    got = {n["mac"]: monitor_nic(monitor, aliases[n["mac"]]) for n in virtio if aliases.get(n["mac"])}
    return nic_lines(nics, got, configured=True)
