"""labctl apply on the real libvirtd (qemu:///system, QEMU under TCG here), with the real XML core
(``labctl.domain_edit.edit``): through ``labctl apply`` (the CLI, in-process), ``labctl.api`` and
``labctl.domain_edit.live``.

* Inactive domains defined from a virt-install-style XML (two virtio NICs on the default network, a
  foreign metadata namespace): apply queues, rings and pins; ``dumpxml --inactive`` differs from before in
  exactly those; a second apply changes nothing; undo; ``dumpxml --inactive`` is as before. The vhost pin
  installs labctl's qemu hook, and undo removes it.
* One running domain for the module (SeaBIOS with no boot disk: QEMU runs its vCPU threads, which is all
  live pinning and ``--verify`` need, and nothing is booted, to spare the shared CPUs): ``labctl apply``
  pins it live (read back from libvirt and from /proc), lists the ring change as needing a restart,
  ``--verify`` reads QEMU's configured rings, ``--undo`` restores the XML and puts the pins back. Every
  test leaves it as it found it (checked when the module ends).
* ``--restart`` on a domain of its own (a restart is not undone by ``--undo``): the domain went down and
  came back (a new domain ID, a new QEMU process) with the new rings, and undo restores the XML.

What a test leaves behind (saved originals, hook entries) is read before it is removed, so that check
can fail; domains are removed by the fixtures, also when a test fails.
"""

from __future__ import annotations

import difflib
import os
import uuid as uuidlib

import psutil
import pytest

from labctl import api
from labctl.domain_edit import hook, live, originals, verify
from labctl.domain_edit.changes import changes_from_knobs, changes_from_settings
from labctl.errors import UserError
from labctl.host.cpuset import format_cpuset
from labctl.host.threads import qemu_pid, qemu_thread_pins
from labctl.lab.libvirt import hypervisor
from tests.integration.conftest import LIBVIRT_URI, needs_libvirtd

pytestmark = needs_libvirtd
URI = LIBVIRT_URI

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
    <boot dev='hd'/>
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
#: what the real editor says a ring change needs (``labctl.domain_edit.edit``)
RESTART_WHY = "(the device is created with them when the domain starts)"

needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


def unique() -> str:
    return f"labctl-it-apply-{uuidlib.uuid4().hex[:8]}"


def domain_xml(name: str, nic_template: str, macs: list[str]) -> str:
    nics = "\n    ".join(nic_template.format(mac=mac) for mac in macs)
    return VIRT_INSTALL.format(name=name, uuid=uuidlib.uuid4(), nics=nics)


def left_behind() -> list[str]:
    """Saved originals and hook entries still there (what undo removes)."""
    found = [f"the saved original of {o.name}" for o in originals.kept()]
    if hook.installed() or hook.domains():
        found.append(f"the vhost hook ({sorted(hook.domains())})")
    return found


@pytest.fixture(autouse=True)
def nothing_left(monkeypatch, tmp_path):
    """The test's own hook directory; after the test (its domains are removed by then, which leaves
    originals and hook entries alone) what it left behind is read, removed, then asserted empty."""
    monkeypatch.setenv("LABCTL_HOOK_DIR", str(tmp_path / "hooks" / "qemu.d"))
    yield
    left = left_behind()
    for original in originals.kept():
        originals.remove(original.uuid)
    for uuid in hook.domains():
        hook.remove(uuid)
    assert left == [], "a test left these behind"


@pytest.fixture
def defined():
    """Define (and with ``start=True`` start) a domain from a virt-install-style XML; destroyed and
    undefined at the end."""
    made: list[str] = []

    def define(nic_template: str, macs: list[str], start: bool = False):
        name = unique()
        made.append(name)
        return hypervisor.define_and_start(URI, domain_xml(name, nic_template, macs), start=start)

    yield define
    for name in made:
        hypervisor.remove_domain(URI, name)
        assert hypervisor.lookup(URI, name) is None


@pytest.fixture(scope="module")
def running():
    """The module's running domain (two user NICs, 2 vCPUs, no boot disk); its inactive XML must be as
    defined when the module ends: each test undoes what it applied."""
    name = unique()
    dom = hypervisor.define_and_start(URI, domain_xml(name, USER_NIC, ["52:54:00:5a:00:04", "52:54:00:5a:00:05"]))
    try:
        as_defined = live.inactive_xml(dom)
        yield dom
        assert live.inactive_xml(dom) == as_defined, "a test left the module's domain changed"
    finally:
        hypervisor.remove_domain(URI, name)


def changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def sets(*knobs: str) -> list[str]:
    return [arg for knob in knobs for arg in ("--set", knob)]


