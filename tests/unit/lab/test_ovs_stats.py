"""Parsing OVS 3.1's PMD and port statistics, on output captured on this project's machines
(tests/fixtures/ovs/capture.py made most of them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labctl.lab.ovs import stats

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ovs"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_busy_pmd():
    parsed = stats.parse_pmd_stats(fixture("pmd-stats-show-1pmd.txt"))
    pmd = parsed["pmds"]["0"]
    assert pmd["numa_id"] == 0 and pmd["core_id"] == 0
    assert pmd["packets_received"] == 33655136 and pmd["simple_match_hits"] == 33655136
    assert pmd["idle_cycles"] == 2326243750 and pmd["idle_cycles_pct"] == 17.82
    assert pmd["processing_cycles"] == 10728000338 and pmd["processing_cycles_pct"] == 82.18
    assert pmd["avg_cycles_per_packet"] == 387.88 and pmd["avg_processing_cycles_per_packet"] == 318.76
    assert pmd["avg_packets_per_output_batch"] == 32.0
    assert pmd["idle_share"] == pytest.approx(2326243750 / (2326243750 + 10728000338))
    assert parsed["main"]["packets_received"] == 0 and parsed["main"]["avg_cycles_per_packet"] is None


def test_idle_pmd_has_no_per_packet_figures():
    pmd = stats.parse_pmd_stats(fixture("pmd-stats-show-idle.txt"))["pmds"]["0"]
    assert pmd["packets_received"] == 0 and pmd["idle_cycles_pct"] == 100.0
    assert pmd["avg_cycles_per_packet"] is None and pmd["avg_processing_cycles_per_packet"] is None
    assert pmd["idle_share"] == 1.0


def test_two_pmds():
    pmds = stats.parse_pmd_stats(fixture("pmd-stats-show-2pmd.txt"))["pmds"]
    assert sorted(pmds) == ["0", "1"]
    assert pmds["1"]["megaflow_hits"] == 31 and pmds["1"]["miss_with_success_upcall"] == 1
    assert pmds["0"]["avg_processing_cycles_per_packet"] == 5486.23


def test_rxq_usage_and_window():
    rxq = stats.parse_pmd_rxq(fixture("pmd-rxq-show-1pmd-5s.txt"))
    assert rxq["window_s"] == 5
    assert rxq["pmds"]["0"] == {"numa_id": 0, "isolated": False, "overhead_pct": 4, "rxqs": [
        {"port": "p0", "queue": 0, "enabled": True, "usage_pct": 40},
        {"port": "p1", "queue": 0, "enabled": True, "usage_pct": 40}]}


def test_rxq_not_avail_and_pinning():
    idle = stats.parse_pmd_rxq(fixture("pmd-rxq-show-idle.txt"))
    assert idle["window_s"] == 60 and idle["pmds"]["1"]["overhead_pct"] is None
    assert idle["pmds"]["1"]["rxqs"] == [{"port": "p1", "queue": 0, "enabled": True, "usage_pct": None}]
    pinned = stats.parse_pmd_rxq(fixture("pmd-rxq-show-2pmd-2q-pinned-5s.txt"))["pmds"]
    assert pinned["0"]["isolated"] is True and pinned["1"]["isolated"] is True
    assert [(q["port"], q["queue"]) for q in pinned["0"]["rxqs"]] == [("p0", 0), ("p1", 1)]
    assert [(q["port"], q["queue"]) for q in pinned["1"]["rxqs"]] == [("p0", 1), ("p1", 0)]
    partly = stats.parse_pmd_rxq(fixture("pmd-rxq-show-2pmd-pinned.txt"))["pmds"]
    assert partly["0"]["rxqs"][0]["usage_pct"] == 1 and partly["0"]["overhead_pct"] == 5


def test_merge_puts_rx_queues_under_their_pmd():
    merged = stats.merge_pmd(stats.parse_pmd_stats(fixture("pmd-stats-show-2pmd.txt")),
                             stats.parse_pmd_rxq(fixture("pmd-rxq-show-2pmd-2q-pinned-5s.txt")))
    assert merged["rxq_window_s"] == 5 and sorted(merged["pmds"]) == ["0", "1"]
    assert merged["pmds"]["0"]["packets_received"] == 1302112 and len(merged["pmds"]["0"]["rxqs"]) == 2
    assert merged["pmds"]["1"]["isolated"] is True and "packets_received" in merged["main"]


def test_dump_ports_counters_named_as_the_interface_table():
    ports = stats.parse_dump_ports(fixture("dump-ports-2q.txt"))
    assert set(ports) == {"LOCAL", "p0", "p1"}
    p0 = ports["p0"]
    assert p0["rx_packets"] > 0 and p0["tx_packets"] > 0 and p0["rx_dropped"] == 0 and p0["tx_dropped"] == 0
    assert "rx_errors" not in p0  # '?' : the vhost port has no such counter
    assert p0["rx_1_to_64_packets"] == p0["rx_packets"]
    assert p0["ovs_tx_failure_drops"] == 0 and "ovs_tx_retries" in p0
    assert p0["rx_q0_good_packets"] + p0["rx_q1_good_packets"] == p0["rx_packets"]
    assert ports["LOCAL"]["collisions"] == 0 and ports["LOCAL"]["rx_errors"] == 0
    one = stats.parse_dump_ports(fixture("dump-ports-1q.txt"))["p0"]
    assert one["rx_packets"] == 97769152 and one["tx_q0_good_packets"] == one["tx_packets"]


def test_interfaces_json():
    interfaces = stats.parse_interfaces(fixture("interfaces-2q.json"))
    p0 = interfaces["p0"]
    assert p0["status"]["status"] == "connected" and p0["status"]["mode"] == "client"
    assert p0["link_state"] == "up" and isinstance(p0["statistics"]["rx_packets"], int)


def test_counter_delta():
    assert stats.counter_delta({"a": 10, "b": 3}, {"a": 4, "b": 5}) == {"a": 6, "b": 3}  # b was reset
    assert stats.counter_delta({"a": 1}, None) == {"a": 1}
