"""The change set from --set knobs, a tuned profile and advice (labctl.domain_edit.changes)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from labctl.domain_edit.changes import (ALL, Changes, HugepagesChange, NicChange, changes_from_advice,
                                        changes_from_knobs, changes_from_profile)
from labctl.errors import KnobError, UserError


def test_knobs_build_one_frozen_change_set():
    c = changes_from_knobs(["guest.nics.*.queues=4", "guest.nics.1.rx_queue_size=1024", "guest.pinning.vcpus.0=2",
                            "guest.pinning.emulator=0-1", "guest.hugepage_size=1G"])
    assert c.nics == {ALL: NicChange(queues=4), 1: NicChange(rx_queue_size=1024)}
    assert c.vcpupins == {0: "2"} and c.emulatorpin == "0-1"
    assert c.hugepages == HugepagesChange(1048576)
    with pytest.raises(AttributeError):
        c.emulatorpin = "3"  # frozen
    assert changes_from_knobs(c.knobs()) == c


def test_nic_mac_addresses_one_interface():
    c = changes_from_knobs(["guest.nics.*.queues=2"], nic_mac="52:54:00:AA:BB:CC")
    assert c.nics == {"52:54:00:aa:bb:cc": NicChange(queues=2)}
    with pytest.raises(KnobError, match=r"allowed with --nic: guest.nics.\*.X"):
        changes_from_knobs(["guest.nics.0.queues=2"], nic_mac="52:54:00:aa:bb:cc")
    with pytest.raises(KnobError, match="not a MAC address"):
        changes_from_knobs(["guest.nics.*.queues=2"], nic_mac="nope")


@pytest.mark.parametrize("knob, message", [
    ("guest.nics.*.mtu=9000", "not a knob labctl apply sets (allowed: guest.nics.{N|*}.queues"),
    ("workload.burst=64", "workload.burst: not a knob labctl apply sets"),
    ("guest.nics.*.rx_queue_size=300", "300 is not allowed (allowed: 256, 512, 1024)"),
    ("guest.nics.*.queues=0", "(allowed: 1..256)"),
    ("guest.nics.x.queues=2", "not an interface index"),
    ("guest.pinning.vcpus.0=1-", "bad cpuset"),
    ("guest.hugepages=false", "never removes them (allowed: true)"),
    ("guest.hugepage_size=3M", "allowed: 2M, 1G"),
    ("guest.nics.*.queues", "expected KNOB=VALUE"),
])
def test_bad_knobs_are_one_line_user_errors(knob, message):
    with pytest.raises(UserError) as info:
        changes_from_knobs([knob])
    assert message in str(info.value) and "\n" not in str(info.value)
    assert info.value.exit_code == 2


def test_a_tuned_profile_gives_its_nics_pins_and_hugepages(write_profile):
    path = write_profile("name: t\nguest:\n  vcpus: 2\n  hugepages: true\n  nics:\n"
                         "    - {backend: vhostuser, queues: 2, rx_queue_size: 1024, tx_queue_size: 1024}\n"
                         "  pinning: {vcpus: {0: 0, 1: 1}, emulator: '0'}\n")
    c = changes_from_profile(path)
    assert c.nics == {0: NicChange(2, 1024, 1024)}
    assert c.vcpupins == {0: "0", 1: "1"} and c.emulatorpin == "0" and c.hugepages == HugepagesChange()


def test_advice_keeps_domain_knobs_and_says_what_it_left_out():
    rec = lambda knob, value, settings=None, condition=None: SimpleNamespace(  # noqa: E731
        knob=knob, value=value, settings=settings or {}, condition=condition or {})
    advice = SimpleNamespace(recommendations=[
        rec("guest.nics.*.rx_queue_size", 1024),
        rec("workload.burst", 64),
        rec("guest.nics.*.queues", 2, condition={"guest.pinning": "split"}),
        rec("guest.pinning", "split", settings={"guest.pinning.vcpus.0": "1", "guest.pinning.emulator": None}),
    ])
    c, notes = changes_from_advice(advice)
    assert c == Changes(nics={ALL: NicChange(rx_queue_size=1024)}, vcpupins={0: "1"})
    assert any(n.startswith("left out workload.burst = 64") for n in notes)
    assert any("recommended only with guest.pinning=split" in n for n in notes)
    assert any("guest.pinning.emulator: the advice leaves it unpinned" in n for n in notes)