def test_define_apply_dumpxml_then_undo(defined, no_leftovers, cli):
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:01", "52:54:00:5a:00:02"])
    name = dom.name()
    before = live.inactive_xml(dom)
    knobs = sets("guest.nics.0.queues=2", "guest.nics.0.rx_queue_size=1024", "guest.nics.0.tx_queue_size=256",
                 "guest.nics.1.queues=2", "guest.nics.1.rx_queue_size=512",
                 "guest.pinning.vcpus.0=0", "guest.pinning.vcpus.1=1", "guest.pinning.emulator=0")
    code, out, err = cli("apply", name, *knobs)
    assert code == 0, err
    assert out.splitlines()[-1] == "changed: 1"  # the XML; the domain is not running: no live pin
    assert not [line for line in out.splitlines() if line.startswith("live:")]
    assert originals.load(dom.UUIDString()).xml == before  # kept before the define
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
    code, out, err = cli("apply", name, *knobs)
    assert code == 0 and out.splitlines()[-2:] == ["unchanged: the domain already has these settings", "changed: 0"]
    assert live.inactive_xml(dom) == after
    code, out, err = cli("apply", "--undo", name)
    assert (code, out.splitlines()) == (0, [f"{name}: original XML restored", "changed: 1"]), err
    assert live.inactive_xml(dom) == before
    assert originals.load(dom.UUIDString()) is None


def test_the_vhost_pin_installs_the_hook_and_undo_removes_it(defined, no_leftovers):
    """Through the api, as the TUI and the playbooks call it: rings on every NIC, pins, the vhost hook."""
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:07", "52:54:00:5a:00:08"])
    before = live.inactive_xml(dom)
    knobs = ["guest.nics.*.queues=2", "guest.nics.*.rx_queue_size=1024", "guest.pinning.vcpus.0=0",
             "guest.pinning.emulator=0", "guest.pinning.vhost=0"]
    result = api.apply_domain(dom.name(), URI, knobs)
    assert result.edit.changed and result.saved_original and hook.installed()
    assert hook.domains() == {dom.UUIDString(): {"name": dom.name(), "cpuset": "0"}}
    after = live.inactive_xml(dom)
    added = sorted(line for line in changed_lines(before, after) if line.startswith("+"))
    assert added == sorted(["+  <cputune>", "+    <vcpupin vcpu='0' cpuset='0'/>", "+    <emulatorpin cpuset='0'/>",
                            "+  </cputune>"] + ["+      <driver queues='2' rx_queue_size='1024'/>"] * 2), added
    assert not [line for line in changed_lines(before, after) if line.startswith("-")]
    again = api.apply_domain(dom.name(), URI, knobs)
    assert not again.edit.changed and not again.changed
    assert api.undo_domain(dom.name(), URI) == (f"{dom.name()}: original XML restored; vhost hook entry removed "
                                                "(hook removed: no domain left)")
    assert live.inactive_xml(dom) == before
    assert not hook.installed() and hook.domains() == {}


def test_bad_input_on_the_real_host_writes_nothing(defined, no_leftovers, cli):
    dom = defined(NETWORK_NIC, ["52:54:00:5a:00:03"])
    before = live.inactive_xml(dom)
    online, _n = live.host_cpus(URI)
    missing = max(online) + 1
    # the XML core refuses it, with the host's CPUs that libvirt reports
    refusal = f"guest.pinning.vcpus.0: CPU(s) {missing} are not on this host (allowed: {format_cpuset(online)})"
    with pytest.raises(UserError) as info:
        live.apply_live(dom.name(), URI, changes_from_knobs([f"guest.pinning.vcpus.0={missing}"]))
    assert str(info.value) == refusal
    code, out, err = cli("apply", dom.name(), *sets(f"guest.pinning.vcpus.0={missing}"))
    assert code == 2 and out == "" and err.strip().splitlines() == [refusal], err
    with pytest.raises(UserError, match="no such domain"):
        live.apply_live(unique(), URI, changes_from_knobs(["guest.pinning.vcpus.0=0"]))
    with pytest.raises(UserError, match="nothing to undo"):
        live.undo(dom.name(), URI)
    assert live.inactive_xml(dom) == before and originals.kept() == []


