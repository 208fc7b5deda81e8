"""Every rule in labctl.profile.rules: a passing and a failing case each."""

from __future__ import annotations

import pytest

from labctl.errors import Problem
from labctl.profile.rules import RULES, check_profile
from labctl.profile.schema import Profile

CPUS = frozenset({0, 1})


def problems(data: dict, severity: str = "error") -> list[Problem]:
    profile = Profile.model_validate({"name": "t", **data})
    return [p for p in check_profile(profile, CPUS) if p.severity == severity]


def paths(data: dict, severity: str = "error") -> list[str]:
    return [p.path for p in problems(data, severity)]


def nic(**kw):
    return {"backend": "vhostuser", **kw}


def test_every_rule_has_reason_and_source():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for item in RULES:
        assert len(item.reason) > 30 and item.source, item.id


def test_rule_sources_cite_no_document_the_project_lacks():
    """A rule's source is shown to users: it names a public source or a file of this checkout."""
    import re

    from tests.conftest import ROOT

    for item in RULES:
        for doc in re.findall(r"[\w./-]+\.md\b", item.source):
            assert (ROOT / doc).is_file(), f"{item.id}: {doc}"
        assert "DESIGN" not in item.source, item.id


def test_default_profile_is_clean():
    assert problems({}) == [] and problems({}, "warning") == []


@pytest.mark.parametrize("name", ["a", "l2fwd-vhostuser", "x" * 40, "a1-b2"])
def test_good_names(name):
    assert Profile.model_validate({"name": name}) and not [
        p for p in check_profile(Profile.model_validate({"name": name}), CPUS) if p.path == "name"]


@pytest.mark.parametrize("name", ["", "A", "a_b", "-a", "a-", "x" * 41, "a b", "<x/>", "a'b", "../etc",
                                  "a\nb", "é", "a;rm -rf /", "a$(id)"])
def test_hostile_names(name):
    profile = Profile.model_validate({"name": name})
    found = [p for p in check_profile(profile, CPUS) if p.path == "name"]
    assert len(found) == 1 and "allowed" in found[0].message


@pytest.mark.parametrize("size,ok", [(256, True), (512, True), (1024, True), (128, False), (300, False),
                                     (2048, False), (0, False), (-256, False)])
def test_ring_sizes(size, ok):
    found = paths({"guest": {"nics": [nic(rx_queue_size=size)]}})
    assert (found == []) is ok
    if not ok:
        assert found == ["guest.nics.0.rx_queue_size"]


@pytest.mark.parametrize("backend,ok", [("vhostuser", True), ("tap", False), ("network", False)])
def test_tx_ring_above_256_needs_vhostuser(backend, ok):
    found = problems({"guest": {"nics": [{"backend": backend, "tx_queue_size": 1024}]}})
    assert (found == []) is ok
    if not ok:
        assert found[0].path == "guest.nics.0.tx_queue_size" and "vhostuser" in found[0].message


def test_tx_256_is_fine_on_tap():
    assert problems({"guest": {"nics": [{"backend": "tap", "tx_queue_size": 256, "rx_queue_size": 1024}]}}) == []


@pytest.mark.parametrize("queues,ok", [(1, True), (2, True), (256, True), (0, False), (257, False)])
def test_queue_range(queues, ok):
    found = paths({"guest": {"vcpus": 64, "nics": [nic(queues=queues)]}})
    assert (found == []) is ok


def test_more_queues_than_vcpus_warns():
    warnings = problems({"guest": {"vcpus": 2, "nics": [nic(queues=4)]}}, "warning")
    assert [w.path for w in warnings] == ["guest.nics.0.queues"]
    assert "min(queues, vcpus)" in warnings[0].message


def test_pinning_vcpu_index_must_exist():
    found = problems({"guest": {"vcpus": 2, "pinning": {"vcpus": {2: "0"}}}})
    assert [p.path for p in found] == ["guest.pinning.vcpus.2"] and "0..1" in found[0].message


@pytest.mark.parametrize("cpuset,ok", [("0", True), ("0-1", True), ("1,^1,0", True), ("2", False),
                                       ("0-9", False), ("x", False), ("1-0", False), ("", False), ("^0", False)])
