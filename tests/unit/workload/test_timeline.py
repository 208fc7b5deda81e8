"""Gaps as outages in time, and stretches of labctl's clock as time bins (labctl.workload.timeline)."""

from __future__ import annotations

import pytest

from labctl.dpdk.labgen_replies import Gap, TrialClock
from labctl.workload.timeline import bin_range, bin_start_s, bin_width_s, outages

# 1 GHz and the monotonic clock 4 s ahead of the TSC: a stamp of t ns is at mono t + 4e9
CLOCK = TrialClock(arm_tsc=1_000_000_000, arm_mono_ns=5_000_000_000, ref_tsc=11_000_000_000,
                   ref_mono_ns=15_000_000_000, hz=1_000_000_000)
CHANGE = 8_000_000_000  # mono ns: TSC 4e9
START = 6_000_000_000


def lost(before_ms: float, after_ms: float, count: int, stream: int = 0, filled: int = 0, **flags) -> Gap:
    """A gap around the change: its stamps in ms from it."""
    def tsc(ms: float) -> int:
        return int(4_000_000_000 + ms * 1e6)
    return Gap("lost", tsc(before_ms), tsc(after_ms), count, filled, stream, flags.get("head", False),
               flags.get("tail", False))


def refused(before_ms: float, after_ms: float, count: int, port: int = 0) -> Gap:
    g = lost(before_ms, after_ms, count, port)
    return Gap("refused", g.before_tsc, g.after_tsc, count, 0, port, False, False)


def test_one_outage_seen_by_every_stream_is_their_union():
    """An outage from +1 ms to +50 ms at 64 flows: each stream's gap is a little wider, the merge spans them."""
    gaps = [lost(1 - 0.03 * s, 50 + 0.02 * s, 8, stream=s) for s in range(64)] + [refused(2, 49, 100, port=1)]
    (o,) = outages(gaps, CLOCK, CHANGE, START)
    assert o.start_s == pytest.approx(1e-3 - 63 * 0.03e-3) and o.end_s == pytest.approx(50e-3 + 63 * 0.02e-3)
    assert (o.lost, o.refused, o.streams, o.missing) == (64 * 8, 100, 65, 612)
    assert o.length_s == pytest.approx(o.end_s - o.start_s)


def test_separate_outages_stay_apart_and_are_sorted():
    gaps = [lost(300, 301, 1, stream=3), lost(-2000, -1999, 2), lost(5, 9, 4, stream=1), lost(8, 12, 4, stream=2)]
    got = outages(gaps, CLOCK, CHANGE, START)
    assert [(round(o.start_s, 4), round(o.end_s, 4), o.lost) for o in got] == [
        (-2.0, -1.999, 2), (0.005, 0.012, 8), (0.3, 0.301, 1)]


def test_late_frames_are_not_an_outage_and_a_head_gap_starts_at_the_window():
    gaps = [lost(10, 20, 3, filled=3), lost(0, -1500, 5, head=True), lost(40, 60, 2, filled=1)]
    got = outages(gaps, CLOCK, CHANGE, START)
    assert len(got) == 2 and got[0].head and got[0].start_s == pytest.approx(-2.0)  # the window's start
    assert got[1].lost == 1


def test_bins_of_a_stretch_of_the_clock():
    # bins of 10 ms from the arm time (mono 5 s): [6 s, 6.5 s) covers bins 100..149
    assert bin_range(CLOCK, 10_000_000, 6_000_000_000, 6_500_000_000) == (100, 150)
    assert bin_range(CLOCK, 10_000_000, 6_000_000_001, 6_500_000_001) == (101, 151)  # a bin counts where it starts
    assert bin_range(CLOCK, 10_000_000, 4_000_000_000, 4_500_000_000) == (0, 0)  # before the arm: none
    assert bin_start_s(CLOCK, 10_000_000, 250, CHANGE) == pytest.approx(-0.5)
    assert bin_width_s(CLOCK, 10_000_000) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="without time bins"):
        bin_range(CLOCK, 0, 0, 1)
