"""A soak's record (labctl.measure.soak): the series a point a second, loss events located in time and marked
when the host stalled then, the loss bound, where an interrupted soak stopped; on a synthetic soak (a 1 GHz
TSC, CLOCK_MONOTONIC 4 s ahead, bins of 1 s from the start)."""

from __future__ import annotations

import pytest

from labctl.errors import UserError
from labctl.measure.soak import _compose, bin_seconds, parse_duration
from labctl.results.lines import soak_lines
from labctl.results.record import TrialRecord
from tests.live_data import event, seconds, soak

def test_a_whole_soak_with_one_loss_event_at_a_host_stall():
    s = soak(120, {30: 40, 70: 5}, [event(30.2, 4, 40), event(70.5, 0.5, 5)], seconds({30, 100}))
    record = TrialRecord(config={})
    _compose(s, record, 120.0, True, None, None)
    d, m = record.details["soak"], record.metrics
    assert len(d["series"]) == 120 and d["series"][30]["t_s"] == pytest.approx(30.0) and d["series"][30]["stall"]
    assert (d["offered"], d["lost"]) == (120_000, 45) and m.loss_ratio == pytest.approx(45 / 120_000)
    assert m.loss_upper_bound > 45 / 120_000
    assert [(round(e["start_s"], 3), e["host_stall"]) for e in d["events"]] == [(30.2, True), (70.5, False)]
    assert (m.loss_events, m.loss_events_host, m.host_stall_s) == (2, 1, 2)
    assert d["complete"] and record.warnings == []
    lines = soak_lines(record)
    assert lines[0] == "soak of 120 s: 120 points of 1 s"
    assert "loss events: 2 (1 at a host stall):" in lines[2] and "[at a host stall]" in lines[3]


def test_no_loss_bounds_the_ratio_at_three_over_n():
    s = soak(120, {}, [], seconds(set()))
    record = TrialRecord(config={})
    _compose(s, record, 120.0, True, None, None)
    assert record.metrics.loss_upper_bound == pytest.approx(3 / 120_000, rel=0.002)
    assert "(zero loss in N: 3/N)" in soak_lines(record)[1]


def test_an_interrupted_soak_keeps_its_first_minute_and_says_where_it_stopped():
    s = soak(60, {10: 3}, [event(10.1, 1, 3), event(90.0, 1, 7)], seconds(set(), 61))
    record = TrialRecord(config={})
    _compose(s, record, 60.4, False, "interrupted (KeyboardInterrupt)", None)
    d = record.details["soak"]
    assert len(d["series"]) == 60 and d["stopped_at_s"] == pytest.approx(60.4) and not d["complete"]
    assert [e["start_s"] for e in d["events"]] == [pytest.approx(10.1)]  # none past where it stopped
    assert record.warnings == ["soak stopped at 60 s of 120 s: interrupted (KeyboardInterrupt)"]
    _compose(s, record, 60.4, False, "interrupted again", None)
    assert record.warnings == ["soak stopped at 60 s of 120 s: interrupted again"]  # said once


def test_durations():
    assert parse_duration("30m") == 1800 and parse_duration("90s") == 90 and parse_duration("2h") == 7200
    assert parse_duration("45") == 45
    for bad, message in (("5s", "out of range"), ("13h", "out of range"), ("soon", "not a duration")):
        with pytest.raises(UserError, match=f"--duration {bad}: {message}"):
            parse_duration(bad)
    assert bin_seconds(1800) == 1.0 and bin_seconds(8 * 3600) == 2.0
