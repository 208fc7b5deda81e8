"""Sequential verdicts: exact alpha-spending boundaries across looks, the four verdicts per metric direction, what an open
comparison would need."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labctl.analysis import sequential as seq


def test_spending_functions_spend_alpha_by_the_end():
    for spending in seq.SPENDINGS:
        assert seq.spent(1.0, 0.05, spending) == pytest.approx(0.05)
        assert seq.spent(0.0, 0.05, spending) == 0.0
    # Pocock-type spends more early than O'Brien-Fleming-type
    assert seq.spent(0.2, 0.05, "pocock") > seq.spent(0.2, 0.05, "obf")


#: published boundaries, 5 equally spaced looks, one-sided 0.025 (two-sided 0.05): Lan-DeMets O'Brien-
#: Fleming-type and Pocock-type spending (R ldbounds / gsDesign, as tabled in Jennison & Turnbull 2000,
#: table 7.6 and Reboussin et al. 2000)
PUBLISHED = {"obf": (4.8769, 3.3569, 2.6803, 2.2898, 2.0310), "pocock": (2.4380, 2.4268, 2.4101, 2.3966, 2.3859)}


@pytest.mark.parametrize("spending", seq.SPENDINGS)
def test_boundaries_match_the_published_tables(spending):
    got = seq.boundaries(tuple(k / 5 for k in range(1, 6)), 0.025, spending)
    assert got == pytest.approx(PUBLISHED[spending], abs=2e-4)


@pytest.mark.parametrize("spending", seq.SPENDINGS)
def test_noise_alone_crosses_an_exact_boundary_with_chance_alpha(spending):
    # the sweep's own schedule (first look after 3 of 20 blocks, then every 3): simulated Brownian motion
    fractions = (0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0)
    z = np.array(seq.boundaries(fractions, 0.025, spending))
    rng = np.random.default_rng(7)
    steps = rng.normal(size=(200_000, len(fractions))) * np.sqrt(np.diff((0.0, *fractions)))
    crossed = (np.cumsum(steps, axis=1) / np.sqrt(fractions) >= z).any(axis=1).mean()
    assert crossed == pytest.approx(0.025, abs=0.0015)  # 4 standard errors of the simulation
    # and every look tests at a larger nominal level than its bare increment (what Bonferroni gave)
    increments = np.diff([0.0, *(seq.spent(t, 0.025, spending) for t in fractions)])
    from scipy import stats
    assert all(stats.norm.sf(c) >= inc * (1 - 1e-6) for c, inc in zip(z, increments))  # the first look: equal
    assert stats.norm.sf(z[-1]) > 1.2 * increments[-1]


def test_look_levels_and_the_final_look():
    direction, equivalence = seq.look_levels([0.15], 0.05, "pocock")
    # one look: its whole share; a direction two-sided (alpha/2 a side), equivalence alpha a side
    assert direction == pytest.approx(2 * seq.spent(0.15, 0.025, "pocock"), rel=1e-3)
    assert equivalence == pytest.approx(seq.spent(0.15, 0.05, "pocock"), rel=1e-3)
    later = seq.look_levels([0.15, 0.3, 0.45], 0.05, "pocock")[0]
    assert later > seq.spent(0.45, 0.05) - seq.spent(0.3, 0.05)
    assert seq.boundaries((0.5, 0.5), 0.025)[1] == math.inf  # a look with no new information cannot decide


@pytest.mark.parametrize("spending", seq.SPENDINGS)
def test_final_levels_are_the_last_looks_of_the_published_tables(spending):
    """After looks at 0.2 .. 0.8 the budget's last look is the fifth of five equally spaced looks: its
    direction level is two-sided, read off the published boundary (PUBLISHED, one-sided 0.025 a side)."""
    from scipy import stats

    direction, _equivalence = seq.final_levels([0.2, 0.4, 0.6, 0.8], 0.05, spending)
    assert direction == pytest.approx(2 * stats.norm.sf(PUBLISHED[spending][-1]), rel=1e-3)
    # a look already taken at the end is that last look, not a second one after it
    assert seq.final_levels([0.2, 0.4, 0.6, 0.8, 1.0], 0.05, spending)[0] == pytest.approx(direction, rel=1e-3)


def test_final_levels_with_no_look_taken_are_the_fixed_sample_levels():
    # one look at the end spends the whole alpha: a direction two-sided 0.05 (z 1.96), each of the
    # equivalence test's two one-sided tests 0.05 (z 1.645)
    assert seq.final_levels([], 0.05) == pytest.approx((0.05, 0.05), rel=1e-6)


def test_the_final_equivalence_level_keeps_the_error_at_alpha_by_simulation():
    """Noise alone against the earlier looks' boundaries and the final look's nominal level (one one-sided
    test of the equivalence pair at alpha 0.05): it crosses somewhere with chance 0.05, not more."""
    from scipy import stats

    done = (0.15, 0.3, 0.45)
    _direction, equivalence = seq.final_levels(list(done), 0.05)
    fractions = (*done, 1.0)
    z = np.array([*seq.boundaries(done, 0.05), stats.norm.isf(equivalence)])
    rng = np.random.default_rng(11)
    steps = rng.normal(size=(200_000, len(fractions))) * np.sqrt(np.diff((0.0, *fractions)))
    crossed = (np.cumsum(steps, axis=1) / np.sqrt(fractions) >= z).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.002)  # 4 standard errors of the simulation


def test_verdict_chance_is_high_for_a_clear_effect_and_low_for_a_hopeless_one():
    rng = np.random.default_rng(3)
    levels = seq.final_levels([0.15, 0.3], 0.05)
    clear = list(np.log(1.20) + rng.normal(0, 0.03, 6))
    hopeless = list(np.log(1.06) + rng.normal(0, 0.35, 6))  # 6% at 35% noise against a 5% band
    assert seq.verdict_chance(clear, 20, levels, 5.0) > 0.9
    assert seq.verdict_chance(hopeless, 20, levels, 5.0) < 0.1
    assert seq.verdict_chance(clear[:2], 20, levels, 5.0) is None  # too few pairs to say
    assert seq.verdict_chance(clear, 6, levels, 5.0) is None  # no pairs left to come


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
