"""The kernel-stack workload on a real multiqueue guest (tap backend, TCG here): tcp_stream with 1 and 4
sessions at 1 and 2 guest queues in one boot, tcp_rr both ways, the sessions x queues pivot, and kill -9
mid-trial then the next run. Asserted: function (every figure present and above zero, the queues the guest
reports, what the record says about TCG and the userspace backend), never a figure's size; nothing is
left behind (the clean_lab fixture: domains, taps, processes, sockets; here also the tagged iperf3/sockperf
processes and listening ports)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from labctl import api
from labctl.lab.kinds import tagged_processes
from labctl.lab.ledger import load_state
from labctl.lab.plan import derive
from labctl.results.store import Store
from labctl.workload.tcp import TOOLS, host_listening_ports
from tests.conftest import ROOT
from tests.integration.conftest import needs_libvirtd

pytestmark = [needs_libvirtd, pytest.mark.skipif(
    any(os.system(f"command -v {tool} >/dev/null") for tool in TOOLS), reason="iperf3 or sockperf not installed")]


def tcp_profile(write_profile, name: str, workload: str, sweep: str = "  {}"):
    return write_profile(f"""name: {name}
backend: libvirt
uri: qemu:///system
guest:
  vcpus: 2
  memory_mib: 512
  nics:
    - {{backend: tap, queues: 2, rx_queue_size: 256, tx_queue_size: 256}}
workload: {{{workload}, duration_s: 2, warmup_s: 1}}
sweep:
{sweep}
""", f"{name}.yaml")


@pytest.fixture
def no_tcp_leftovers():
    """After the test: no process tagged by a test lab, no listening socket on a test lab's ports."""
    labs: list = []
    yield labs.append
    for path in labs:
        tcp = derive(api.load(path).profile).tcp
        assert tagged_processes(tcp.tag) == [], f"{tcp.tag}: processes left running"
        assert not set(range(tcp.port_base, tcp.port_base + 128)) & host_listening_ports(), "sockets left listening"


def test_stream_sessions_by_queues_in_one_boot(clean_lab, no_tcp_leftovers, write_profile, tmp_path):
    path = tcp_profile(write_profile, "it-tcps", "kind: tcp_stream",
                       "  workload.sessions: [1, 4]\n  workload.guest_queues: [1, 2]")
    no_tcp_leftovers(path)
    db = tmp_path / "t.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (4, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
        assert store.run(result.run_id)["info"]["boots"] == 1  # sessions and ethtool -L are live knobs
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
    pivot = api.pivot(db, result.run_id, rows="workload.sessions", by="workload.guest_queues")
    text = api.render_pivot(pivot, "table")
    head = text.splitlines()[0]
    assert "guest_queues=2 Gbit/s %" in head and "guest_queues=2 host SD us/KB %" in head
    assert [row.value for row in pivot.sections[0].rows] == [1, 4]
    assert all(row.changes for row in pivot.sections[0].rows)
    if records[0].env.accel == "tcg":
        assert "TCG" in text
    print("\n" + text)


def test_rr_both_directions(clean_lab, no_tcp_leftovers, write_profile, tmp_path):
    path = tcp_profile(write_profile, "it-tcprr", "kind: tcp_rr, sessions: 2",
                       "  workload.direction: [guest_to_host, host_to_guest]")
    no_tcp_leftovers(path)
    db = tmp_path / "t.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (2, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
    for r in records:
        m = r.metrics
        assert m.transactions_per_s > 0 and m.rr_latency_us > 0
        assert m.service_demand_host_us_per_tx > 0 and m.service_demand_guest_us_per_tx > 0
        assert m.bandwidth_gbps is None and m.sessions_ok == 2
    report = api.render_report(api.report(db, result.run_id), "table")
    assert "median transactions_per_s" in report


def test_kill_9_mid_trial_then_the_next_run_cleans_up(clean_lab, no_tcp_leftovers, write_profile, tmp_path):
    path = tcp_profile(write_profile, "it-tcpkill", "kind: tcp_stream, sessions: 2, direction: guest_to_host")
    no_tcp_leftovers(path)
    tag = derive(api.load(path).profile).tcp.tag
    argv = [sys.executable, "-m", "labctl.cli", "run", str(path), "--set", "workload.duration_s=60"]
    proc = subprocess.Popen(argv, cwd=ROOT, env=os.environ, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            line = proc.stderr.readline()
            if "[measure]" in line or not line:
                break
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
