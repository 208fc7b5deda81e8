"""verify: requested (the domain XML) against negotiated (the guest agent's ethtool) or configured (QEMU's
qom-get), from recorded replies, in labctl up's line format."""

from __future__ import annotations

import base64
import json

import pytest

from labctl.domain_edit import verify
from labctl.errors import HypervisorError

XML = """<domain type='qemu'>
  <name>web1</name>
  <devices>
    <interface type='network'>
      <mac address='52:54:00:AA:00:01'/>
      <source network='default'/>
      <model type='virtio'/>
      <driver name='qemu' queues='2' rx_queue_size='1024' tx_queue_size='1024'/>
      <alias name='net0'/>
    </interface>
    <interface type='vhostuser'>
      <mac address='52:54:00:aa:00:02'/>
      <source type='unix' path='/run/vh.sock' mode='client'/>
      <model type='virtio'/>
      <driver queues='4' rx_queue_size='1024' tx_queue_size='1024'/>
      <alias name='ua-fast'/>
    </interface>
    <interface type='network'>
      <mac address='52:54:00:aa:00:03'/>
      <source network='default'/>
      <model type='e1000'/>
    </interface>
    <interface type='user'>
      <mac address='52:54:00:aa:00:04'/>
      <model type='virtio'/>
    </interface>
    <channel type='unix'>
      <target type='virtio' name='org.qemu.guest_agent.0' state='connected'/>
    </channel>
  </devices>
</domain>"""

ETHTOOL_G = """Ring parameters for enp1s0:
Pre-set maximums:
RX:\t\t\t1024
RX Mini:\t\tn/a
RX Jumbo:\t\tn/a
TX:\t\t\t256
Current hardware settings:
RX:\t\t\t1024
RX Mini:\t\tn/a
RX Jumbo:\t\tn/a
TX:\t\t\t256
RX Buf Len:\t\tn/a
"""
ETHTOOL_L = """Channel parameters for enp1s0:
Pre-set maximums:
RX:\t\tn/a
TX:\t\tn/a
Other:\t\tn/a
Combined:\t2
Current hardware settings:
RX:\t\tn/a
TX:\t\tn/a
Other:\t\tn/a
Combined:\t2
"""


def test_requested_nics_with_qemus_defaults():
    nics = verify.requested_nics(XML)
    assert [(n["index"], n["mac"], n["type"], n["model"], n["alias"], n["queues"], n["rx_ring"], n["tx_ring"])
            for n in nics] == [
        (0, "52:54:00:aa:00:01", "network", "virtio", "net0", 2, 1024, 1024),
        (1, "52:54:00:aa:00:02", "vhostuser", "virtio", "ua-fast", 4, 1024, 1024),
        (2, "52:54:00:aa:00:03", "network", "e1000", None, 1, 256, 256),
        (3, "52:54:00:aa:00:04", "user", "virtio", None, 1, 256, 256)]
    assert verify.has_agent_channel(XML)
    assert not verify.has_agent_channel("<domain><devices/></domain>")


def test_parse_ethtool():
    assert verify.parse_ethtool(ETHTOOL_G) == {
        "max": {"rx": 1024, "rx mini": None, "rx jumbo": None, "tx": 256},
        "current": {"rx": 1024, "rx mini": None, "rx jumbo": None, "tx": 256, "rx buf len": None}}
    assert verify.parse_ethtool(ETHTOOL_L)["current"]["combined"] == 2


