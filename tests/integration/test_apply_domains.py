"""labctl apply's live half on the real libvirtd (qemu:///system, QEMU under TCG here).

* A domain defined from a virt-install-style XML (two virtio NICs on the default network, a comment, a
  foreign metadata namespace): apply queues, rings and pins; ``dumpxml --inactive`` differs from before
  in exactly those; a second apply changes nothing; undo; ``dumpxml --inactive`` is as before.
* A running domain (SeaBIOS with no boot disk under TCG: QEMU runs its vCPU threads, which is all live
  pinning needs; the appliance is not booted, to spare the shared CPUs): apply vCPU and emulator pins
  live, read the threads' affinity back from /proc, verify (no guest agent: QEMU's configured device
  properties, said to be configured), undo.

The XML core (``edit.apply_changes``, branch domedit) is stood in for by a small lxml editor setting the
same attributes, so that this module tests live.py against libvirtd on its own. Domains, saved
originals and hook entries are removed by finalizers, also when a test fails.
"""

from __future__ import annotations

import difflib
import sys
import types
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from lxml import etree

from labctl.domain_edit import hook, live, originals, verify
from labctl.errors import UserError
from labctl.host.threads import qemu_pid, qemu_thread_pins
from labctl.lab.libvirt import hypervisor
from tests.integration.conftest import LIBVIRT_URI, needs_libvirtd

pytestmark = needs_libvirtd
URI = LIBVIRT_URI


@dataclass(frozen=True)
class Changes:
    nics: dict = field(default_factory=dict)  # index -> {queues, rx_queue_size, tx_queue_size}
    vcpupins: dict = field(default_factory=dict)
    emulatorpin: str | None = None
    hugepages: bool = False
    vhost: str | None = None


@dataclass
class Edit:
    xml: str
    diff: str
    lines: list
    changed: bool
    restart_needed: list
    live_pins: dict


def stand_in_apply_changes(xml_text, changes, host_cpus=None):
    root = etree.fromstring(xml_text.encode(), etree.XMLParser(resolve_entities=False))
    restart = []
    for index, iface in enumerate(root.findall("devices/interface")):
        for key, value in changes.nics.get(index, {}).items():
            driver = iface.find("driver")
            if driver is None:
                driver = etree.SubElement(iface, "driver")
            if driver.get(key) != str(value):
                driver.set(key, str(value))
                restart.append(f"nic{index} {key}")
    pins = {}
    if changes.vcpupins or changes.emulatorpin:
        cputune = root.find("cputune")
        if cputune is None:
            cputune = etree.Element("cputune")
            root.find("vcpu").addnext(cputune)
        for vcpu, cpuset in sorted(changes.vcpupins.items()):
            pin = cputune.find(f"vcpupin[@vcpu='{vcpu}']")
            if pin is None:
                pin = etree.SubElement(cputune, "vcpupin", vcpu=str(vcpu))
            pin.set("cpuset", cpuset)
            pins[vcpu] = cpuset
        if changes.emulatorpin:
            pin = cputune.find("emulatorpin")
            if pin is None:
                pin = etree.SubElement(cputune, "emulatorpin")
            pin.set("cpuset", changes.emulatorpin)
            pins["emulator"] = changes.emulatorpin
    new = etree.tostring(root, encoding="unicode")
    old = etree.tostring(etree.fromstring(xml_text.encode()), encoding="unicode")
    changed = new != old
    diff = "".join(difflib.unified_diff(xml_text.splitlines(True), new.splitlines(True)))
    return Edit(xml=new if changed else xml_text, diff=diff, lines=[], changed=changed,
                restart_needed=restart if changed else [], live_pins=pins)


@pytest.fixture(autouse=True)
def core(monkeypatch, tmp_path):
    module = types.ModuleType("labctl.domain_edit.edit")
    module.apply_changes = stand_in_apply_changes
    monkeypatch.setitem(sys.modules, "labctl.domain_edit.edit", module)
    monkeypatch.setenv("LABCTL_HOOK_DIR", str(tmp_path / "hooks" / "qemu.d"))
    yield
    assert originals.kept() == [], "a saved original was left behind"
    assert not hook.installed() and hook.domains() == {}, "the vhost hook was left behind"


