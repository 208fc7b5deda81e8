"""Tests of the pinning plan (advisor.pinning) on hand-made host topologies."""

from __future__ import annotations

import json

import pytest

from advisor.pinning import apply_plan, pinning_plan
from labctl.errors import PlanError
from labctl.host.cpuset import parse_cpuset
from labctl.host.facts import HostFacts, HugepagePool, KvmStatus
from labctl.profile.load import load_profile
from labctl.profile.rules import check_profile
from labctl.profile.schema import Profile

RX = "guest.nics.*.rx_queue_size"
QUEUES = "guest.nics.*.queues"


# ------------------------------------------------------------------------------------------------
# pinning plan


def facts(cpus, nodes, siblings=None, isolated=(), hugepages=()) -> HostFacts:
    return HostFacts(
        cpu_model="Test CPU", cpus=list(cpus), numa_nodes=nodes,
        smt_siblings=siblings or {c: [c] for c in cpus}, isolated=list(isolated),
        hugepages=list(hugepages), kvm=KvmStatus(True, ["kvm", "kvm_intel"], True, "kvm_intel loaded"),
        kernel="6.1", versions={},
    )


def two_node_smt(isolated=(2, 3, 10, 11)) -> HostFacts:
    # 2 nodes x 4 cores x 2 threads: node 0 = cores 0-3 (threads 0-3, 8-11), node 1 = cores 4-7
    siblings = {c: sorted({c % 8, c % 8 + 8}) for c in range(16)}
    nodes = {0: [0, 1, 2, 3, 8, 9, 10, 11], 1: [4, 5, 6, 7, 12, 13, 14, 15]}
    return facts(range(16), nodes, siblings, isolated, [HugepagePool(2048, 1024, 1024)])


def vhostuser_profile(vcpus=2) -> Profile:
    return Profile.model_validate({"name": "p", "backend": "libvirt", "guest": {"vcpus": vcpus}})


def test_plan_on_a_two_node_smt_host_with_isolated_cpus():
    plan = pinning_plan(two_node_smt(), vhostuser_profile())
    node_cpus = {0, 1, 2, 3, 8, 9, 10, 11}
    used = set(plan.housekeeping) | set(plan.pmd) | set(plan.vcpus)
    assert plan.node == 0 and used <= node_cpus
    assert plan.pmd == [2]  # an isolated whole core
    assert 10 in plan.idle  # its SMT sibling stays idle
    assert not set(plan.pmd) & (set(plan.vcpus) | set(plan.housekeeping))
    assert len(set(plan.vcpus)) == 2
    assert not set(plan.housekeeping) & {2, 3, 10, 11}  # housekeeping never on isolated CPUs
    assert plan.emulator == plan.housekeeping
    knobs = plan.knobs()
    assert knobs["guest.pinning.vhost"] == "2"
    assert knobs["guest.nics.0.tx_queue_size"] == 1024 and knobs[RX] == 1024 and knobs[QUEUES] == 2
    assert all(s.reason for s in plan.settings)
    assert "available" in plan.hugepages
    tuned = Profile.model_validate(apply_plan(vhostuser_profile().model_dump(), plan))
    errors = [p for p in check_profile(tuned, frozenset(range(16))) if p.severity == "error"]
    assert errors == []
    json.dumps(plan.to_dict())


def test_plan_prefers_the_node_with_the_isolated_cpus():
    plan = pinning_plan(two_node_smt(isolated=(5, 6, 7, 13, 14, 15)), vhostuser_profile())
    assert plan.node == 1
    assert set(plan.pmd + plan.vcpus) <= {5, 6, 7, 13, 14, 15}


def test_plan_falls_back_to_smt_siblings_with_a_warning():
    # one node, 3 cores x 2 threads: housekeeping core + PMD core leave one core for 2 vCPUs
    siblings = {0: [0, 3], 3: [0, 3], 1: [1, 4], 4: [1, 4], 2: [2, 5], 5: [2, 5]}
    plan = pinning_plan(facts(range(6), {0: list(range(6))}, siblings), vhostuser_profile())
    assert plan.level == 2
    assert sorted(plan.vcpus) == [2, 5] and plan.pmd == [1]
    assert any("SMT siblings" in w for w in plan.warnings)


def test_impossible_request_is_a_named_plan_error():
    host = facts(range(8), {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]})
    with pytest.raises(PlanError) as err:
        pinning_plan(host, vhostuser_profile(vcpus=4))
    message = str(err.value)
    assert "\n" not in message
    assert "needs 5 CPUs on one NUMA node for 1 vswitch PMD + 4 vCPUs" in message
    assert "node 0 has 4 (0-3), node 1 has 4 (4-7)" in message
    assert "never splits" in message


def test_two_cpu_host_plans_one_pmd_and_one_vcpu_with_a_warning():
    host = facts([0, 1], {0: [0, 1]})
    profile = load_profile("domains/quick.yaml", cpus=frozenset({0, 1})).profile
    plan = pinning_plan(host, profile)
    assert plan.pmd == [0] and plan.vcpus == [1] and plan.housekeeping == [0]
    assert plan.level == 4
    assert any("no CPU is left for housekeeping" in w for w in plan.warnings)
    with pytest.raises(PlanError, match="needs 3 CPUs on one NUMA node for 1 vswitch PMD \\+ 2 vCPUs"):
        pinning_plan(host, vhostuser_profile(vcpus=2))


def test_plan_on_this_host_for_the_quick_profile():
    from labctl.host.facts import gather

    here = gather()
    profile = load_profile("domains/quick.yaml", cpus=frozenset(here.cpus)).profile
    if len(here.cpus) < 2:
        pytest.skip("needs 2 CPUs")
    plan = pinning_plan(here, profile)
    assert len(plan.pmd) == 1 and len(plan.vcpus) == 1 and plan.pmd != plan.vcpus
    assert set(parse_cpuset(plan.knobs()["guest.pinning.vhost"])) <= set(here.cpus)


def test_tap_profile_plan_keeps_tx_at_256_and_gives_the_emulator_a_cpu():
    profile = load_profile("domains/tap-kernel.yaml", cpus=frozenset(range(8))).profile
    plan = pinning_plan(facts(range(8), {0: list(range(8))}), profile)
    assert plan.pmd == []
    assert plan.knobs()["guest.nics.0.tx_queue_size"] == 256
    assert plan.emulator != plan.housekeeping and not set(plan.emulator) & set(plan.vcpus)