def test_pinned_cpusets_must_exist(cpuset, ok):
    found = paths({"guest": {"pinning": {"emulator": cpuset}}})
    assert (found == []) is ok
    if not ok:
        assert found == ["guest.pinning.emulator"]


def test_shared_poller_warning():
    warnings = paths({"guest": {"pinning": {"vcpus": {0: "1"}, "vhost": "1"}}}, "warning")
    assert warnings == ["guest.pinning.vhost"]
    assert paths({"guest": {"pinning": {"vcpus": {0: "1"}, "vhost": "0"}}}, "warning") == []


def test_embedded_needs_vhostuser():
    found = paths({"backend": "embedded", "guest": {"nics": [{"backend": "tap"}]}})
    assert found == ["guest.nics.0.backend"]


def test_uri_only_for_libvirt_and_well_formed():
    assert paths({"backend": "embedded", "uri": "qemu:///system"}) == ["uri"]
    assert paths({"uri": "qemu:///system"}) == []
    assert paths({"uri": "test:///default"}) == []
    assert paths({"uri": "qemu+ssh://root@lab1/system"}) == []
    assert paths({"uri": "qemu:///system; rm -rf /"}) == ["uri"]
    assert paths({"uri": "http://x/"}) == ["uri"]


@pytest.mark.parametrize("field,value", [("burst", 0), ("burst", 513), ("packet_size", 63),
                                         ("packet_size", 9000), ("rxd", 100), ("txd", 8192),
                                         ("duration_s", 0.5), ("warmup_s", -1)])
def test_workload_ranges(field, value):
    assert paths({"workload": {field: value}}) == [f"workload.{field}"]


def test_noisy_settings_outside_noisy_mode_warn():
    assert paths({"workload": {"noisy": {"lkup_memory_mib": 16}}}, "warning") == ["workload.noisy"]
    assert paths({"workload": {"mode": "noisy", "noisy": {"lkup_memory_mib": 16}}}, "warning") == []
    assert paths({"workload": {"mode": "noisy", "noisy": {"lkup_memory_mib": 5000}}}) == [
        "workload.noisy.lkup_memory_mib"]


def test_guest_size_and_hugepage_alignment():
    assert paths({"guest": {"vcpus": 0}}) == ["guest.vcpus"]
    assert paths({"guest": {"memory_mib": 100}}) == ["guest.memory_mib"]
    assert paths({"guest": {"memory_mib": 1025, "hugepages": True}}) == ["guest.memory_mib"]


def test_nic_count():
    assert paths({"guest": {"nics": []}}) == ["guest.nics"]
    assert paths({"guest": {"nics": [nic()] * 9}}) == ["guest.nics"]


def test_repeat_range():
    assert paths({"repeat": 0}) == ["repeat"] and paths({"repeat": 101}) == ["repeat"]


def test_sweep_values_are_checked_per_configuration():
    found = problems({"guest": {"nics": [{"backend": "tap"}]},
                      "sweep": {"guest.nics.0.tx_queue_size": [256, 1024]}})
    assert len(found) == 1 and "tx_queue_size" in found[0].path and "vhostuser" in found[0].message


def test_sweep_unknown_knob_and_bad_type():
    assert paths({"sweep": {"guest.nics.0.quues": [1]}}) == ["sweep.guest.nics.0.quues"]
    found = problems({"sweep": {"guest.vcpus": ["two"]}})
    assert found and found[0].path == "sweep.guest.vcpus"


def test_sweep_empty_and_duplicate_values():
    assert paths({"sweep": {"workload.burst": []}}) == ["sweep.workload.burst"]
    assert paths({"sweep": {"workload.burst": [32, 32]}}) == ["sweep.workload.burst"]


def test_sweep_too_large():
    values = list(range(1, 66))
    found = problems({"sweep": {"workload.burst": values, "workload.packet_size": list(range(64, 128))}})
    assert [p.path for p in found] == ["sweep"]


def test_sweep_wildcard_sets_every_nic():
    assert problems({"guest": {"nics": [nic(), nic()]}, "sweep": {"guest.nics.*.rx_queue_size": [256, 1024]}}) == []
    found = problems({"guest": {"nics": [nic(), nic()]}, "sweep": {"guest.nics.*.rx_queue_size": [256, 999]}})
    assert len(found) == 2  # both NICs get the bad value


