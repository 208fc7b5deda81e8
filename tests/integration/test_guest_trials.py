"""Measured trials on real libvirt guests (the appliance in serve mode), under TCG on this host.

What is asserted is function, never a rate's size: trials are ok, the record carries the rings the
guest's driver negotiated, a rate above zero, the accelerator, and a boot only where a domain knob
changed; kill -9 mid-sweep then --resume runs exactly the missing trials; nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from labctl import api
from labctl.lab.ledger import load_state
from labctl.results.store import Store
from tests.conftest import ROOT
from tests.integration.conftest import (dpdk_processes_of, needs_dpdk, needs_libvirtd, needs_ovs, ovs_daemons,
                                        run_until_measuring, stored_trials)

pytestmark = [needs_dpdk, needs_libvirtd]


def guest_profile(write_profile, name: str, backend: str, sweep: str, repeat: int = 1):
    return write_profile(f"""name: {name}
backend: libvirt
uri: qemu:///system
guest:
  vcpus: 1
  memory_mib: 1024
  nics:
    - {{backend: {backend}, queues: 1, rx_queue_size: 256, tx_queue_size: 256}}
    - {{backend: {backend}, queues: 1, rx_queue_size: 256, tx_queue_size: 256}}
  pinning: {{vcpus: {{0: "1"}}, emulator: "1", vhost: "0"}}
workload: {{duration_s: 2, warmup_s: 1}}
sweep:
{sweep}
repeat: {repeat}
""", f"{name}.yaml")


def negotiated_rx(record) -> set[int]:
    return {nic["negotiated"]["rx_ring"] for nic in record.details["nics"]}


def test_sweep_of_two_ring_sizes_on_a_vhostuser_guest(clean_lab, write_profile, tmp_path):
    path = guest_profile(write_profile, "it-gvhost", "vhostuser", "  guest.nics.*.rx_queue_size: [256, 1024]")
    db = tmp_path / "g.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (2, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
        info = store.run(result.run_id)["info"]
    assert [r.config["guest.nics.0.rx_queue_size"] for r in records] == [256, 1024]
    for record in records:
        asked = record.config["guest.nics.0.rx_queue_size"]
        assert negotiated_rx(record) == {asked}  # what the guest's own driver reports (ethtool -g)
        assert record.metrics.mpps > 0 and record.env.lab == "libvirt" and record.env.accel in ("kvm", "tcg")
        assert record.details["guest_fwd"]
        if record.env.accel == "tcg":
            assert any("TCG" in w for w in record.warnings)
    # one boot: the second ring size is reached by swapping the running guest's NICs (issue 40)
    assert [r.details["boot"]["booted"] for r in records] == [True, False]
    assert [r.details["reached"]["how"] for r in records] == ["boot", "hotplug"]
    assert info["boots"] == 1 and 0 < info["boot_s"] < info["run_s"] and info["swaps"] == 1
    report = api.report(db, result.run_id)
    assert any(note.startswith("guest boots: 1") for note in report.notes)
    advice = api.advise(db, result.run_id)  # two trials, one each: the advisor refuses, as on the embedded lab
    assert advice.recommendations == [] and advice.inconclusive


def test_workload_only_sweep_boots_once(clean_lab, write_profile, tmp_path):
    path = guest_profile(write_profile, "it-gburst", "vhostuser", "  workload.burst: [32, 64]")
    db = tmp_path / "g.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (2, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
        assert store.run(result.run_id)["info"]["boots"] == 1
    assert [r.details["boot"]["booted"] for r in records] == [True, False]  # the forwarder restarted
    assert all(r.metrics.mpps > 0 for r in records)


def test_run_on_a_tap_guest(clean_lab, write_profile):
    path = guest_profile(write_profile, "it-gtap", "tap", "  {}")
    record = api.run(api.load(path))
    assert record.status == "ok", record.error
    assert record.metrics.mpps > 0 and "net_af_packet" in record.details["host_side"]
    assert negotiated_rx(record) == {256}
    assert {nic["negotiated"]["tx_ring"] for nic in record.details["nics"]} == {256}


def test_e1000_guest_forwards_and_the_record_names_the_model(clean_lab, write_profile):
    path = write_profile("""name: it-ge1000
backend: libvirt
uri: qemu:///system
guest:
  vcpus: 1
  memory_mib: 1024
  nics:
    - {backend: tap, model: e1000}
    - {backend: tap, model: e1000}
  pinning: {vcpus: {0: "1"}, emulator: "1", vhost: "0"}
