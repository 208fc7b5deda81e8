"""The kernel-stack workload on a real multiqueue guest (tap backend, TCG here): tcp_stream with 1 and 4
sessions at 1 and 2 guest queues in one boot, tcp_rr both ways, the sessions x queues pivot, and kill -9
mid-trial then the next run. Asserted: function (every figure present and above zero, the queues the guest
reports, what the record says about TCG and the userspace backend), never a figure's size; nothing is
left behind (the clean_lab fixture: domains, taps, processes, sockets; here also the tagged iperf3/sockperf
processes and listening ports)."""

from __future__ import annotations

import os
import signal
import sys

import pytest
import yaml

from labctl import api
from labctl.host.processes import tagged_processes
from labctl.lab.ledger import load_state
from labctl.lab.plan import derive
from labctl.results.store import Store
from labctl.workload.tcp import TOOLS, host_listening_ports
from tests.integration.conftest import needs_libvirtd, run_until_measuring

pytestmark = [needs_libvirtd, pytest.mark.skipif(
    any(os.system(f"command -v {tool} >/dev/null") for tool in TOOLS), reason="iperf3 or sockperf not installed")]


@pytest.fixture
def tcp_lab(write_profile):
    """Writes a kernel-stack test profile (a 2-vCPU guest, one 2-queue tap NIC, 2 s windows) and, after
    the test, asserts that no process tagged by it and no socket on its ports is left."""
    paths = []

    def make(name: str, workload: dict, sweep: dict | None = None):
        profile = {"name": name, "backend": "libvirt", "uri": "qemu:///system",
                   "guest": {"vcpus": 2, "memory_mib": 512,
                             "nics": [{"backend": "tap", "queues": 2, "rx_queue_size": 256, "tx_queue_size": 256}]},
                   "workload": {**workload, "duration_s": 2, "warmup_s": 1}, "sweep": sweep or {}}
        paths.append(write_profile(yaml.safe_dump(profile), f"{name}.yaml"))
        return paths[-1]

    yield make
    for path in paths:
        tcp = derive(api.load(path).profile).tcp
        assert tagged_processes(tcp.tag) == [], f"{tcp.tag}: processes left running"
        assert not set(range(tcp.port_base, tcp.port_base + 128)) & host_listening_ports(), "sockets left listening"


def swept(path, db, trials: int):
    """A sweep of the profile at ``path`` into ``db``: (its run id, its records, its run's info); every trial ok."""
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (trials, 0)
    with Store(db) as store:
        return result.run_id, store.trials(result.run_id), store.run(result.run_id)["info"]


def test_stream_sessions_by_queues_in_one_boot(clean_lab, tcp_lab, tmp_path):
    path = tcp_lab("it-tcps", {"kind": "tcp_stream"}, {"workload.sessions": [1, 4], "workload.guest_queues": [1, 2]})
    db = tmp_path / "t.db"
    run_id, records, info = swept(path, db, 4)
    assert info["boots"] == 1  # sessions and ethtool -L are live knobs
    for r in records:
        m = r.metrics
        assert m.bandwidth_gbps > 0 and m.service_demand_host_us_per_kb > 0 and m.service_demand_guest_us_per_kb > 0
        assert m.sessions_ok == r.config["workload.sessions"]
        assert m.guest_queues_enabled == r.config["workload.guest_queues"]  # read back from the guest
        assert len(r.details["sessions"]) == r.config["workload.sessions"]
        assert {"txq0", "rxq0"} <= set(r.details["per_queue"]) and "interrupts" in r.details["per_queue"]["txq0"]
        assert any(k.startswith("qemu.vcpu") for k in m.cpu) and "qemu.emulator" in m.cpu
        assert r.env.virtio_backend in ("userspace", "vhost-net")
        if r.env.virtio_backend == "userspace":
            assert any("userspace virtio-net backend" in w for w in r.warnings)
        if r.env.accel == "tcg":
            assert any("TCG" in w for w in r.warnings)
    pivot = api.pivot(db, run_id, rows="workload.sessions", by="workload.guest_queues")
    text = api.render_pivot(pivot, "table")
    head = text.splitlines()[0]
    assert "guest_queues=2 Gbit/s %" in head and "guest_queues=2 host SD us/KB %" in head
    assert [row.value for row in pivot.sections[0].rows] == [1, 4]
    assert all(row.changes for row in pivot.sections[0].rows)
    if records[0].env.accel == "tcg":
        assert "TCG" in text
    print("\n" + text)


def test_rr_both_directions(clean_lab, tcp_lab, tmp_path):
    path = tcp_lab("it-tcprr", {"kind": "tcp_rr", "sessions": 2},
                   {"workload.direction": ["guest_to_host", "host_to_guest"]})
    db = tmp_path / "t.db"
    run_id, records, _info = swept(path, db, 2)
    for r in records:
        m = r.metrics
        assert m.transactions_per_s > 0 and m.rr_latency_us > 0
        assert m.service_demand_host_us_per_tx > 0 and m.service_demand_guest_us_per_tx > 0
        assert m.bandwidth_gbps is None and m.sessions_ok == 2
    report = api.render_report(api.report(db, run_id), "table")
    assert "median transactions_per_s" in report


def test_kill_9_mid_trial_then_the_next_run_cleans_up(clean_lab, tcp_lab):
    path = tcp_lab("it-tcpkill", {"kind": "tcp_stream", "sessions": 2, "direction": "guest_to_host"})
    tag = derive(api.load(path).profile).tcp.tag
    proc = run_until_measuring([sys.executable, "-m", "labctl.cli", "run", str(path), "--set", "workload.duration_s=60"])
    try:
        assert tagged_processes(tag), "the host's iperf3 servers were not running mid-trial"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert load_state("it-tcpkill").resources, "the killed run left its resources in the ledger"
    assert tagged_processes(tag)  # orphans: found by their tag, not by their name
    record = api.run(api.load(path))  # removes what the killed run left, then measures
    assert record.status == "ok", record.error
    assert any("left by an earlier labctl" in w for w in record.warnings)
    assert record.metrics.bandwidth_gbps > 0
    assert not load_state("it-tcpkill").resources


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_mid_tcp_trial_cleans_up(clean_lab, tcp_lab, sig):
    path = tcp_lab("it-tcpsig", {"kind": "tcp_rr", "sessions": 2, "direction": "host_to_guest"})
    tag = derive(api.load(path).profile).tcp.tag
    proc = run_until_measuring([sys.executable, "-m", "labctl.cli", "run", str(path), "--set", "workload.duration_s=60"])
    assert tagged_processes(tag), "the host's sockperf clients were not running mid-trial"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig], err
    assert not load_state("it-tcpsig").resources
    # tcp_lab: no tagged process, no listening port; clean_lab: domains, taps, sockets
