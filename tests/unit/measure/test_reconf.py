"""A reconf trial's arithmetic (labctl.measure.reconf): the windows, the cost net of the no-change window, the
time lost, the outages from the change's start, latency before and after; on a synthetic trial whose answer is
known (a 1 GHz TSC, CLOCK_MONOTONIC 4 s ahead of it, bins of 10 ms, 1000 frames offered a bin)."""

from __future__ import annotations

import pytest

from labctl.dpdk.labgen_replies import Gap
from labctl.host.monitor import MonitorReport
from labctl.measure.live_changes import ExecCommand, GuestPins
from labctl.measure.reconf import _fill, describe_change
from labctl.results.lines import reconf_lines
from tests.live_data import STATS, SynthGen, change_at, gap, trial

def test_the_cost_is_net_of_the_no_change_window_and_the_time_lost_is_lost_over_rate():
    # the change at TSC 3.003e9 (bin 200); an outage from +2 ms to +52 ms loses 5000 frames (bins 200..205);
    # the no-change window (bins 100..199) lost 5 frames in bin 150
    lost = {150: 5, 200: 500, 201: 1000, 202: 1000, 203: 1000, 204: 1000, 205: 500}
    gaps = [gap("refused", 3.00499e9, 3.05501e9, 2500, p) for p in (0, 1)] + [gap("lost", 2.5e9, 2.50006e9, 5, 3)]
    t = trial()
    _fill(t, SynthGen(lost, gaps), STATS, None, change_at(3.003e9), 1.0, MonitorReport())
    r, m = t.record.details["reconf"], t.record.metrics
    assert r["windows"]["before"] == {"s": pytest.approx(1.0), "bins": [100, 200], "offered": 100_000, "lost": 5}
    assert r["windows"]["after"] == {"s": pytest.approx(1.0), "bins": [200, 300], "offered": 100_000, "lost": 5000}
    assert m.lost_packets == 4995 and r["offered_pps"] == 100_000
    assert m.time_lost_s == pytest.approx(4995 / 100_000)  # CSIT's implied time lost
    after = [o for o in r["outages"] if o["window"] == "after"]
    before = [o for o in r["outages"] if o["window"] == "before"]
    assert len(after) == 1 and len(before) == 1 and m.outage_count == 1
    assert after[0]["start_s"] == pytest.approx(0.00199) and after[0]["end_s"] == pytest.approx(0.05201)
    assert after[0]["refused"] == 5000 and after[0]["streams"] == 2
    assert m.longest_outage_s == pytest.approx(0.05002)
    assert before[0]["start_s"] == pytest.approx(-0.503) and before[0]["lost"] == 5
    assert r["latency"]["after_from_s"] == pytest.approx(0.05201)  # after the last outage
    assert r["change_at_s"] == pytest.approx(1.003) and r["change_took_s"] == pytest.approx(0.02)
    assert r["series"]["t0_s"] == pytest.approx(-1.003) and len(r["series"]["offered"]) == 200
    assert t.record.env.pins == {"guest.lcore-worker-1": "1"} and t.record.warnings == []
    lines = reconf_lines(t.record)
    assert "lost to the change: 4995 packets" in lines[2] and "implied time lost 49.95 ms" in lines[2]
    assert lines[1] == "  read back: vcpu0=1, emulator=0-1"


def test_a_change_that_cost_nothing_is_said_to_be_a_valid_answer():
    t = trial()
    _fill(t, SynthGen({120: 40, 260: 10}, [gap("lost", 2.2e9, 2.2004e9, 40), gap("lost", 3.6e9, 3.6001e9, 10)]),
          STATS, None, change_at(3.0005e9, took_ms=1), 1.0, MonitorReport())
    m, r = t.record.metrics, t.record.details["reconf"]
    assert m.lost_packets == 0 and m.time_lost_s == 0.0 and r["windows"]["net_lost"] == -30
    assert "cost nothing measurable" in r["note"]
    assert any("0 packets" in line and "a valid answer" in line for line in reconf_lines(t.record))


def test_a_change_that_outlasts_the_window_is_a_lower_bound():
    t = trial()
    change = change_at(3.003e9, took_ms=700)
    tail = Gap("refused", int(3.004e9), int(4e9), 99_000, 0, 0, False, True)
    _fill(t, SynthGen({i: 1000 for i in range(200, 300)}, [tail]), STATS, None, change, 1.0, MonitorReport())
    assert any("took 0.70 s, more than half the 1 s window" in w for w in t.record.warnings)
    assert any("an outage lasted to the end of the window" in w for w in t.record.warnings)


def test_the_change_as_report_rows_name_it():
    assert describe_change([GuestPins({1: frozenset({0}), 0: frozenset({1})}, frozenset({0}))]) == \
        "guest.pinning.emulator=0; guest.pinning.vcpus.0=1; guest.pinning.vcpus.1=0"
    assert describe_change([ExecCommand(["/bin/true"])]) == "--exec /bin/true"
