"""The setups engineers post numbers from, on the embedded lab: pvp through labctl's own OVS-DPDK, and
VM-to-VM (txonly -> vswitch -> rxonly) through the testpmd vswitch and through OVS. Rates are never
asserted beyond "above zero"; OVS's PMD statistics and the clean-up are."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labctl import api
from labctl.lab.ledger import load_state
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import needs_dpdk, needs_ovs, ovs_daemons

pytestmark = needs_dpdk
SHORT = {"workload.duration_s": 2, "workload.warmup_s": 0.5}


@needs_ovs
def test_pvp_through_ovs_dpdk(no_leftovers):
    record = api.run(api.load(DOMAINS / "quick.yaml", {**SHORT, "name": "it-ovs", "vswitch.kind": "ovs-dpdk",
                                                       "vswitch.tx_flush_interval": 50, "workload.rate": "200kpps"}))
    assert record.status == "ok", record.error
    assert record.metrics.mpps > 0 and record.details["vswitch"] == "ovs-dpdk"
    pmd = record.details["ovs"]["pmd"]["pmds"]
    assert pmd and any(p.get("packets_received", 0) > 0 for p in pmd.values())
    assert record.metrics.vswitch_cycles_per_packet > 0 and 0 <= record.metrics.vswitch_idle_share <= 1
    queues = {(q["port"], q["queue"]) for p in pmd.values() for q in p["rxqs"]}
    assert {("vm0", 0), ("vm1", 0), ("gen0", 0), ("gen1", 0)} <= queues
    assert ovs_daemons("it-ovs") == [] and not load_state("it-ovs").resources


@pytest.mark.parametrize("kind", ["testpmd", pytest.param("ovs-dpdk", marks=needs_ovs)])
def test_vm2vm_on_the_embedded_lab(no_leftovers, kind):
    record = api.run(api.load(DOMAINS / "quick.yaml", {**SHORT, "name": "it-v2v", "topology": "vm2vm",
                                                       "vswitch.kind": kind}))
    assert record.status == "ok", record.error
    m = record.metrics
    assert m.mpps > 0 and m.rx_packets > 0 and m.tx_packets >= m.rx_packets
    assert set(m.drops) == {"guest_a_tx_ring_full", "guest_b_rx_ring_full", "unaccounted"}
    assert record.details["topology"] == "vm2vm" and record.details["guest_a_fwd"]
    if kind == "ovs-dpdk":
        assert record.details["ovs"]["pmd"]["pmds"]
    assert ovs_daemons("it-v2v") == []


@needs_ovs
def test_sigterm_mid_ovs_trial_leaves_nothing(no_leftovers):
    proc = subprocess.Popen([sys.executable, "-m", "labctl.cli", "run", str(DOMAINS / "quick.yaml"),
                             "--set", "name=it-ovsterm", "--set", "vswitch.kind=ovs-dpdk",
                             "--set", "workload.duration_s=30"],
                            cwd=ROOT, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "[measure]" in line or not line:
            break
    if not any("[measure]" in line for line in lines):  # the trial ended before measuring: say why
        out, err = proc.communicate(timeout=60)
        raise AssertionError(f"no [measure] phase; stderr: {''.join(lines)}{err} stdout: {out}")
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert ovs_daemons("it-ovsterm") == [] and not load_state("it-ovsterm").resources
    run_dir = Path(os.environ["LABCTL_RUN_DIR"])
    assert not (run_dir / "ovs-it-ovsterm").exists()
