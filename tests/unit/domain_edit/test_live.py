"""live: apply to a defined domain (libvirt's test driver), keep its first original, define, pin live,
restart, vhost hook, undo. The XML core (edit.apply_changes, branch domedit) is stood in for by a small
editor that sets <cputune> pins, so these tests fix live.py's own steps."""

from __future__ import annotations

import sys
import types
import uuid as uuidlib
from dataclasses import dataclass, field

import pytest
from lxml import etree

from labctl.domain_edit import hook, live, originals
from labctl.errors import HypervisorError, UserError
from labctl.lab.libvirt import hypervisor

URI = "test:///default"  # online CPUs 0, 2, 4 of 8 (libvirt's test driver)


@dataclass(frozen=True)
class FakeChanges:
    vcpupins: dict = field(default_factory=dict)
    emulatorpin: str | None = None
    vhost: str | None = None
    restart: tuple = ()


@dataclass
class FakeEdit:
    xml: str
    diff: str
    lines: list
    changed: bool
    restart_needed: list
    live_pins: dict


def fake_apply_changes(xml_text, changes, host_cpus=None):
    root = etree.fromstring(xml_text.encode())
    cputune = root.find("cputune")
    if cputune is None and (changes.vcpupins or changes.emulatorpin):
        cputune = etree.SubElement(root, "cputune")
    pins = {}
    for vcpu, cpuset in sorted(changes.vcpupins.items()):
        pin = cputune.find(f"vcpupin[@vcpu='{vcpu}']")
        if pin is None:
            pin = etree.SubElement(cputune, "vcpupin", vcpu=str(vcpu))
        pin.set("cpuset", cpuset)
        pins[vcpu] = cpuset
    if changes.vhost:
        pins["vhost"] = changes.vhost  # edit.py lists it among live_pins too
    if changes.emulatorpin:
        pin = cputune.find("emulatorpin")
        if pin is None:
            pin = etree.SubElement(cputune, "emulatorpin")
        pin.set("cpuset", changes.emulatorpin)
        pins["emulator"] = changes.emulatorpin
    new = etree.tostring(root, encoding="unicode")
    changed = etree.tostring(etree.fromstring(xml_text.encode()), encoding="unicode") != new
    return FakeEdit(xml=new if changed else xml_text, diff="", lines=[], changed=changed,
                    restart_needed=list(changes.restart) if changed else [], live_pins=pins)


@pytest.fixture(autouse=True)
def core(monkeypatch, tmp_path):
    module = types.ModuleType("labctl.domain_edit.edit")
    module.apply_changes = fake_apply_changes
    monkeypatch.setitem(sys.modules, "labctl.domain_edit.edit", module)
    monkeypatch.setenv("LABCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LABCTL_HOOK_DIR", str(tmp_path / "hooks" / "qemu.d"))
    monkeypatch.setattr(hook, "libvirtd_sees_hooks", lambda: True)


def domain_xml(name: str) -> str:
    return (f"<domain type='test'><name>{name}</name><uuid>{uuidlib.uuid4()}</uuid>"
            "<memory unit='KiB'>65536</memory><vcpu placement='static'>2</vcpu>"
            "<os><type arch='i686'>hvm</type></os><!-- the user's comment --></domain>")


@pytest.fixture
def domain(request):
    name = f"apply-{uuidlib.uuid4().hex[:8]}"
    dom = hypervisor.connect(URI).defineXML(domain_xml(name))
    request.addfinalizer(lambda: hypervisor.remove_domain(URI, name))
    return dom


def inactive(dom) -> str:
    return live.inactive_xml(dom)


def test_unknown_domain_is_one_line_and_nothing_saved():
    with pytest.raises(UserError) as info:
        live.apply_live("no-such-domain", URI, FakeChanges(vcpupins={0: "0"}))
    assert "DOMAIN=no-such-domain: no such domain" in str(info.value) and "\n" not in str(info.value)
    assert originals.kept() == []
    with pytest.raises(UserError, match="no such domain"):
        live.undo("no-such-domain", URI)


def test_apply_keeps_the_first_original_defines_and_undo_restores_it(domain):
    before = inactive(domain)
    result = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2"}, emulatorpin="0"))
    assert result.edit.changed and result.saved_original and not result.restarted
    after = inactive(domain)
    assert "<vcpupin vcpu='0' cpuset='2'/>" in after and "<emulatorpin cpuset='0'/>" in after
    assert originals.load(domain.UUIDString()).xml == before
    again = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2"}, emulatorpin="0"))
    assert not again.edit.changed and not again.saved_original and not again.changed
    assert inactive(domain) == after
    live.apply_live(domain.name(), URI, FakeChanges(vcpupins={1: "4"}))
    assert originals.load(domain.UUIDString()).xml == before  # the first original stays
    line = live.undo(domain.name(), URI)
    assert line == f"{domain.name()}: original XML restored"
    assert inactive(domain) == before
    assert originals.kept() == []
    with pytest.raises(UserError, match="nothing to undo"):
        live.undo(domain.name(), URI)