VIRT_INSTALL = """<domain type='qemu'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://debian.org/debian/12"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='KiB'>131072</memory>
  <currentMemory unit='KiB'>131072</currentMemory>
  <vcpu placement='static'>2</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='network'/>
  </os>
  <cpu mode='maximum'/>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <!-- written by virt-install; the user's note stays -->
    {nics}
    <console type='pty'/>
    <memballoon model='none'/>
  </devices>
</domain>
"""
NETWORK_NIC = """<interface type='network'>
      <mac address='{mac}'/>
      <source network='default'/>
      <model type='virtio'/>
    </interface>"""
USER_NIC = """<interface type='user'>
      <mac address='{mac}'/>
      <model type='virtio'/>
    </interface>"""


def unique() -> str:
    return f"labctl-it-apply-{uuidlib.uuid4().hex[:8]}"


@pytest.fixture
def defined(request):
    """Define a domain from a virt-install-style XML; undefined (destroyed first) at the end."""
    made = []

    def define(nic_template: str, macs: list[str]):
        name = unique()
        nics = "\n    ".join(nic_template.format(mac=mac) for mac in macs)
        xml = VIRT_INSTALL.format(name=name, uuid=uuidlib.uuid4(), nics=nics)
        made.append(name)
        dom = hypervisor.define_and_start(URI, xml, start=False)
        return dom

    yield define
    for name in made:
        dom = hypervisor.lookup(URI, name)
        if dom is not None:
            originals.remove(dom.UUIDString())
            hook.remove(dom.UUIDString())
        hypervisor.remove_domain(URI, name)
        assert hypervisor.lookup(URI, name) is None


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_define_apply_dumpxml_then_undo(defined, no_leftovers):
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:01", "52:54:00:5a:00:02"])
    before = live.inactive_xml(dom)
    changes = Changes(nics={0: {"queues": 2, "rx_queue_size": 1024, "tx_queue_size": 256},
                            1: {"queues": 2, "rx_queue_size": 512}},
                      vcpupins={0: "0", 1: "1"}, emulatorpin="0")
    result = live.apply_live(dom.name(), URI, changes)
    assert result.edit.changed and result.saved_original and result.applied_live == []
    after = live.inactive_xml(dom)
    diff = changed_lines(before, after)
    # libvirt normalises the new XML: only these lines differ from before
    assert sorted(line for line in diff if line.startswith("+")) == sorted([
        "+  <cputune>",
        "+    <vcpupin vcpu='0' cpuset='0'/>",
        "+    <vcpupin vcpu='1' cpuset='1'/>",
        "+    <emulatorpin cpuset='0'/>",
        "+  </cputune>",
        "+      <driver queues='2' rx_queue_size='1024' tx_queue_size='256'/>",
        "+      <driver queues='2' rx_queue_size='512'/>"]), diff
    assert not [line for line in diff if line.startswith("-")], diff
    # (libvirt keeps no comments of a defined domain: that part is the XML core's, on files)
    assert 'libosinfo:os id="http://debian.org/debian/12"' in after
    again = live.apply_live(dom.name(), URI, changes)
    assert not again.changed and live.inactive_xml(dom) == after
    assert live.undo(dom.name(), URI) == f"{dom.name()}: original XML restored"
    assert live.inactive_xml(dom) == before
    assert originals.load(dom.UUIDString()) is None


def test_bad_input_on_the_real_host_writes_nothing(defined, no_leftovers):
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:03"])
    before = live.inactive_xml(dom)
    online, _n = live.host_cpus(URI)
    with pytest.raises(UserError, match=r"guest.pinning.vcpus.0: CPU \d+ is not on this host"):
        live.apply_live(dom.name(), URI, Changes(vcpupins={0: str(max(online) + 1)}))
    with pytest.raises(UserError, match="no such domain"):
        live.apply_live(unique(), URI, Changes(vcpupins={0: "0"}))
    with pytest.raises(UserError, match="nothing to undo"):
        live.undo(dom.name(), URI)
    assert live.inactive_xml(dom) == before and originals.kept() == []


needs_two_cpus = pytest.mark.skipif(len(live_cpus := __import__("os").sched_getaffinity(0)) < 2,
                                    reason="needs 2 CPUs")


