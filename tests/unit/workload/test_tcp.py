"""The kernel-stack workload's pieces: argument lists, the iperf3/sockperf/proc parsers on recorded output,
netperf's service-demand arithmetic on known /proc/stat deltas, and the metrics of a trial."""

from __future__ import annotations

import json
import types

import pytest

from labctl.host.processes import TAG_VARIABLE, tagged_processes
from labctl.host.threads import qemu_thread_kind
from labctl.lab.kinds import TaggedKind
from labctl.lab.ledger import Resource
from labctl.workload import tcp
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "tcp"


# --- argument lists ------------------------------------------------------------------------------------


def test_stream_argument_lists():
    assert tcp.server_argv("tcp_stream", "198.18.0.1", 20001) == ["iperf3", "-s", "-1", "-B", "198.18.0.1", "-p", "20001"]
    assert tcp.client_argv("tcp_stream", "198.18.0.1", 20001, 2, 11) == [
        "iperf3", "-c", "198.18.0.1", "-p", "20001", "-t", "11", "-O", "2", "-i", "0", "--json"]


def test_rr_argument_lists():
    assert tcp.server_argv("tcp_rr", "198.18.0.2", 20003) == [
        "sockperf", "server", "--tcp", "--uc-reuseaddr", "-i", "198.18.0.2", "-p", "20003"]
    assert tcp.client_argv("tcp_rr", "198.18.0.2", 20003, 2, 11) == [
        "sockperf", "ping-pong", "--tcp", "-i", "198.18.0.2", "-p", "20003", "-t", "13", "--mps=max", "--no-rdtsc"]


def test_argument_lists_pass_the_appliances_check():
    """The guest's RUN refuses any argument with a character outside [A-Za-z0-9_.=:/+-] (init.sh)."""
    import re

    allowed = re.compile(r"^[A-Za-z0-9_.=:/+-]+$")
    for kind in ("tcp_stream", "tcp_rr"):
        for argv in (tcp.server_argv(kind, "198.18.0.2", 20000), tcp.client_argv(kind, "198.18.0.1", 20000, 1, 3)):
            assert argv[0] in tcp.TOOLS and all(allowed.match(a) for a in argv)


def test_session_seconds_cover_the_window_and_a_tail():
    plan = types.SimpleNamespace(warmup_s=1.5, duration_s=10.0)
    assert tcp.session_seconds(plan) == (2, 10 + tcp.TAIL_S)


def test_run_sessions_puts_clients_on_the_sending_side():
    calls = []
    lab = types.SimpleNamespace(start_servers=lambda side, ports, argvs: calls.append(("s", side, ports, argvs)),
                                start_clients=lambda side, ports, argvs: calls.append(("c", side, ports, argvs)))
    plan = types.SimpleNamespace(kind="tcp_stream", ports=(20000, 20001), clients_in_guest=True)
    tcp.run_sessions(lab, plan, 1, 3, "198.18.0.1", "198.18.0.2")
    assert [(c[0], c[1]) for c in calls] == [("s", "host"), ("c", "guest")]
    assert calls[0][3][1][4] == "198.18.0.1" and calls[1][3][0][2] == "198.18.0.1"  # guest clients -> host servers
    calls.clear()
    plan.clients_in_guest = False
    tcp.run_sessions(lab, plan, 1, 3, "198.18.0.1", "198.18.0.2")
    assert [(c[0], c[1]) for c in calls] == [("s", "guest"), ("c", "host")] and calls[1][3][0][2] == "198.18.0.2"


# --- parsers ------------------------------------------------------------------------------------------


def test_parse_iperf3_client_report():
    result = tcp.parse_iperf3((FIXTURES / "iperf3-client.json").read_text(), 5201)
    assert result.ok and result.port == 5201
    assert result.bits_per_second == pytest.approx(20295912565.377674)  # end.sum_received
    assert result.bytes == 7612595959 and result.retransmits == 6  # end.sum_sent.retransmits


def test_parse_iperf3_errors():
    refused = tcp.parse_iperf3((FIXTURES / "iperf3-refused.json").read_text())
    assert not refused.ok and "Connection refused" in refused.error
    garbage = tcp.parse_iperf3("iperf3: error - unable to connect\n")
    assert not garbage.ok and "no JSON" in garbage.error
    assert not tcp.parse_iperf3(json.dumps({"end": {}})).ok


def test_parse_sockperf_ping_pong():
    result = tcp.parse_sockperf((FIXTURES / "sockperf-ping-pong.txt").read_text())
    assert result.ok
    assert result.transactions_per_s == pytest.approx(114745 / 0.831)  # [Valid Duration]
    assert result.latency_us is not None and result.latency_us > 0  # avg-latency, colour codes stripped


def test_parse_sockperf_failure():
    text = "sockperf: ERROR: [fd=3] Can`t bind socket\nsockperf: cleanupAfterLoop() exit\n"
    result = tcp.parse_sockperf(text)
    assert not result.ok and "ERROR" in result.error