def test_dry_run_writes_nothing(domain):
    before = inactive(domain)
    result = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2"}), dry_run=True)
    assert result.edit.changed
    assert inactive(domain) == before and originals.kept() == []


def test_a_cpu_the_host_lacks_is_one_line_and_nothing_written(domain):
    before = inactive(domain)
    with pytest.raises(UserError) as info:  # the test driver's host has CPUs 0, 2 and 4 online
        live.apply_live(domain.name(), URI, FakeChanges(vcpupins={1: "1"}))
    assert str(info.value) == "guest.pinning.vcpus.1: CPU 1 is not on this host (allowed: 0,2,4)"
    with pytest.raises(UserError, match="guest.pinning.vhost: CPU 3"):
        live.apply_live(domain.name(), URI, FakeChanges(vhost="3"))
    assert inactive(domain) == before and originals.kept() == [] and not hook.installed()


def test_the_original_is_kept_before_the_define(domain, monkeypatch):
    before = inactive(domain)

    def refused(uri, xml, name):
        raise HypervisorError(f"{name}: libvirt refused the new XML")

    monkeypatch.setattr(live, "_define", refused)
    with pytest.raises(HypervisorError):
        live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2"}))
    assert originals.load(domain.UUIDString()).xml == before


def test_running_domain_is_pinned_live_only_where_it_differs(domain, monkeypatch):
    calls = []
    monkeypatch.setattr(hypervisor, "pin_live", lambda dom, vcpus, emu, n: calls.append((dict(vcpus), emu, n)))
    monkeypatch.setattr(hypervisor, "domain_pins", lambda dom: {"vcpus": {0: "0,2,4", 1: "4"}, "emulator": "0"})
    domain.create()
    result = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2", 1: "4"}, emulatorpin="0"))
    assert calls == [({0: frozenset({2})}, None, 8)]
    assert result.applied_live == ["vcpu 0: pinned live to 2"]
    assert result.changed


def test_restart_when_a_change_needs_it(domain, monkeypatch):
    monkeypatch.setattr(hypervisor, "pin_live", lambda *a: None)
    domain.create()
    restarts = []
    monkeypatch.setattr(live, "_restart", lambda dom, timeout: restarts.append(dom.name()))
    result = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "2"}, restart=("nic0 queues",)))
    assert restarts == [] and not result.restarted and result.edit.restart_needed == ["nic0 queues"]
    result = live.apply_live(domain.name(), URI, FakeChanges(vcpupins={0: "4"}, restart=("nic0 queues",)),
                             restart=True)
    assert restarts == [domain.name()] and result.restarted


def test_restart_shuts_down_then_starts(domain):
    """The domain really went down and came back: libvirt gives every start a new domain ID (the test
    driver too), so a restart that did nothing keeps the old one."""
    domain.create()
    first_id = domain.ID()
    live._restart(domain, 5)
    assert domain.isActive()
    assert domain.ID() not in (-1, first_id)
    import libvirt

    assert domain.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_BOOTED]


def test_vhost_pin_installs_the_hook_and_undo_removes_it(domain):
    result = live.apply_live(domain.name(), URI, FakeChanges(vhost="2"))
    assert not result.edit.changed and result.saved_original
    assert hook.installed() and hook.domains() == {domain.UUIDString(): {"name": domain.name(), "cpuset": "2"}}
    assert any("pins the vhost threads to 2" in line for line in result.applied_live)
    again = live.apply_live(domain.name(), URI, FakeChanges(vhost="2"))
    assert again.applied_live == []
    line = live.undo(domain.name(), URI)
    assert "hook removed: no domain left" in line
    assert not hook.installed() and hook.domains() == {}


def test_vhost_on_a_remote_uri_is_refused(domain, monkeypatch):
    monkeypatch.setattr(live, "host_cpus", lambda uri: ({0, 2, 4}, 8))
    monkeypatch.setattr(hypervisor, "lookup", lambda uri, name: domain)
    with pytest.raises(UserError, match="needs the domain on this host"):
        live.apply_live(domain.name(), "qemu+ssh://h2/system", FakeChanges(vhost="2"))


def test_a_transient_domain_is_refused():
    name = f"apply-{uuidlib.uuid4().hex[:8]}"
    dom = hypervisor.connect(URI).createXML(domain_xml(name), 0)
    try:
        with pytest.raises(UserError, match="transient"):
            live.apply_live(name, URI, FakeChanges(vcpupins={0: "2"}))
    finally:
        dom.destroy()


def test_original_pins_from_the_xml():
    xml = ("<domain><vcpu cpuset='2-4'>3</vcpu><cputune><vcpupin vcpu='1' cpuset='0'/></cputune></domain>")
    vcpus, emulator = live._original_pins(xml, {0, 2, 4})
    assert vcpus == {0: frozenset({2, 4}), 1: frozenset({0}), 2: frozenset({2, 4})}
    assert emulator == frozenset({2, 4})