@needs_two_cpus
def test_running_domain_pinned_live_verified_and_undone(defined, no_leftovers):
    dom = defined(USER_NIC, ["52:54:00:5a:00:04", "52:54:00:5a:00:05"])
    before = live.inactive_xml(dom)
    dom.create()
    try:
        pid = qemu_pid(dom.name())
        assert pid is not None
        changes = Changes(nics={0: {"rx_queue_size": 1024}}, vcpupins={0: "1", 1: "1"}, emulatorpin="0")
        result = live.apply_live(dom.name(), URI, changes, dry_run=True)
        assert result.applied_live == [] and live.inactive_xml(dom) == before
        result = live.apply_live(dom.name(), URI, changes)
        assert "vcpu 0: pinned live to 1" in result.applied_live and "emulator: pinned live to 0" in result.applied_live
        assert result.edit.restart_needed == ["nic0 rx_queue_size"] and not result.restarted
        threads = qemu_thread_pins(pid)
        assert threads["vcpus"] == {0: "1", 1: "1"} and threads["emulator"] == "0"
        assert hypervisor.domain_pins(dom) == {"vcpus": {0: "1", 1: "1"}, "emulator": "0"}
        lines = verify.verify(dom.name(), URI)
        # the ring needs a restart: the XML asks 1024, QEMU was started with its default 256
        assert lines[0].startswith("nic0 user      net0  queues 1->1  rx 1024->256  tx 256->256")
        assert verify.CONFIGURED_NOTE in lines[0]
        assert any(line.startswith("nic1 user      net1  queues 1->1  rx 256->256") for line in lines)
        again = live.apply_live(dom.name(), URI, changes)
        assert not again.changed
        restarted = live.apply_live(dom.name(), URI, changes, restart=True, shutdown_timeout_s=5)
        assert not restarted.restarted  # nothing changed in the XML: no restart for nothing
        line = live.undo(dom.name(), URI)
        assert line.startswith(f"{dom.name()}: original XML restored; ") and "live pin(s) put back" in line
        assert live.inactive_xml(dom) == before
        everywhere = __import__("labctl.host.cpuset", fromlist=["format_cpuset"]).format_cpuset(live.host_cpus(URI)[0])
        assert qemu_thread_pins(pid)["vcpus"] == {0: everywhere, 1: everywhere}
    finally:
        if dom.isActive():
            dom.destroy()


@needs_two_cpus
def test_restart_applies_the_rings(defined, no_leftovers):
    dom = defined(USER_NIC, ["52:54:00:5a:00:06"])
    dom.create()
    try:
        result = live.apply_live(dom.name(), URI, Changes(nics={0: {"rx_queue_size": 1024}}), restart=True,
                                 shutdown_timeout_s=3)
        assert result.restarted and dom.isActive()
        [line] = verify.verify(dom.name(), URI)
        assert line.startswith("nic0 user      net0  queues 1->1  rx 1024->1024")
        live.undo(dom.name(), URI)
    finally:
        if dom.isActive():
            dom.destroy()


def test_the_real_xml_core_on_libvirtd(defined, no_leftovers, monkeypatch):
    """The same define/apply/undo with edit.apply_changes and changes_from_settings (branch domedit)."""
    import importlib

    from labctl.domain_edit.changes import changes_from_settings

    monkeypatch.delitem(sys.modules, "labctl.domain_edit.edit")  # the stand-in
    edit = importlib.import_module("labctl.domain_edit.edit")
    assert hasattr(edit, "EditResult")
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:07", "52:54:00:5a:00:08"])
    before = live.inactive_xml(dom)
    changes = changes_from_settings({"guest.nics.*.queues": 2, "guest.nics.*.rx_queue_size": 1024,
                                     "guest.pinning.vcpus.0": "0", "guest.pinning.emulator": "0",
                                     "guest.pinning.vhost": "0"})
    result = live.apply_live(dom.name(), URI, changes)
    assert result.edit.changed and result.saved_original and hook.installed()
    after = live.inactive_xml(dom)
    added = sorted(line for line in changed_lines(before, after) if line.startswith("+"))
    assert added == sorted(["+  <cputune>", "+    <vcpupin vcpu='0' cpuset='0'/>", "+    <emulatorpin cpuset='0'/>",
                            "+  </cputune>"] + ["+      <driver queues='2' rx_queue_size='1024'/>"] * 2), added
    assert not [line for line in changed_lines(before, after) if line.startswith("-")]
    assert not live.apply_live(dom.name(), URI, changes).edit.changed
    assert "hook removed: no domain left" in live.undo(dom.name(), URI)
    assert live.inactive_xml(dom) == before