class RecordedAgent:
    """Replies recorded from qemu-guest-agent (the "return" member), keyed by command."""

    def __init__(self, exits=True):
        self.sent: list[dict] = []
        self.pending = 0 if exits else 10**9
        self.pids = {}

    def __call__(self, text: str):
        command = json.loads(text)
        self.sent.append(command)
        name, args = command["execute"], command.get("arguments", {})
        if name == "guest-network-get-interfaces":
            return [{"name": "lo", "hardware-address": "00:00:00:00:00:00"},
                    {"name": "enp1s0", "hardware-address": "52:54:00:aa:00:01",
                     "ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "192.168.122.5", "prefix": 24}]}]
        if name == "guest-exec":
            pid = 1000 + len(self.pids)
            self.pids[pid] = ETHTOOL_G if args["arg"][0] == "-g" else ETHTOOL_L
            assert args["path"] == "ethtool" and args["capture-output"] is True
            return {"pid": pid}
        if name == "guest-exec-status":
            if self.pending > 0:
                self.pending -= 1
                return {"exited": False}
            out = base64.b64encode(self.pids[args["pid"]].encode()).decode()
            return {"exited": True, "exitcode": 0, "out-data": out}
        raise AssertionError(name)


def test_agent_nics_from_recorded_replies():
    agent = RecordedAgent()
    got = verify.agent_nics(agent, ["52:54:00:aa:00:01", "52:54:00:aa:00:02"])
    assert got == {"52:54:00:aa:00:01": {"ifname": "enp1s0", "queues": 2, "max_queues": 2, "rx_ring": 1024,
                                         "tx_ring": 256, "rx_ring_max": 1024, "tx_ring_max": 256}}
    execs = [c["arguments"]["arg"] for c in agent.sent if c["execute"] == "guest-exec"]
    assert execs == [["-g", "enp1s0"], ["-l", "enp1s0"]]


def test_agent_exec_that_fails_or_hangs_is_one_fault(monkeypatch):
    def failing(text):
        command = json.loads(text)
        return {"pid": 7} if command["execute"] == "guest-exec" else {"exited": True, "exitcode": 127}

    with pytest.raises(HypervisorError, match="exited 127"):
        verify.agent_exec(failing, "ethtool", ["-g", "eth0"])
    monkeypatch.setattr(verify.time, "sleep", lambda s: None)
    with pytest.raises(HypervisorError, match="did not finish"):
        verify.agent_exec(RecordedAgent(exits=False), "ethtool", ["-g", "eth0"], timeout_s=0)


def test_agent_lines_are_labctl_ups_with_the_tx_cap_reason():
    nics = verify.requested_nics(XML)
    got = verify.agent_nics(RecordedAgent(), [n["mac"] for n in nics])
    lines = verify.nic_lines(nics, got, configured=False)
    assert lines[0] == "nic0 network   enp1s0 queues 2->2  rx 1024->1024  tx 1024->256"
    assert "QEMU caps tx_queue_size at 256 for a network interface" in lines[1]
    assert lines[2].startswith("nic1 vhostuser ?     queues 4->None")
    assert "no interface with this NIC's MAC" in lines[3]
    assert lines[4] == "nic2 network   not virtio (model e1000): nothing to verify"
    assert not any("configured" in line for line in lines)


class RecordedMonitor:
    """QMP replies (the "return" member) of QEMU 7.2 for a virtio-net-pci with mq=on,vectors=6."""

    PROPS = {"/machine/peripheral/net0": {"rx_queue_size": 1024, "tx_queue_size": 256, "mq": True, "vectors": 6},
             "/machine/peripheral/ua-fast": {"rx_queue_size": 1024, "tx_queue_size": 1024, "mq": True, "vectors": 10}}

    def __init__(self):
        self.sent = []

    def __call__(self, text):
        command = json.loads(text)
        self.sent.append(command)
        path = command["arguments"]["path"]
        if command["execute"] == "qom-list":
            return [{"name": "type", "type": "string"}] + [{"name": k, "type": "uint16"} for k in self.PROPS[path]]
        return self.PROPS[path][command["arguments"]["property"]]


def test_monitor_values_are_labelled_configured():
    monitor = RecordedMonitor()
    assert verify.monitor_nic(monitor, "net0") == {"ifname": "net0", "queues": 2, "rx_ring": 1024, "tx_ring": 256}
    assert verify.monitor_nic(monitor, "ua-fast")["queues"] == 4
    assert {c["execute"] for c in monitor.sent} == {"qom-list", "qom-get"}
    nics = verify.requested_nics(XML)[:2]
    got = {n["mac"]: verify.monitor_nic(monitor, n["alias"]) for n in nics}
    lines = verify.nic_lines(nics, got, configured=True)
    assert lines[0] == f"nic0 network   net0  queues 2->2  rx 1024->1024  tx 1024->256  {verify.CONFIGURED_NOTE}"
    assert "configured, not negotiated" in lines[2] and lines[2].startswith("nic1 vhostuser ua-fast queues 4->4")


def test_a_device_without_mq_has_one_queue():
    class Plain(RecordedMonitor):
        PROPS = {"/machine/peripheral/net1": {"rx_queue_size": 256, "tx_queue_size": 256, "mq": False}}

    assert verify.monitor_nic(Plain(), "net1")["queues"] == 1