def test_parse_proc_stat_and_busy_cores():
    a = tcp.parse_proc_stat("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n")
    # 300 ticks busy (user 100, system 150, softirq 30, steal 20) of 1000 on 2 CPUs: 0.6 cores
    b = tcp.parse_proc_stat("cpu  200 0 250 1500 0 0 30 20 90 0\ncpu0 0\ncpu1 0\n")
    assert a.cpus == 2 and a.busy == 200 and a.total == 1000
    assert tcp.busy_cores(a, b) == pytest.approx(300 / 1000 * 2)
    assert tcp.busy_cores(b, b) == 0.0
    with pytest.raises(ValueError):
        tcp.parse_proc_stat("intr 1 2 3\n")


def test_guest_time_is_not_counted_twice():
    """guest and guest_nice are already inside user and nice (proc(5))."""
    a = tcp.parse_proc_stat("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0\n")
    b = tcp.parse_proc_stat("cpu  50 0 0 50 0 0 0 0 50 0\ncpu0\n")
    assert tcp.busy_cores(a, b) == pytest.approx(0.5)


def test_service_demand_arithmetic():
    # netperf: SD = util x CPUs x 1e6 / (units / divisor / elapsed)
    # 0.5 cores busy while 100 MiB/s flowed = 102400 KB/s -> 0.5e6 / 102400 us per KB
    assert tcp.service_demand(0.5, 100 * 2**20, 1024) == pytest.approx(0.5e6 / 102400)
    # 1.5 cores for 30000 transactions/s -> 50 us per transaction
    assert tcp.service_demand(1.5, 30000, 1) == pytest.approx(50.0)
    assert tcp.service_demand(1.0, 0, 1) is None


def test_known_stat_deltas_to_service_demand():
    """From two /proc/stat snapshots and a stream rate to microseconds per KB, by hand."""
    a = tcp.parse_proc_stat("cpu  1000 0 1000 8000 0 0 0 0 0 0\ncpu0\ncpu1\ncpu2\ncpu3\n")
    b = tcp.parse_proc_stat("cpu  1100 10 1300 8560 0 10 20 0 0 0\ncpu0\ncpu1\ncpu2\ncpu3\n")
    cores = tcp.busy_cores(a, b)  # busy 440 of 1000 ticks on 4 CPUs = 1.76 cores
    assert cores == pytest.approx(1.76)
    bps = 8e9  # 1e9 bytes/s = 976562.5 KB/s
    assert tcp.service_demand(cores, bps / 8, 1024) == pytest.approx(1.76e6 / (1e9 / 1024))


def test_parse_guest_counters_recorded_from_a_tcg_guest():
    data = json.loads((FIXTURES / "guest-stat-a.json").read_text())
    counters = tcp.GuestCounters.parse(data)
    assert counters.cpu.cpus == 2
    assert set(counters.interrupts) == {"rxq0", "txq0", "rxq1", "txq1"}  # not virtio0-config or virtio1
    assert counters.ethtool["tx_queue_1_packets"] > 0 and "NIC statistics" not in counters.ethtool
    assert "RetransSegs" in counters.tcp and counters.tcp["MaxConn"] == -1


def test_parse_interrupts_sums_cpus():
    text = ("           CPU0       CPU1\n 25:       4823          1   PCI-MSI 32769-edge      virtio0-input.0\n"
            " 26:         10         20   PCI-MSI 32770-edge      virtio0-output.0\n"
            " 24:          0          0   PCI-MSI 32768-edge      virtio0-config\n")
    assert tcp.parse_interrupts(text) == {"rxq0": 4824, "txq0": 30}


def test_listening_ports():
    text = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
            "   0: 0100007F:4E21 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
            "   1: 0100007F:4E22 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2\n")
    assert tcp.listening_ports(text) == {20001}


def test_qemu_thread_kinds():
    assert qemu_thread_kind("CPU 1/TCG") == "vcpu1" and qemu_thread_kind("CPU 0/KVM") == "vcpu0"
    assert qemu_thread_kind("qemu-system-x86", main=True) == "emulator"
    assert qemu_thread_kind("IO mon_iothread") == "io" and qemu_thread_kind("vhost-4242") == "vhost"
    assert qemu_thread_kind("worker") == "worker" and qemu_thread_kind("call_rcu") == "other"


# --- a trial's metrics ------------------------------------------------------------------------------


def _counters(t: float, host: str, guest: str) -> tcp.Counters:
    return tcp.Counters(t, tcp.parse_proc_stat(host), tcp.GuestCounters.parse(json.loads((FIXTURES / guest).read_text())))