workload: {duration_s: 2, warmup_s: 1}
""", "it-ge1000.yaml")
    record = api.run(api.load(path))
    assert record.status == "ok", record.error
    assert record.metrics.mpps > 0
    assert [nic["requested"]["model"] for nic in record.details["nics"]] == ["e1000", "e1000"]
    assert {nic["negotiated"]["driver"] for nic in record.details["nics"]} == {"e1000"}  # the guest's own driver


def test_vm2vm_between_two_guests(clean_lab, write_profile, tmp_path):
    """Guest A (txonly) -> the testpmd vswitch -> guest B (rxonly): both booted once for a workload sweep,
    the rate what B received, and both domains gone afterwards (clean_lab)."""
    text = (ROOT / "domains" / "guest-vm2vm.yaml").read_text()
    path = write_profile(text.replace("name: guest-vm2vm", "name: it-gv2v").replace("duration_s: 5", "duration_s: 2")
                         .replace("warmup_s: 2", "warmup_s: 1"), "it-gv2v.yaml")
    db = tmp_path / "v.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (2, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
        assert store.run(result.run_id)["info"]["boots"] == 2  # A and B, once
    for record in records:
        m = record.metrics
        assert m.mpps > 0 and m.rx_packets > 0 and m.tx_packets >= m.rx_packets
        assert set(m.drops) == {"guest_a_tx_ring_full", "guest_b_rx_ring_full", "unaccounted"}
        assert record.details["topology"] == "vm2vm" and record.details["nics_b"]
        macs_a = {n["mac"] for n in record.details["nics"]}
        assert macs_a.isdisjoint({n["mac"] for n in record.details["nics_b"]})
        assert {"guest.vcpu0", "guestb.vcpu0"} <= set(record.env.pins)
    assert [r.details["boot"]["booted"] for r in records] == [True, False]


@needs_ovs
def test_guest_behind_ovs_dpdk(clean_lab, write_profile):
    """labgen -> OVS -> a libvirt guest (QEMU the vhost-user server) -> OVS -> labgen: an ok record with
    OVS's PMD statistics, and no OVS daemon of the lab afterwards."""
    text = (ROOT / "domains" / "guest-ovs.yaml").read_text()
    path = write_profile(text.replace("name: guest-ovs", "name: it-govs").replace("duration_s: 5", "duration_s: 2")
                         .replace("warmup_s: 2", "warmup_s: 1"), "it-govs.yaml")
    record = api.run(api.load(path))
    assert record.status == "ok", record.error
    assert record.metrics.mpps > 0 and record.details["vswitch"] == "ovs-dpdk"
    pmd = record.details["ovs"]["pmd"]["pmds"]
    queues = {(q["port"], q["queue"]) for p in pmd.values() for q in p["rxqs"]}
    assert {("vm0", 0), ("vm1", 0), ("gen0", 0), ("gen1", 0)} <= queues
    assert record.metrics.vswitch_cycles_per_packet > 0
    assert ovs_daemons("it-govs") == [] and not load_state("it-govs").resources




def test_kill_9_mid_sweep_then_resume(clean_lab, write_profile, tmp_path):
    path = guest_profile(write_profile, "it-gkill", "vhostuser", "  workload.burst: [32, 64]", repeat=2)
    db = tmp_path / "g.db"
    argv = [sys.executable, "-m", "labctl.cli", "sweep", str(path), "--db", str(db), "--json"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ)
    try:
        deadline = time.time() + 400
        while time.time() < deadline and len(stored_trials(db)) < 1:
            time.sleep(0.2)
        assert len(stored_trials(db)) == 1, "the first trial did not finish"
        time.sleep(3)  # into the second trial: the guest is up, its forwarder running
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert [seq for seq, _ in stored_trials(db)] == [0]
    assert load_state("it-gkill").resources, "the killed sweep left its resources in the ledger"
    resumed = subprocess.run([*argv, "--resume"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                             env=os.environ)
    assert resumed.returncode == 0, resumed.stderr
    rows = stored_trials(db)
    assert sorted(seq for seq, _ in rows) == [0, 1, 2, 3] and all(status == "ok" for _, status in rows)
    assert not load_state("it-gkill").resources and dpdk_processes_of("labctl-it-gkill") == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_guest_trial_cleans_up(clean_lab, write_profile, sig):
    path = guest_profile(write_profile, "it-gsig", "vhostuser", "  {}")
    proc = run_until_measuring([sys.executable, "-m", "labctl.cli", "run", str(path), "--set", "workload.duration_s=60"])
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], err
    assert not load_state("it-gsig").resources
    # clean_lab checks domains, processes, taps and sockets
