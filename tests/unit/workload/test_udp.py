"""iperf3's UDP test for a kernel guest's reconf (labctl.workload.udp and labctl.measure.reconf_kernel): the
argument lists, the server's intervals parsed from a recorded test, and the cost computed from intervals whose
answer is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from labctl.errors import WorkloadError
from labctl.measure.live_changes import GuestQueues
from labctl.measure.reconf import ChangeMade
from labctl.measure.reconf_kernel import _fill
from labctl.measure.trial import Trial
from labctl.results.lines import reconf_lines
from labctl.results.record import Environment, TrialRecord
from labctl.workload import udp

RECORDED = Path(__file__).parents[2] / "fixtures" / "udp" / "iperf3-udp-loopback.json"  # 1 s at 1000/s, loopback


def test_argument_lists():
    assert udp.server_argv("10.0.0.2", 5201) == ["iperf3", "-s", "-1", "-B", "10.0.0.2", "-p", "5201", "-i", "0.1",
                                                 "-J"]
    client = udp.client_argv("10.0.0.2", 5201, 20_000, 7)
    assert client[:3] == ["iperf3", "-c", "10.0.0.2"] and client[client.index("-b") + 1] == str(20_000 * 64 * 8)
    assert client[client.index("-l") + 1] == "64" and client[client.index("-t") + 1] == "7"
    assert "--get-server-output" in client and "-u" in client


def test_a_recorded_test_is_parsed():
    test = udp.parse(RECORDED.read_text())
    assert len(test.intervals) == 10 and test.sent == 1000 and test.lost == 0
    assert test.intervals[0].start_s == 0 and test.intervals[0].packets == 101
    assert sum(i.packets for i in test.intervals) == 1000 and test.seconds == pytest.approx(1.0, abs=0.01)
    for text, message in (("garbage", "not JSON"), ('{"error": "unable to connect"}', "unable to connect"),
                          ('{"end": {}}', "no server intervals")):
        with pytest.raises(WorkloadError, match=f"iperf3 UDP: {message}"):
            udp.parse(text)


class KernelLab:
    def environment(self, pins, shared):
        return Environment(host="h", lab="libvirt", accel="tcg")

    def pins(self):
        return {}


def test_the_cost_of_a_queue_change_from_the_servers_intervals():
    """7 s at 10 kpps: warm-up 1 s, the change 2.53 s after the launch (interval 25 of the test, which began
    at the launch); 500 datagrams lost in intervals 25-27, 10 in the no-change window."""
    intervals = [udp.Interval(i / 10, (i + 1) / 10, 1000 - lost, lost, 0.1)
                 for i, lost in enumerate([0] * 15 + [10] + [0] * 9 + [200, 250, 50] + [0] * 42)]
    test = udp.UdpTest(7.0, 70_000, intervals)
    launch = 10_000_000_000
    change = ChangeMade([GuestQueues(2, "52:54:00:00:00:01")])
    change.c0, change.c1 = launch + 2_530_000_000, launch + 2_570_000_000
    change.read_back = {change.actions[0].label: {"ifname": "eth0", "combined": 2, "max_combined": 2}}
    trial = Trial(TrialRecord(config={}), KernelLab(), None, lambda _n: None)  # type: ignore[arg-type]
    _fill(trial, test, 10_000, launch, launch + 7_000_000_000, change, 3.0, 1)
    r, m = trial.record.details["reconf"], trial.record.metrics
    assert r["windows"]["before"] == {"s": 1.5, "offered": 15_000, "lost": 10}
    assert r["windows"]["after"]["lost"] == 500 and r["windows"]["after"]["s"] == 1.5
    assert m.lost_packets == 490 and m.time_lost_s == pytest.approx(0.049)
    after = [o for o in r["outages"] if o["window"] in ("after", "across")]
    assert len(after) == 1 and after[0]["start_s"] == pytest.approx(-0.03) and after[0]["end_s"] == pytest.approx(0.27)
    assert after[0]["lost"] == 500 and after[0]["window"] == "across"  # the interval began 30 ms before the change
    assert r["align_s"] == 0.0 and r["engine"].startswith("iperf3 UDP")
    lines = reconf_lines(trial.record)
    assert "read back: ifname=eth0, combined=2, max_combined=2" in lines[1]
    assert "latency p50/p99/max: before not measured (iperf3 reports jitter)" in lines[-1]