@needs_two_cpus
def test_running_domain_pinned_live_verified_and_undone(running, no_leftovers, cli):
    name, dom = running.name(), running
    before = live.inactive_xml(dom)
    pid = qemu_pid(name)
    assert pid is not None
    everywhere = format_cpuset(live.host_cpus(URI)[0])
    unpinned = {"vcpus": {0: everywhere, 1: everywhere}, "emulator": everywhere}
    assert hypervisor.domain_pins(dom) == unpinned and qemu_thread_pins(pid) == unpinned
    knobs = sets("guest.nics.0.rx_queue_size=1024", "guest.pinning.vcpus.0=1", "guest.pinning.vcpus.1=1",
                 "guest.pinning.emulator=0")
    code, out, err = cli("apply", name, *knobs, "--dry-run")
    assert code == 0 and out.splitlines()[-2:] == ["dry run: nothing changed", "changed: 1"], (out, err)
    assert live.inactive_xml(dom) == before and hypervisor.domain_pins(dom) == unpinned
    assert originals.kept() == []

    code, out, err = cli("apply", name, *knobs)
    assert code == 0, err
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("live:")] == [
        "live: vcpu 0: pinned live to 1", "live: vcpu 1: pinned live to 1", "live: emulator: pinned live to 0"]
    assert [line for line in lines if line.startswith("needs a restart")] == [
        f"needs a restart (--restart): interface 0 (user, 52:54:00:5a:00:04, model virtio): rx_queue_size {RESTART_WHY}"]
    assert lines[-1] == "changed: 4"  # the XML and three live pins
    pinned = {"vcpus": {0: "1", 1: "1"}, "emulator": "0"}
    assert hypervisor.domain_pins(dom) == pinned  # libvirt's view
    assert qemu_thread_pins(pid) == pinned  # the threads' affinity in /proc

    code, out, err = cli("apply", "--verify", name)
    assert code == 0, err
    nic0, mismatch, nic1 = out.splitlines()
    # the ring needs a restart: the XML asks 1024, QEMU was started with its default 256
    assert nic0.startswith("nic0 user      net0  queues 1->1  rx 1024->256  tx 256->256")
    assert verify.CONFIGURED_NOTE in nic0
    assert mismatch.strip() == "rx_ring: 256 entries, not the 1024 asked for"
    assert nic1.startswith("nic1 user      net1  queues 1->1  rx 256->256  tx 256->256")

    code, out, err = cli("apply", name, *knobs)
    assert code == 0 and out.splitlines()[-1] == "changed: 0", out
    first_id = hypervisor.lookup(URI, name).ID()
    again = live.apply_live(name, URI, changes_from_knobs(knobs[1::2]), restart=True, shutdown_timeout_s=5)
    assert not again.restarted  # nothing changed in the XML: no restart for nothing
    assert hypervisor.lookup(URI, name).ID() == first_id and qemu_pid(name) == pid

    code, out, err = cli("apply", "--undo", name)
    assert (code, out.splitlines()) == (0, [f"{name}: original XML restored; 3 live pin(s) put back", "changed: 1"]), err
    assert live.inactive_xml(dom) == before
    assert hypervisor.domain_pins(dom) == unpinned and qemu_thread_pins(pid) == unpinned
    assert qemu_pid(name) == pid  # all of it live: the same QEMU throughout


@needs_two_cpus
def test_restart_applies_the_rings(defined, no_leftovers):
    """``--restart``: the domain goes down (ACPI first; SeaBIOS does not power off, so destroyed after the
    timeout) and starts again with the new XML: a new domain ID and QEMU process, QEMU's ring 1024. Undo
    restores the XML; the running device keeps its ring until the next start."""
    dom = defined(USER_NIC, ["52:54:00:5a:00:06"], start=True)
    name = dom.name()
    before = live.inactive_xml(dom)
    first_id, first_pid = hypervisor.lookup(URI, name).ID(), qemu_pid(name)
    assert first_pid is not None
    [line] = verify.verify(name, URI)
    assert line.startswith("nic0 user      net0  queues 1->1  rx 256->256")
    result = live.apply_live(name, URI, changes_from_settings({"guest.nics.0.rx_queue_size": 1024}), restart=True,
                             shutdown_timeout_s=3)
    assert result.restarted and dom.isActive()
    assert result.edit.restart_needed == [f"interface 0 (user, 52:54:00:5a:00:06, model virtio): rx_queue_size {RESTART_WHY}"]
    assert hypervisor.lookup(URI, name).ID() not in (-1, first_id)  # libvirt numbers every start anew
    new_pid = qemu_pid(name)
    assert new_pid not in (None, first_pid) and not psutil.pid_exists(first_pid)
    [line] = verify.verify(name, URI)
    assert line.startswith("nic0 user      net0  queues 1->1  rx 1024->1024")
    assert live.undo(name, URI) == f"{name}: original XML restored"
    assert live.inactive_xml(dom) == before
    line, mismatch = verify.verify(name, URI)  # the XML as before; QEMU as it was started
    assert line.startswith("nic0 user      net0  queues 1->1  rx 256->1024")
    assert mismatch.strip() == "rx_ring: 1024 entries, not the 256 asked for"