def _one_line(overrides, write_profile=None):
    from labctl.errors import ProfileError
    from labctl.profile.load import load_profile
    from tests.conftest import DOMAINS

    with pytest.raises(ProfileError) as caught:
        load_profile(DOMAINS / "tap-kernel.yaml" if overrides.pop("_tap", False) else DOMAINS / "quick.yaml",
                     overrides, cpus=frozenset({0, 1}))
    return [p.render().split(": ", 1)[1] if p.render().startswith("line ") else p.render() for p in caught.value.problems]


@pytest.mark.parametrize("overrides, expected", [
    ({"_tap": True, "guest.nics.0.model": "e1000", "guest.nics.0.queues": 1, "guest.nics.0.rx_queue_size": 1024},
     ["guest.nics.0.rx_queue_size: e1000 has no virtio ring size (allowed: 256, the default)"]),
    ({"_tap": True, "guest.nics.0.model": "e1000e"},
     ["guest.nics.0.queues: 2 queues on a e1000e NIC (allowed: 1)",
      "guest.nics.0.rx_queue_size: e1000e has no virtio ring size (allowed: 256, the default)"]),
    ({"vswitch.tx_flush_interval": 50},
     ["vswitch.tx_flush_interval: an Open vSwitch knob (allowed: with vswitch.kind ovs-dpdk; leave it out with kind "
      "testpmd)"]),
    ({"_tap": True, "vswitch.kind": "ovs-dpdk"},
     ["guest.nics.0.backend: tap cannot be an OVS-DPDK port here (allowed: vhostuser with vswitch.kind ovs-dpdk)"]),
    ({"_tap": True, "vswitch.kind": "ovs-dpdk", "topology": "vm2vm", "guest.nics.*.backend": "vhostuser",
      "guest.nics.*.queues": 1},
     ["vswitch.kind: vm2vm between libvirt guests runs through the testpmd vswitch (allowed: testpmd with topology "
      "vm2vm and backend libvirt)"]),
    ({"_tap": True, "topology": "vm2vm"},
     ["guest.nics.0.backend: tap: vm2vm guests meet at the vswitch over vhost-user (allowed: vhostuser)"]),
    ({"guest.nics.*.model": "e1000"},
     ["guest.nics.0.model: e1000 cannot run in the embedded lab (allowed: virtio)",
      "guest.nics.1.model: e1000 cannot run in the embedded lab (allowed: virtio)"]),
    ({"topology": "vm2vm", "workload.rate": "1Mpps"},
     ["workload.rate: 1Mpps: vm2vm guests send flat out (allowed: max)"]),
])
def test_invalid_setups_fail_with_one_line_naming_the_field(overrides, expected):
    assert _one_line(overrides) == expected

def tcp_profile(**workload):
    return {"backend": "libvirt", "guest": {"vcpus": 2, "nics": [{"backend": "tap", "queues": 2}]},
            "workload": {"kind": "tcp_stream", **workload}}


def test_tcp_kinds_on_a_tap_or_network_guest():
    assert problems(tcp_profile(sessions=4, guest_queues=2)) == []
    assert problems({**tcp_profile(), "guest": {"nics": [{"backend": "network", "queues": 1}]}}) == []
    assert problems(tcp_profile(kind="tcp_rr", direction="host_to_guest")) == []


def test_tcp_kinds_need_a_kernel_driven_nic():
    found = problems({**tcp_profile(), "guest": {"nics": [nic()]}})
    assert [p.path for p in found] == ["guest.nics.0.backend"] and "tap, network" in found[0].message
    assert paths({**tcp_profile(), "backend": "embedded", "guest": {"nics": [nic()]}}) == \
        ["workload.kind", "guest.nics.0.backend"]
    assert paths({**tcp_profile(), "guest": {"nics": [{"backend": "tap"}, {"backend": "tap"}]}}) == ["guest.nics"]


@pytest.mark.parametrize("sessions,ok", [(1, True), (96, True), (128, True), (0, False), (129, False), (-1, False)])
def test_tcp_sessions_range(sessions, ok):
    found = problems(tcp_profile(sessions=sessions))
    assert (found == []) is ok
    if not ok:
        assert [p.path for p in found] == ["workload.sessions"] and "1..128" in found[0].message