def test_stream_metrics_from_recorded_counters():
    a = _counters(10.0, "cpu  0 0 0 1000 0 0 0 0 0 0\ncpu0\ncpu1\n", "guest-stat-a.json")
    b = _counters(13.0, "cpu  300 0 300 1400 0 0 0 0 0 0\ncpu0\ncpu1\n", "guest-stat-b.json")
    results = [tcp.SessionResult(20000, True, bits_per_second=1e9, retransmits=2),
               tcp.SessionResult(20001, True, bits_per_second=5e8, retransmits=1),
               tcp.SessionResult(20002, False, "iperf3: unable to connect")]
    threads = [types.SimpleNamespace(role="qemu", name="CPU 0/TCG", tid=2, pid=1, cpu_pct=80.0),
               types.SimpleNamespace(role="qemu", name="qemu-system-x86", tid=1, pid=1, cpu_pct=20.0),
               types.SimpleNamespace(role="host-server.20000", name="iperf3", tid=9, pid=9, cpu_pct=3.0),
               types.SimpleNamespace(role="host-server.20001", name="iperf3", tid=8, pid=8, cpu_pct=4.0)]
    m, details = tcp.tcp_metrics("tcp_stream", "guest_to_host", results, a, b, tcp.thread_cpu(threads), 2)
    assert m.bandwidth_gbps == pytest.approx(1.5) and m.retransmits == 3 and m.sessions_ok == 2
    assert m.host_cpu_cores == pytest.approx(600 / 1000 * 2)
    guest = tcp.busy_cores(a.guest.cpu, b.guest.cpu)
    assert m.guest_cpu_cores == pytest.approx(guest) and guest > 0
    kb_per_s = 1.5e9 / 8 / 1024
    assert m.service_demand_host_us_per_kb == pytest.approx(1.2e6 / kb_per_s)
    assert m.service_demand_guest_us_per_kb == pytest.approx(guest * 1e6 / kb_per_s)
    assert m.transactions_per_s is None and m.window_s == pytest.approx(3.0)
    assert m.cpu == {"host.iperf3": 7.0, "qemu.emulator": 20.0, "qemu.vcpu0": 80.0}
    assert set(m.queue_shares) == {"guest.txq0", "guest.txq1"}  # the guest sends: its tx queues
    assert sum(m.queue_shares.values()) == pytest.approx(1.0)
    assert details["per_queue"]["txq1"]["packets"] > 0 and "interrupts" in details["per_queue"]["rxq0"]
    assert len(details["sessions"]) == 3


def test_rr_metrics():
    a = _counters(0.0, "cpu  0 0 0 1000 0 0 0 0 0 0\ncpu0\n", "guest-stat-a.json")
    b = _counters(2.0, "cpu  100 0 100 1800 0 0 0 0 0 0\ncpu0\n", "guest-stat-b.json")
    results = [tcp.SessionResult(1, True, transactions_per_s=1000.0, latency_us=400.0),
               tcp.SessionResult(2, True, transactions_per_s=1500.0, latency_us=300.0)]
    m, _ = tcp.tcp_metrics("tcp_rr", "host_to_guest", results, a, b, {}, 1)
    assert m.transactions_per_s == 2500.0 and m.rr_latency_us == 350.0
    assert m.service_demand_host_us_per_tx == pytest.approx(0.2 * 1e6 / 2500)
    assert m.bandwidth_gbps is None and m.service_demand_host_us_per_kb is None
    assert m.retransmits == b.guest.tcp["RetransSegs"] - a.guest.tcp["RetransSegs"]
    assert all(k.startswith("guest.rxq") for k in m.queue_shares)


# --- the ledger's tagged kind ----------------------------------------------------------------------


def test_tagged_kind_stops_only_its_tag(tmp_path):
    import os
    import subprocess

    tag = f"labctl-unit-{os.getpid()}"
    mine = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_VARIABLE: tag})
    other = subprocess.Popen(["sleep", "30"], env={**os.environ, TAG_VARIABLE: tag + "-other"})
    try:
        resource = Resource("tagged", tag, {"names": ["sleep"]})
        assert [p.pid for p in tagged_processes(tag, ["sleep"])] == [mine.pid]
        assert TaggedKind().verify(resource)
        TaggedKind().remove(resource)
        mine.wait(5)
        assert not TaggedKind().verify(resource) and other.poll() is None
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()


def test_trial_summary_of_a_stream_trial():
    from labctl.analysis.renderers import trial_summary
    from labctl.results.record import Environment, Metrics, TrialRecord

    record = TrialRecord(config={}, env=Environment(lab="libvirt", accel="tcg", virtio_backend="userspace"),
                         metrics=Metrics(bandwidth_gbps=2.5, retransmits=3, window_s=5.0, sessions_ok=4,
                                         service_demand_host_us_per_kb=6.4, service_demand_guest_us_per_kb=6.9,
                                         host_cpu_cores=1.9, guest_cpu_cores=2.0, guest_queues_enabled=2,
                                         cpu={"qemu.vcpu0": 76.0, "qemu.io": 0.0}),
                         details={"tcp": {"sessions": 4, "direction": "guest_to_host", "guest_queues_requested": 2},
                                  "per_queue": {"txq0": {"packets": 10, "interrupts": 4}}})
    text = trial_summary(record)
    assert "bandwidth: 2.500 Gbit/s (4/4 sessions guest_to_host, retransmits 3" in text
    assert "host 6.400 us/KB, guest 6.900 us/KB" in text and "qemu.vcpu0 76%" in text and "qemu.io" not in text
    assert "txq0 10 pkts 4 irqs" in text and "virtio backend userspace" in text
