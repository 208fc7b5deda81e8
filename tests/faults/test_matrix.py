"""The fault matrix, reduced for CI: SIGINT, SIGTERM and kill -9 at each phase of run and sweep, a few of
tune and ndr, one of a libvirt guest's ``up`` and one of a user's image guest killed while it boots, two of ``run`` with an OVS-DPDK vswitch (skipped
where ovs-vswitchd-dpdk is not installed) and three of ``labctl fleet sweep`` over a local inventory
(the controller signalled while the host's labctl measures, and SIGTERM in the controller's merge;
skipped without ansible-runner). ``python benchmarks/faults.py`` runs every case.

After each fault the next labctl (``sweep --resume``, or ``labctl down``) leaves nothing of the lab,
the store is whole, and a resumed sweep has exactly its plan (see tests/faults/harness.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.faults.harness import Case, applicable, fleet_installed, ovs_installed, run_case

needs_dpdk = pytest.mark.skipif(shutil.which("dpdk-testpmd") is None, reason="dpdk-testpmd not installed")
pytestmark = [pytest.mark.integration, pytest.mark.faults, needs_dpdk]

REDUCED = [Case(c, s, p) for c, s, p in [
    ("run", "INT", "setup"), ("run", "TERM", "warm-up"), ("run", "KILL", "measure"), ("run", "KILL", "teardown"),
    ("sweep", "KILL", "setup"), ("sweep", "TERM", "measure"), ("sweep", "INT", "teardown"),
    ("sweep", "KILL", "commit"), ("sweep", "TERM", "commit"),
    ("tune", "KILL", "measure"), ("ndr", "TERM", "measure"), ("ndr", "KILL", "commit"),
]]
# a user's image guest killed while it boots (its agent not yet answering): `labctl down` removes the
# domain, the overlay and the sockets; every other image case runs in `python benchmarks/faults.py`
GUEST = [Case("up", "KILL", "setup"), Case("image", "KILL", "setup")]
OVS = [Case("ovs-run", "KILL", "measure"), Case("ovs-run", "TERM", "teardown")]
needs_ovs = pytest.mark.skipif(not ovs_installed(), reason="openvswitch-switch-dpdk not installed")
# the controller stopped by SIGTERM (the reaper tears the host's lab down) and by kill -9 (the next fleet
# sweep stops the job it left) while the host's labctl measures
FLEET = [Case("fleet", "TERM", "measure"), Case("fleet", "KILL", "measure"), Case("fleet", "TERM", "commit")]
needs_fleet = pytest.mark.skipif(not fleet_installed(), reason="ansible-runner / ansible-core not installed")


def _check(case: Case, tmp_path: Path) -> None:
    assert applicable(case) is None
    outcome = run_case(case, tmp_path, 0)
    assert outcome.injected, outcome.detail
    assert outcome.survived, outcome.detail
    assert outcome.leaks == []
    assert outcome.lost == 0


@pytest.mark.parametrize("case", REDUCED, ids=lambda c: c.key)
def test_fault(case, tmp_path):
    _check(case, tmp_path)


@pytest.mark.skipif(not Path("/run/libvirt/libvirt-sock").exists(), reason="libvirtd is not running")
@pytest.mark.parametrize("case", GUEST, ids=lambda c: c.key)
def test_guest_fault(case, tmp_path):
    _check(case, tmp_path)


@needs_ovs
@pytest.mark.parametrize("case", OVS, ids=lambda c: c.key)
def test_ovs_fault(case, tmp_path):
    _check(case, tmp_path)


@needs_fleet
@pytest.mark.parametrize("case", FLEET, ids=lambda c: c.key)
def test_fleet_fault(case, tmp_path):
    _check(case, tmp_path)
