"""labctl reconf on the real labs: the embedded guest testpmd's rx descriptors changed on its running ports
cost packets in outages after the change; a vCPU pin of a libvirt guest changed live is read back from /proc
with its cost (zero is an answer); the user's own command; a change that needs a restart refused before any
process starts.

Never a throughput or a time: the loads are far below what this host forwards, and what is checked is where
the loss lies (after the change, not before it), that the time lost is lost / rate, what was read back, and
that nothing is left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from labctl.results.store import Store
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import LIBVIRT_URI, labctl_processes, needs_dpdk, needs_libvirtd

pytestmark = needs_dpdk
EMBEDDED = ["--set", "name=it-reconf", "--set", "guest.nics.*.rx_queue_size=1024", "--set", "workload.rxd=256",
            "--set", "workload.warmup_s=1"]


def reconf(cli, db, *args: str) -> dict:
    code, out, err = cli("reconf", *args, "--db", str(db), "--json")
    assert code == 0, err
    return json.loads(out)


def test_rxd_256_to_1024_on_the_running_guest_costs_packets_after_the_change(no_leftovers, cli, tmp_path):
    """testpmd's port stop / config / start under 100 kpps: the port is gone for a while, labgen's frames are
    refused or lost then; the outages lie after the change's start, and the time lost is lost / rate. Another
    program on the host's CPUs can make labgen miss its schedule (the result then says it is not valid): one
    retry for a result the host disturbed."""
    for attempt in range(2):
        db = tmp_path / f"labctl{attempt}.db"
        result = reconf(cli, db, str(DOMAINS / "quick.yaml"), *EMBEDDED, "--change", "workload.rxd=1024", "--rate",
                        "0.1Mpps", "--window", "2")
        if result["valid"]:
            break
    assert result["status"] == "ok" and result["valid"], result["warnings"]
    assert result["lost_packets"] > 0
    assert result["time_lost_s"] == pytest.approx(result["lost_packets"] / result["offered_pps"])
    assert result["offered_pps"] == pytest.approx(100_000)
    after = [o for o in result["outages"] if o["window"] in ("after", "across")]
    assert after, result["outages"]
    bin_s = 0.01  # an outage's start is the send stamp of the last frame through: within a bin of the change
    assert all(-bin_s < o["start_s"] < o["end_s"] < 2.0 for o in after)
    assert sum(o["lost"] + o["refused"] for o in after) >= result["lost_packets"] - \
        result["windows"]["baseline_lost"] - 1  # the outages hold what the window after the change lost
    (read_back,) = result["read_back"].values()
    assert read_back == {"port0.rxd": 1024, "port1.rxd": 1024}
    assert result["change"] == "workload.rxd=1024" and result["latency"]["before"]["count"] > 0
    with Store(db) as store:
        (trial,) = store.trials(result["run_id"])
    assert trial.config["reconf.change"] == "workload.rxd=1024" and trial.config["workload.rxd"] == 256
    assert trial.metrics.lost_packets == result["lost_packets"]


def test_exec_of_true_costs_nothing_beyond_the_no_change_window(no_leftovers, cli, tmp_path):
    """/bin/true changes nothing: the window after it loses no more than the window without it (a host stall
    here can make either lose: one retry for a result the host disturbed)."""
    for attempt in range(2):
        result = reconf(cli, tmp_path / f"exec{attempt}.db", str(DOMAINS / "quick.yaml"), *EMBEDDED, "--exec",
                        "/bin/true", "--rate", "0.1Mpps", "--window", "2")
        if result["lost_packets"] == 0:
            break
    assert result["status"] == "ok" and result["lost_packets"] == 0 and result["time_lost_s"] == 0
    assert result["windows"]["after"]["lost"] <= result["windows"]["before"]["lost"]
    (back,) = result["read_back"].values()
    assert back["exit_code"] == 0 and result["change"] == "--exec /bin/true"


def test_a_change_that_needs_a_restart_exits_2_before_any_process_starts(tmp_path):
    """The NIC's ring is the device's: refused with the knob and the reason, and nothing was recorded in the
    lab's ledger (every process labctl starts is recorded there first), no store made, no process left."""
    env = {**os.environ, "LABCTL_STATE_DIR": str(tmp_path / "state"), "LABCTL_RUN_DIR": str(tmp_path / "run")}
    done = subprocess.run([sys.executable, "-m", "labctl.cli", "reconf", str(DOMAINS / "quick.yaml"), "--set",
                           "name=it-restart", "--change", "guest.nics.*.rx_queue_size=1024", "--rate", "0.1Mpps",
                           "--db", str(tmp_path / "labctl.db")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "--change guest.nics.*.rx_queue_size=1024: cannot be made live here: a NIC's backend, queues and rings are "
        "the device's: set when QEMU (or the embedded guest) starts (allowed: workload.rxd, workload.txd, "
        "workload.burst, guest.pinning.vhost, vswitch.pmd_rxq_rebalance, guest.pinning.vcpus.N, "
        "guest.pinning.emulator, workload.guest_queues, or --exec ARGV; a restart is a new trial: labctl run --set)")
    assert not (tmp_path / "state").exists() and not (tmp_path / "run").exists()
    assert not (tmp_path / "labctl.db").exists() and labctl_processes() == []


@needs_libvirtd
def test_a_vcpu_pin_of_a_libvirt_guest_is_read_back_from_proc_with_its_cost(clean_lab, cli, tmp_path):
    """The appliance guest forwarding at 50 kpps: its vCPU moved from CPU 1 to CPU 0 live (the path labctl
    apply takes); the pin read back from the QEMU thread's affinity; the cost stated, zero included."""
    db = tmp_path / "labctl.db"
    code, out, err = cli("reconf", str(DOMAINS / "guest-vhostuser.yaml"), "--set", "name=it-reconf-pin", "--set",
                         f"uri={LIBVIRT_URI}", "--set", "workload.warmup_s=1", "--change", "guest.pinning.vcpus.0=0",
                         "--rate", "50kpps", "--window", "2", "--db", str(db))
    assert code == 0, err
    assert "read back: vcpu0=0, emulator=1" in out
    with Store(db) as store:
        (trial,) = store.trials()
    (back,) = trial.details["reconf"]["read_back"].values()
    assert back == {"vcpu0": "0", "emulator": "1"} and trial.env.accel in ("tcg", "kvm")
    lost = trial.metrics.lost_packets
    assert lost is not None and lost >= 0
    assert trial.metrics.time_lost_s == pytest.approx(lost / trial.details["reconf"]["offered_pps"])
    if lost == 0:
        assert "a valid answer, the change cost nothing measurable" in out
    else:
        assert f"lost to the change: {lost} packets" in out
