"""GuestDomain, the booted domain every measured libvirt guest shares: live pins and record warnings."""

from __future__ import annotations

from dataclasses import replace

from labctl.lab.ledger import LabState
from labctl.lab.libvirt import domain as domain_module
from labctl.lab.libvirt.domain import GuestDomain
from labctl.lab.plan import derive
from labctl.profile.load import load_profile
from tests.conftest import CPUS, DOMAINS


def _domain(tmp_path) -> GuestDomain:
    plan = derive(load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=CPUS).profile)
    return GuestDomain(plan, LabState(plan.name, tmp_path / "state.json"), "qemu:///system")


def test_pins_are_applied_live_only_when_they_change(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(domain_module.hypervisor, "pin_live", lambda dom, vcpus, emulator, n: calls.append((vcpus, emulator)))
    guest = _domain(tmp_path)
    pins = replace(guest.plan.pins, vcpus={0: "1"}, emulator="0")
    guest.plan = replace(guest.plan, pins=pins)
    guest.apply_pins()
    guest.apply_pins()  # the same pins: nothing to do
    assert calls == [({0: frozenset({1})}, frozenset({0}))]
    guest.plan = replace(guest.plan, pins=replace(pins, vcpus={0: "0"}))
    guest.apply_pins()
    assert len(calls) == 2 and calls[-1][0] == {0: frozenset({0})}


def test_record_warnings_name_tcg_and_every_negotiated_difference(tmp_path):
    guest = _domain(tmp_path)
    guest.domain_type = "kvm"
    guest.negotiated = [{"index": 0, "differences": []}, {"index": 1, "differences": ["rx_ring 1024 -> 256"]}]
    assert guest.record_warnings() == ["nic1: rx_ring 1024 -> 256"]
    guest.domain_type = "qemu"
    assert "TCG" in guest.record_warnings()[0] and len(guest.record_warnings()) == 2


def test_close_before_boot_does_nothing(tmp_path):
    guest = _domain(tmp_path)
    guest.close()
    assert guest.dom is None and guest.channel is None and guest.thread_pins("guest.vcpu", "qemu.emulator") == {}
