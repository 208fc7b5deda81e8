"""Sequential verdicts: alpha spending across looks, the four verdicts per metric direction, what an open
comparison would need."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labctl.analysis import sequential as seq


def test_spending_adds_up_to_alpha_and_never_more():
    for spending in seq.SPENDINGS:
        levels = [seq.look_alpha(n, n - 2 if n > 3 else 0, 15, 0.05, spending) for n in (3, 5, 7, 9, 11, 13, 15)]
        assert all(a > 0 for a in levels)
        assert sum(levels) == pytest.approx(0.05)  # Bonferroni over the looks: at most alpha in all
    # Pocock-type spends more early than O'Brien-Fleming-type
    assert seq.spent(0.2, 0.05, "pocock") > seq.spent(0.2, 0.05, "obf")
    assert seq.spent(1.0, 0.05, "obf") == pytest.approx(0.05)


def test_unknown_spending_is_refused():
    with pytest.raises(ValueError, match="allowed: pocock, obf"):
        seq.spent(0.5, 0.05, "haybittle")


def _logs(ratios):
    return [math.log(r) for r in ratios]


BETTER_UP = _logs([1.19, 1.21, 1.20, 1.22, 1.18, 1.20])  # candidate 20% higher than baseline
AA = _logs([1.004, 0.997, 1.002, 0.999, 1.001, 0.998, 1.0, 1.003])


@pytest.mark.parametrize("lower, expected", [(False, "better"), (True, "worse")])
def test_direction_follows_the_metric(lower, expected):
    d = seq.decide(BETTER_UP, 0.01, 5.0, lower_is_better=lower)
    assert d.verdict == expected and d.low_pct > 5.0 and d.confidence == pytest.approx(0.99)


@pytest.mark.parametrize("lower, expected", [(False, "worse"), (True, "better")])
def test_lower_candidate(lower, expected):
    d = seq.decide([-x for x in BETTER_UP], 0.01, 5.0, lower_is_better=lower)
    assert d.verdict == expected


def test_equivalent_needs_the_whole_interval_inside_the_band():
    assert seq.decide(AA, 0.01, 5.0, False).verdict == "equivalent"
    assert seq.decide(AA, 0.01, 0.1, False).verdict == "open"  # the band is narrower than the interval


def test_straddling_the_threshold_is_open():
    rng = np.random.default_rng(1)
    noisy = list(np.log(1.05) + rng.normal(0, 0.05, 6))
    d = seq.decide(noisy, 0.01, 5.0, False)
    assert d.verdict == "open" and d.low_pct < 5.0 < d.high_pct


def test_few_pairs_and_refusals():
    assert seq.decide(BETTER_UP[:2], 0.01, 5.0, False).verdict == "open"
    refused = seq.decide(BETTER_UP, 0.01, 5.0, False, refusal="zero rates")
    assert refused.verdict == "refused" and refused.reason == "zero rates"


def test_loss_is_judged_in_points():
    # loss 0.00 -> 0.10 in every pair: 10 points more loss, lower is better
    d = seq.decide([0.10, 0.11, 0.09, 0.10], 0.01, 5.0, True, scale="diff")
    assert d.verdict == "worse" and d.change_pct == pytest.approx(10.0)
    assert seq.paired_difference(0.0, 0.0, "diff") == 0.0
    assert seq.paired_difference(0.0, 1.0, "log") is None  # a zero rate has no ratio


def test_needed_pairs_grow_with_the_noise_and_closeness():
    spread = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    quiet = list(np.log(1.12) + 0.03 * spread)
    loud = list(np.log(1.12) + 0.12 * spread)
    q, l = seq.needed_pairs(quiet, 0.01, 5.0), seq.needed_pairs(loud, 0.01, 5.0)
    assert q is not None and l is not None and l > q
    on_edge = [math.log(1.05)] * 2 + [math.log(1.05) + 0.01, math.log(1.05) - 0.01]
    assert seq.needed_pairs(on_edge, 0.01, 5.0) is None  # the mean on the threshold: no number tells


def test_max_looks_is_bounded():
    assert seq.max_looks(3, 3, 1) == 1
    assert seq.max_looks(3, 6, 1) == 4
    assert seq.max_looks(3, 500, 1) == seq.MAX_LOOKS


def test_a_tiny_level_on_few_pairs_gives_a_wide_interval_not_an_overflow():
    decision = seq.decide([0.5, -0.4, 0.9], 1e-12, 5.0, False)
    assert decision.verdict == "open" and decision.high_pct > 1e6
