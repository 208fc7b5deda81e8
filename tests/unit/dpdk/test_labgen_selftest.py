"""labgen's counting code (native/labgen/src/stats.c) on known inputs, through labgen-selftest.

Loss, reorder and duplicate counts must be exact; percentiles within one histogram bucket of the
nearest-rank value; the schedule must never make a frame due before its exact time.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
from fractions import Fraction

import pytest

from labctl.native import selftest_path
from tests.labgen_support import ensure_labgen

WINDOW = 1024


@pytest.fixture(scope="module", autouse=True)
def built():
    ensure_labgen()


def selftest(command: str, values: list[int]):
    """Run labgen-selftest COMMAND with the values on stdin; its JSON output."""
    proc = subprocess.run([str(selftest_path()), command, "-"], input=" ".join(map(str, values)),
                          capture_output=True, text=True, check=True, timeout=30)
    return json.loads(proc.stdout)


def stream(sent: int, seqs: list[int]) -> dict:
    out = selftest("stream", [sent, *seqs])
    return {k: out[k] for k in ("unique", "lost", "reordered", "duplicate", "beyond_window")}


def counts(unique, lost=0, reordered=0, duplicate=0, beyond_window=0):
    return {"unique": unique, "lost": lost, "reordered": reordered, "duplicate": duplicate,
            "beyond_window": beyond_window}


@pytest.mark.parametrize(("sent", "seqs", "expected"), [
    (5, [0, 1, 2, 3, 4], counts(5)),
    (6, [0, 1, 3, 4, 5], counts(5, lost=1)),                      # a gap
    (5, [0, 1, 2], counts(3, lost=2)),                            # lost at the tail: only the sender knows
    (4, [0, 2, 1, 3], counts(4, reordered=1)),                    # a swap
    (3, [0, 1, 1, 2], counts(3, duplicate=1)),                    # a duplicate
    (3, [0, 2, 1, 1], counts(3, reordered=1, duplicate=1)),       # a late frame, then it again
    (6, [0, 5, 1, 2, 3, 4], counts(6, reordered=4)),              # four frames overtaken by one
    (4, [3, 2, 1, 0], counts(4, reordered=3)),
    (3, [0, 0, 0, 1, 2, 2], counts(3, duplicate=3)),
    (10, [], counts(0, lost=10)),
    (2001, [0, 2000, 5], counts(3, lost=1998, reordered=1, beyond_window=1)),  # too old to check
    (5001, [0, 1, 5000, 4999, 4999], counts(4, lost=4997, reordered=1, duplicate=1)),  # a jump clears the window
    (1025, [*range(1025), 1], counts(1025, duplicate=1)),        # exactly one window below: still checked
    (1026, [*range(1026), 1], counts(1027, reordered=1, beyond_window=1)),  # one further: unique by assumption
])
def test_stream_counts_are_exact(sent, seqs, expected):
    assert stream(sent, seqs) == expected


def reference(sent: int, seqs: list[int]) -> dict:
    """The same rules, written independently: RFC 4737's 'reordered' (below the next expected number),
    duplicates checked within the last WINDOW numbers, lost = sent - unique."""
    nxt, seen = 0, set()
    c = counts(0)
    for s in seqs:
        if s >= nxt:
            nxt = s + 1
        elif nxt - s > WINDOW:
            c["beyond_window"] += 1
            c["reordered"] += 1
            c["unique"] += 1
            continue
        elif s in seen:
            c["duplicate"] += 1
            continue
        else:
            c["reordered"] += 1
        seen.add(s)
        c["unique"] += 1
    c["lost"] = max(sent - c["unique"], 0)
    return c


@pytest.mark.parametrize("seed", range(6))
def test_stream_counts_match_a_reference_on_random_sequences(seed):
    rng = random.Random(seed)
    sent = 20000
    seqs = [s for s in range(sent) if rng.random() > 0.03]               # 3% lost
    for _ in range(200):                                                 # local swaps
        i = rng.randrange(len(seqs) - 60)
        j = i + rng.randrange(1, 60)
        seqs[i], seqs[j] = seqs[j], seqs[i]
    for _ in range(20):                                                  # a few frames overtaken by far more
        i = rng.randrange(len(seqs) - 3000)
        seqs.insert(i + rng.randrange(500, 3000), seqs.pop(i))
    for _ in range(300):                                                 # duplicates, near and far
        i = rng.randrange(len(seqs))
        seqs.insert(min(i + rng.randrange(0, 1500), len(seqs)), seqs[i])
    got = stream(sent, seqs)
    assert got == reference(sent, seqs)
    assert got["lost"] > 0 and got["reordered"] > 0 and got["duplicate"] > 0 and got["beyond_window"] > 0


def test_buckets_tile_the_range_with_a_sixteenth_resolution():
    values = [*range(0, 5000), *(1 << e for e in range(4, 64)), *((1 << e) - 1 for e in range(4, 64)),
              *((1 << e) + 1 for e in range(4, 63)), (1 << 64) - 1]
    rows = selftest("bucket", values)
    for row in rows:
        assert row["low"] <= row["value"] < row["low"] + row["width"]
        assert row["width"] == 1 or row["width"] * 16 <= row["low"]  # 1/16 of the value or better
    by_index = {row["index"]: row for row in rows}
    for index, row in by_index.items():
        if index + 1 in by_index:
            assert by_index[index + 1]["low"] == row["low"] + row["width"]  # no holes, no overlaps
    assert max(by_index) == 975  # 61 powers of two x 16 sub-buckets, the last one holding 2^64-1


def nearest_rank(sorted_values: list[int], q: float) -> int:
    return sorted_values[max(math.ceil(q * len(sorted_values)), 1) - 1]


def bucket_width(value: int) -> int:
    return selftest("bucket", [value])[0]["width"]


@pytest.mark.parametrize("values", [
    list(range(1, 100001)),                                          # uniform 1 ns .. 100 us
    [1000] * 990 + [1_000_000] * 10,                                 # a tail of 1% at 1 ms
    [random.Random(7).randrange(200, 5_000_000) for _ in range(30000)],
    [3, 3, 3, 7, 15],                                                # exact buckets below 16 ns
])
def test_percentiles_within_one_bucket(values):
    got = selftest("hist", values)
    ordered = sorted(values)
    assert got["count"] == len(values)
    assert got["min"] == ordered[0] and got["max"] == ordered[-1]   # exact
    assert got["mean"] == sum(values) // len(values)
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)):
        exact = nearest_rank(ordered, q)
        assert abs(got[name] - exact) < bucket_width(exact), (name, got[name], exact)


def test_small_values_are_exact():
    got = selftest("hist", [3, 3, 3, 7, 15])
    assert (got["p50"], got["p90"], got["p99"], got["max"]) == (3, 15, 15, 15)


@pytest.mark.parametrize(("hz", "rate"), [(2_600_000_000, 3), (2_600_000_000, 1_000_000), (2_600_000_000, 7_777_777),
                                          (3_000_000_000, 200_000_000), (1, 1)])
def test_schedule_is_never_early_and_at_most_a_cycle_late(hz, rate):
    # labgen refuses schedules longer than a day, so due() stays far below 2^64 cycles
    frames = [i for i in (0, 1, 2, 3, 99, 12345, 10**9, 10**12 + 1) if i * hz // rate <= 86400 * hz]
    for row in selftest("due", [hz, rate, *frames]):
        exact = Fraction(row["i"] * hz, rate)
        assert exact <= row["due"] < exact + 1                     # ceil(i * hz / rate)
        assert row["count_at_due"] == row["i"] + 1                 # frame i is due at due(i) ...
        assert row["i"] == 0 or row["count_before"] == row["i"]    # ... and not one cycle before


def stamp(seq: int) -> int:
    """The send stamp labgen-selftest gives frame ``seq`` of its one stream."""
    return 1000 + 10 * seq


def gaps(sent: int, seqs: list[int]) -> list[dict]:
    return [{k: g[k] for k in ("first", "count", "filled", "before", "after", "head", "tail")}
            for g in selftest("gaps", [sent, *seqs])["gaps"]]


def gap(first, count, before, after, filled=0, head=False, tail=False):
    return {"first": first, "count": count, "filled": filled, "before": before, "after": after, "head": head,
            "tail": tail}


@pytest.mark.parametrize(("sent", "seqs", "expected"), [
    (5, [0, 1, 2, 3, 4], []),
    (8, [0, 1, 5, 6, 7], [gap(2, 3, stamp(1), stamp(5))]),                 # between the frames on either side
    (8, [0, 1, 5, 3, 6, 7], [gap(2, 3, stamp(1), stamp(5), filled=1)]),    # one of them late: filled, not lost
    (8, [0, 1, 5, 2, 3, 4, 6, 7], [gap(2, 3, stamp(1), stamp(5), filled=3)]),  # all late: a gap of no loss
    (6, [0, 1, 2], [gap(3, 3, stamp(2), stamp(5), tail=True)]),             # lost at the end: the tail
    (6, [3, 4, 5], [gap(0, 3, 0, stamp(3), head=True)]),                    # nothing before it in the stream
    (4, [], [gap(0, 4, 0, stamp(3), head=True, tail=True)]),
    (10, [0, 3, 3, 7, 9], [gap(1, 2, stamp(0), stamp(3)), gap(4, 3, stamp(3), stamp(7)),
                           gap(8, 1, stamp(7), stamp(9))]),                 # a duplicate moves nothing
])
def test_gaps_are_placed_between_the_frames_that_got_through(sent, seqs, expected):
    assert gaps(sent, seqs) == expected


def test_gaps_agree_with_the_loss_count():
    """Every lost number is in exactly one gap: the gaps' unfilled frames add up to sent - unique."""
    rng = random.Random(11)
    seqs = [s for s in range(20000) if rng.random() > 0.01]
    for i in range(0, len(seqs) - 1, 97):  # some frames swapped with the next
        seqs[i], seqs[i + 1] = seqs[i + 1], seqs[i]
    out = selftest("gaps", [20000, *seqs])
    missing = sum(g["count"] - g["filled"] for g in out["gaps"])
    assert missing == 20000 - out["unique"] and out["reordered"] > 0
    assert all(g["before"] < g["after"] for g in out["gaps"] if not g["head"])


@pytest.mark.parametrize("bins", [1, 3, 60])
def test_time_bins_merged_give_the_histograms_summary(bins):
    """Values dealt into time bins, merged, summarise as the one histogram does (below 2^35 ns)."""
    values = [random.Random(bins).randrange(50, 20_000_000) for _ in range(5000)]
    assert selftest("bins", [bins, *values]) == selftest("hist", values)


def test_time_bins_clamp_above_their_range():
    """Above 2^35 ns (34 s) a bin's value falls in its last bucket: max stays exact, percentiles are capped."""
    got = selftest("bins", [1, 100, 2**36, 2**37])
    assert got["max"] == 2**37 and got["min"] == 100 and got["count"] == 3
    assert got["p50"] < 2**36
