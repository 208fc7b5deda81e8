"""Real trials on the embedded lab: DPDK vswitch (net_vhost) <-> guest forwarder (net_virtio_user).

These check per-queue counters, record fields and cleanup; never a throughput threshold.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from labctl.profile.load import load_profile
from labctl.measure.trial import run_trial
from tests.conftest import DOMAINS, ROOT, default_sigint
from tests.integration.conftest import labctl_processes, needs_dpdk

pytestmark = needs_dpdk
CPUS = frozenset({0, 1})
SHORT = {"workload.duration_s": 2, "workload.warmup_s": 0.5}


def trial(**knobs):
    return run_trial(load_profile(DOMAINS / "quick.yaml", {**SHORT, **knobs}, cpus=None))


@pytest.mark.parametrize("hugepages", [True, False], ids=["hugepages", "no-huge"])
@pytest.mark.parametrize("queues", [1, 2])
def test_trial_record(no_leftovers, hugepages, queues):
    record = trial(**{"guest.hugepages": hugepages, "guest.nics.*.queues": queues, "guest.vcpus": 1})
    assert record.status == "ok", record.error
    m = record.metrics
    # the record: the whole config, the environment, the metrics
    assert record.config["guest.nics.1.queues"] == queues and record.config["guest.hugepages"] is hugepages
    assert record.config["workload.burst"] == 32 and "guest.pinning.vhost" in record.config
    env = record.env
    assert env.lab == "embedded" and env.accel == "none" and env.dpdk and env.kernel and env.cpu_model
    assert env.hugepages is hugepages or any("could not be reserved" in w for w in record.warnings)
    assert env.pins == {"vswitch.rte-worker-1": "0", "guest.rte-worker-1": "1"}
    assert m.rx_packets > 0 and m.mpps > 0 and m.window_s == pytest.approx(2, abs=0.5)
    assert m.mpps == pytest.approx(m.mpps_0to1 + m.mpps_1to0, rel=1e-6)
    assert 0 <= m.loss_ratio < 1 and m.offered_mpps >= m.mpps
    assert set(m.drops) >= {"guest_rx_ring_full", "vswitch_rx_ring_full"}
    assert m.drops["guest_rx_ring_full"] == m.tx_dropped
    # per-queue counters: every queue of every guest port carried packets, shares sum to 1 per port
    for port in (0, 1):
        shares = [v for k, v in m.queue_shares.items() if k.startswith(f"guest.port{port}.")]
        assert len(shares) == queues and sum(shares) == pytest.approx(1.0)
        counts = record.details["per_queue"][f"guest.port{port}"]["q_ipackets"][:queues]
        assert all(c > 0 for c in counts) and sum(counts) == record.details["per_queue"][f"guest.port{port}"]["rx"]
    # the host side is labgen (the default generator): its threads are the generator's
    assert any(k.startswith("guest/") for k in m.cpu) and any(k.startswith("generator/") for k in m.cpu)
    assert m.cycles_per_packet and m.cycles_per_packet > 0
    assert record.details["monitor_cost_pct"] > 0  # measured; benchmarks/fidelity.py reports the figure


def test_modes_and_burst(no_leftovers, tmp_path):
    record = trial(**{"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 8,
                      "workload.noisy.lkup_num_reads": 2, "workload.burst": 64})
    assert record.status == "ok", record.error
    assert record.config["workload.mode"] == "noisy" and record.metrics.rx_packets > 0
    log = (tmp_path / "log" / "quick" / "guest.log").read_text()
    assert "noisy packet forwarding" in log and "packets/burst=64" in log


@pytest.mark.parametrize("mode", ["mac", "io"])
def test_forward_mode_reaches_testpmd(no_leftovers, tmp_path, mode):
    record = trial(**{"workload.mode": mode})
    assert record.status == "ok", record.error
    assert f"{mode} packet forwarding" in (tmp_path / "log" / "quick" / "guest.log").read_text()


def test_rings_follow_queue_size(no_leftovers):
    record = trial(**{"guest.nics.*.rx_queue_size": 1024, "guest.nics.*.tx_queue_size": 512,
                      "workload.rxd": 2048, "workload.txd": 256})
    assert record.status == "ok", record.error
    assert record.details["rings"] == {"rxd": 1024, "txd": 256}


def test_zero_forwarding_is_a_failed_trial(no_leftovers, monkeypatch):
    """A forwarder that never starts forwarding gives a failed trial with a reason, not a zero."""
    from labctl.dpdk import testpmd

    original = testpmd.Testpmd.command

    def command(self, text, timeout_s=15.0):
        if self.role == "guest" and text == "start":
            return ""  # the guest never starts forwarding
        return original(self, text, timeout_s)

    monkeypatch.setattr(testpmd.Testpmd, "command", command)
    record = trial()
    assert record.status == "failed" and "forwarded 0 packets" in record.error


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_trial_cleans_up(no_leftovers, tmp_path, sig):
    env = {**os.environ}
    # a background job of a non-interactive shell (a CI step run with &) ignores SIGINT, and its children
    # inherit that: give labctl the default disposition, as a terminal would
    proc = subprocess.Popen([sys.executable, "-m", "labctl.cli", "run", str(DOMAINS / "quick.yaml"),
                             "--set", "workload.duration_s=30", "--set", "guest.hugepages=true"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.time() + 60
    while time.time() < deadline and len(labctl_processes()) < 2:
        time.sleep(0.2)
    assert len(labctl_processes()) == 2, "the trial did not start its two testpmd processes"
    time.sleep(2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] in ("labctl: interrupted", "labctl: terminated by SIGTERM (cleaned up)")
    # no_leftovers checks processes, sockets, runtime dirs, mounts and the hugepage pool


def test_run_cli_json(no_leftovers, cli):
    code, out, _ = cli("run", str(DOMAINS / "quick.yaml"), "--set", "workload.duration_s=1",
                       "--set", "workload.warmup_s=0", "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "ok" and data["metrics"]["mpps"] > 0
    assert data["config"]["workload.duration_s"] == 1


def test_run_refuses_an_unknown_backend_in_one_line(cli, no_leftovers, tmp_path):
    profile = tmp_path / "xen.yaml"
    profile.write_text((DOMAINS / "quick.yaml").read_text().replace("backend: embedded", "backend: xen", 1))
    code, _, err = cli("run", str(profile))
    assert code == 2
    assert err.strip() == f"{profile}: line 4: backend: 'xen' is not allowed (allowed: 'libvirt' or 'embedded')"


@pytest.mark.parametrize("role", ["generator", "guest"])
def test_a_process_that_dies_at_start_fails_the_trial_and_leaves_nothing(no_leftovers, monkeypatch, role):
    """The guest listens and the host side (labgen) connects: when either one dies at start, the other
    may be left waiting (the guest in accept(), labgen for a socket); the trial still ends, names the
    process that died, and removes everything."""
    import labctl.measure.trial as trial_module
    from labctl.dpdk.testpmd import EalOptions

    original = EalOptions.argv

    def broken(self):
        argv = original(self)
        return argv + ["--no-such-eal-option"] if self.file_prefix.endswith("-gen" if role == "generator" else "-guest") \
            else argv

    monkeypatch.setattr(EalOptions, "argv", broken)
    record = trial_module.run_trial(load_profile(DOMAINS / "quick.yaml", SHORT, cpus=None))
    assert record.status == "failed" and record.metrics.mpps is None  # nothing measured, nothing recorded as 0
    assert f"{role} {'labgen' if role == 'generator' else 'testpmd'} exited" in record.error, record.error
