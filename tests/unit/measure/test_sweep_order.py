"""Sweep order: builds alternate within every repeat; a random order is seeded."""

from __future__ import annotations

import pytest

from labctl.errors import KnobError
from labctl.measure.sweep import build_plan


def builds_of(plan):
    return [e["config"]["build"] for e in plan]


def test_builds_alternate_within_every_repeat():
    plan = build_plan({"build": ["base", "patched"], "workload.packet_size": [64, 256]}, repeat=2)
    assert builds_of(plan) == ["base", "patched"] * 4
    assert [e["config"]["workload.packet_size"] for e in plan[:4]] == [64, 64, 256, 256]
    assert [e["seq"] for e in plan] == list(range(8))


def test_builds_alternate_inside_a_domain_group_with_fewest_boots():
    plan = build_plan({"guest.vcpus": [1, 2], "build": ["a", "b", "c"], "workload.burst": [32]}, repeat=2,
                      fewest_boots=True)
    assert builds_of(plan) == ["a", "b", "c", "a", "b", "c", "c", "b", "a", "c", "b", "a"]
    assert [e["config"]["guest.vcpus"] for e in plan] == [1, 1, 1, 2, 2, 2, 2, 2, 2, 1, 1, 1]


def test_a_sweep_without_build_keeps_its_order():
    assert [e["config"] for e in build_plan({"a": [1, 2], "b": ["x", "y"]}, repeat=1)] == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]


def test_random_order_is_seeded_and_shuffles_within_each_repeat():
    sweep = {"build": ["a", "b"], "workload.packet_size": [64, 128, 256, 512]}
    one = build_plan(sweep, repeat=3, order="random", seed=7)
    assert one == build_plan(sweep, repeat=3, order="random", seed=7)
    assert one != build_plan(sweep, repeat=3, order="interleaved")
    for r in range(3):  # every configuration once per repeat
        cycle = [e for e in one if e["repeat_index"] == r]
        assert sorted(map(repr, (e["config"] for e in cycle))) == sorted(
            map(repr, (e["config"] for e in build_plan(sweep, repeat=1))))
    with pytest.raises(KnobError, match=r"--order sorted: not an order \(allowed: interleaved, random\)"):
        build_plan(sweep, repeat=1, order="sorted")


def test_nic_settings_alternate_freely_when_the_guest_swaps_them():
    """With swap hotplug a NIC-only sweep is plain A B A B (one boot, then a swap per trial); with swap boot it
    keeps the fewest-boots order (A B, B A: a boot per change, one saved per cycle)."""
    sweep = {"guest.nics.*.rx_queue_size": [256, 1024]}
    rings = [e["config"]["guest.nics.*.rx_queue_size"] for e in build_plan(sweep, 3, fewest_boots=True)]
    assert rings == [256, 1024, 256, 1024, 256, 1024]
    booted = [e["config"]["guest.nics.*.rx_queue_size"] for e in build_plan(sweep, 3, fewest_boots=True, swap="boot")]
    assert booted == [256, 1024, 1024, 256, 256, 1024]


def test_a_knob_that_needs_a_boot_stays_slowest_beside_swapped_nic_settings():
    plan = build_plan({"guest.nics.*.queues": [1, 2], "guest.vcpus": [1, 2]}, 2, fewest_boots=True)
    vcpus = [e["config"]["guest.vcpus"] for e in plan]
    assert vcpus == [1, 1, 2, 2, 2, 2, 1, 1]  # two boots in the first cycle, one in the next
    queues = [e["config"]["guest.nics.*.queues"] for e in plan]
    assert queues == [1, 2, 1, 2, 2, 1, 2, 1]
