"""apply_changes on small domains: only the named elements and attributes change, idempotent, skips with
reasons, bad input as one-line user errors (labctl.domain_edit.edit)."""

from __future__ import annotations

import pytest

from labctl.domain_edit.changes import changes_from_knobs
from labctl.domain_edit.edit import apply_changes
from labctl.errors import DomainXmlError
from labctl.errors import KnobError

DOMAIN = """<?xml version="1.0"?>
<domain type="qemu" xmlns:x="urn:example">
  <!-- written by hand -->
  <name>d</name>
  <memory unit="KiB">1048576</memory>
  <vcpu placement="static">2</vcpu>
  <x:extra a="1"/>
  <devices>
    <interface type='network'>
      <mac address='52:54:00:00:00:01'/>
      <source network='default'/>
      <model type='virtio'/>
    </interface>
    <interface type="vhostuser">
      <mac address="52:54:00:00:00:02"/>
      <source type="unix" path="/tmp/s" mode="client"/>
      <model type="virtio"/>
      <driver name="vhost" queues="2" event_idx="on">
        <host mrg_rxbuf="off"/>
      </driver>
    </interface>
    <interface type='user'>
      <model type='virtio'/>
    </interface>
    <interface type='network'>
      <source network='default'/>
      <model type='e1000'/>
    </interface>
  </devices>
</domain>
"""

KNOBS = ["guest.nics.*.queues=4", "guest.nics.*.rx_queue_size=1024", "guest.nics.*.tx_queue_size=1024",
         "guest.pinning.vcpus.1=0", "guest.pinning.emulator=1", "guest.hugepages=true"]


def changed_lines(diff: str) -> list[str]:
    return [l for l in diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]


def test_only_driver_cputune_and_memory_backing_change():
    result = apply_changes(DOMAIN, changes_from_knobs(KNOBS))
    assert result.changed
    assert changed_lines(result.diff) == [
        "+  <memoryBacking>",
        '+    <hugepages/>',
        "+  </memoryBacking>",
        "+  <cputune>",
        '+    <vcpupin vcpu="1" cpuset="0"/>',
        '+    <emulatorpin cpuset="1"/>',
        "+  </cputune>",
        "+      <driver queues='4' rx_queue_size='1024'/>",
        '-      <driver name="vhost" queues="2" event_idx="on">',
        '+      <driver name="vhost" queues="4" event_idx="on" rx_queue_size="1024" tx_queue_size="1024">',
        "+      <driver rx_queue_size='1024'/>",  # the user NIC: its rx ring (not its queues, nor tx above 256)
    ]
    assert "<!-- written by hand -->" in result.xml and '<x:extra a="1"/>' in result.xml
    assert result.live_pins == {1: "0", "emulator": "1"}
    assert any("hugepages" in r for r in result.restart_needed)


def test_interfaces_report_changed_skipped_and_why():
    lines = apply_changes(DOMAIN, changes_from_knobs(KNOBS)).lines
    assert lines[0].startswith("interface 0 (network, 52:54:00:00:00:01, model virtio): set queues unset -> 4, "
                               "rx_queue_size unset -> 1024; skipped tx_queue_size=1024: type network caps "
                               "tx_queue_size at 256, it needs vhostuser (rule tx-ring-backend:")
    assert "note: queues 4 is more than the domain's 2 vCPUs" in lines[0]
    assert lines[1].startswith("interface 1 (vhostuser, 52:54:00:00:00:02, model virtio): set queues 2 -> 4")
    assert lines[2].startswith("interface 2 (user, model virtio): set rx_queue_size unset -> 1024; skipped queues=4: "
                               "type user: the user-mode (slirp) backend has one queue pair; skipped "
                               "tx_queue_size=1024: type user caps tx_queue_size at 256, it needs vhostuser")
    assert lines[3] == "interface 3 (network, model e1000): skipped, not virtio (model e1000); untouched"


def test_applying_twice_changes_nothing():
    changes = changes_from_knobs(KNOBS)
    once = apply_changes(DOMAIN, changes)
    twice = apply_changes(once.xml, changes)
    assert not twice.changed and twice.diff == "" and twice.xml == once.xml
    assert "already queues=4, rx_queue_size=1024" in twice.lines[0]


def test_nothing_asked_changes_nothing():
    result = apply_changes(DOMAIN, changes_from_knobs([]))
    assert result.xml == DOMAIN and not result.changed and result.lines == []


def test_one_interface_by_index_or_mac():
    by_index = apply_changes(DOMAIN, changes_from_knobs(["guest.nics.1.queues=8"]))
    by_mac = apply_changes(DOMAIN, changes_from_knobs(["guest.nics.*.queues=8"], nic_mac="52:54:00:00:00:02"))
    assert by_index.xml == by_mac.xml
    assert by_index.lines[0].endswith("not selected, untouched")
    assert changed_lines(by_index.diff) == [
        '-      <driver name="vhost" queues="2" event_idx="on">',
        '+      <driver name="vhost" queues="8" event_idx="on">']


@pytest.mark.parametrize("knobs, mac, message", [
    (["guest.nics.4.queues=2"], None, "guest.nics.4: the domain has 4 interface(s) (allowed: 0..3 or *)"),
    (["guest.nics.*.queues=2"], "52:54:00:00:00:09", "--nic 52:54:00:00:00:09: no interface of the domain"),
    (["guest.pinning.vcpus.2=0"], None, "guest.pinning.vcpus.2: the domain has 2 vCPU(s) (allowed: 0..1)"),
])
def test_addresses_the_domain_lacks_are_refused(knobs, mac, message):
    with pytest.raises(KnobError) as info:
        apply_changes(DOMAIN, changes_from_knobs(knobs, nic_mac=mac))
    assert str(info.value).startswith(message)


def test_host_cpus_check_for_live_domains():
    with pytest.raises(KnobError, match=r"guest.pinning.emulator: CPU\(s\) 7 are not on this host \(allowed: 0-1\)"):
        apply_changes(DOMAIN, changes_from_knobs(["guest.pinning.emulator=1,7"]), host_cpus={0, 1})
    assert apply_changes(DOMAIN, changes_from_knobs(["guest.pinning.emulator=1,7"])).changed  # a file: no host


BOMB = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><domain><name>&c;</name></domain>')


@pytest.mark.parametrize("text, message", [
    (BOMB, "a DOCTYPE or entity declaration is not allowed"),
    ("<domain><name>x</domain>", "not well-formed XML"),
    ("<network><name>x</name></network>", "not a libvirt domain (root element <network>, allowed: <domain>)"),
    ("", "not well-formed XML"),
])
def test_bad_xml_is_one_line(text, message):
    with pytest.raises(DomainXmlError) as info:
        apply_changes(text, changes_from_knobs(KNOBS), source="--xml in.xml")
    assert str(info.value).startswith("--xml in.xml: ") and message in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2