def test_tcp_guest_queues():
    assert paths(tcp_profile(guest_queues=3)) == ["workload.guest_queues"]
    assert paths(tcp_profile(guest_queues=0)) == ["workload.guest_queues"]
    over = {**tcp_profile(guest_queues=2), "guest": {"vcpus": 1, "nics": [{"backend": "tap", "queues": 2}]}}
    assert paths(over, "warning") == ["guest.nics.0.queues", "workload.guest_queues"]


def test_tcp_knobs_warn_on_the_forwarding_workload():
    assert paths({"workload": {"sessions": 4, "guest_queues": 1}}, "warning") == ["workload.sessions",
                                                                               "workload.guest_queues"]
    assert paths({"workload": {"kind": "tcp_stream"}, "backend": "libvirt",
                  "guest": {"nics": [{"backend": "tap"}], "pinning": {"vhost": "0", "vcpus": {0: "0"}}}},
                 "warning") == []  # no vswitch PMD to share a core with


def test_tcp_sweep_is_checked_per_configuration():
    found = problems({**tcp_profile(), "sweep": {"workload.sessions": [1, 4, 200]}})
    assert [p.path for p in found] == ["sweep (workload.sessions=200) workload.sessions"]


@pytest.mark.parametrize("workload,warned", [({}, False), ({"pacing": "absolute"}, False),
                                              ({"pacing": "absolute", "generator": "flowgen"}, True),
                                              ({"generator": "flowgen"}, False),
                                              ({"pacing": "absolute", "kind": "tcp_stream"}, True)])
def test_pacing_is_labgens(workload, warned):
    guest = {"nics": [{"backend": "tap"}]} if workload.get("kind") == "tcp_stream" else {}
    found = paths({"workload": workload, "guest": guest}, "warning")
    assert ("workload.pacing" in found) is warned
    assert not [p for p in paths({"workload": workload, "guest": guest}) if p == "workload.pacing"]



def test_pacing_values_are_checked(write_profile):
    """A bad workload.pacing from a file is one line naming the field, its line and the allowed values."""
    from labctl.errors import ProfileError
    from labctl.profile.load import load_profile

    with pytest.raises(ProfileError) as info:
        load_profile(write_profile("name: x\nworkload:\n  pacing: catch-up\n"), cpus=CPUS)
    [problem] = info.value.problems
    assert (problem.path, problem.line) == ("workload.pacing", 3)
    assert problem.message == "'catch-up' is not allowed (allowed: 'shift' or 'absolute')"


def test_swap_is_how_a_run_reaches_its_configurations_not_a_knob():
    """Rule swap: its values (hotplug, boot) by the schema; a sweep of it refused; on the embedded backend a
    value other than the default is said to do nothing; it is left out of a trial's configuration."""
    from labctl.errors import ProfileError
    from labctl.profile.knobs import flatten
    from labctl.profile.load import validate_data
    from labctl.profile.rules import RULES

    rule = next(r for r in RULES if r.id == "swap")
    assert "PCI hot-plug" in rule.reason and "VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED" in rule.source
    guest = {"name": "sw", "backend": "libvirt", "guest": {"nics": [{"backend": "vhostuser"}] * 2}}
    with pytest.raises(ProfileError, match=r"swap: 'reboot' is not allowed \(allowed: 'hotplug' or 'boot'\)"):
        validate_data({**guest, "swap": "reboot"}, "p", cpus=frozenset({0, 1}))
    with pytest.raises(ProfileError, match=r"sweep.swap: swap is how a run reaches its configurations, not a knob"):
        validate_data({**guest, "sweep": {"swap": ["hotplug", "boot"]}}, "p", cpus=frozenset({0, 1}))
    embedded = validate_data({"name": "sw", "backend": "embedded", "swap": "boot"}, "p", cpus=frozenset({0, 1}))
    assert [w.path for w in embedded.warnings] == ["swap"]
    loaded = validate_data({**guest, "swap": "boot"}, "p", cpus=frozenset({0, 1}))
    assert loaded.profile.swap == "boot" and "swap" not in flatten(loaded.profile.model_dump())
