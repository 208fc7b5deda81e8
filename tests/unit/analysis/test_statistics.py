"""Unit tests for labctl.analysis.statistics: intervals, two-band detection, comparisons, formatting."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from labctl.analysis import statistics
from labctl.analysis.loss import loss_summary
from labctl.analysis.statistics import (
    Delta,
    compare,
    median_ci,
    summarize,
    two_band,
)

TWO_BANDS = [8.5, 9.1, 9.8, 15.2, 16.0, 16.9]


# ------------------------------------------------------------------------------------------------
# median confidence interval


def test_median_ci_exact_bounds_on_hand_made_samples():
    # n=6 at 95%: k=1 covers 1 - 2/64 = 0.96875, k=2 only 1 - 14/64 = 0.78125 -> [min, max]
    ci = median_ci([6, 1, 5, 2, 4, 3], 0.95)
    assert (ci.low, ci.high) == (1.0, 6.0)
    assert ci.exact is True
    assert ci.coverage == pytest.approx(0.96875)
    # ... and at 75% the next order statistics inward qualify
    ci75 = median_ci([6, 1, 5, 2, 4, 3], 0.75)
    assert (ci75.low, ci75.high) == (2.0, 5.0)
    assert ci75.coverage == pytest.approx(0.78125)
    # n=10 at 95%: k=2 covers 1 - 2*11/1024 = 0.978515625, k=3 only 0.890625 -> [x(2), x(9)]
    ci10 = median_ci(list(range(1, 11)), 0.95)
    assert (ci10.low, ci10.high) == (2.0, 9.0)
    assert ci10.coverage == pytest.approx(1 - 22 / 1024)


def test_median_ci_too_small_for_requested_confidence_is_flagged():
    ci = median_ci([10.0, 10.4, 9.9, 10.2, 10.1], 0.95)  # n=5: [min, max] covers only 93.75 %
    assert (ci.low, ci.high) == (9.9, 10.4)
    assert ci.exact is False
    assert ci.coverage == pytest.approx(1 - 2 / 32)
    single = median_ci([3.0])
    assert single.low is None and single.high is None and single.exact is False


def test_median_ci_covers_true_median_in_most_seeded_draws():
    # lognormal (skewed) with true median exp(mu) = 10; n=15 -> k=4, nominal coverage 0.9648
    rng = np.random.default_rng(12345)
    true_median = 10.0
    covered = 0
    for _ in range(200):
        sample = rng.lognormal(math.log(true_median), 0.3, 15)
        ci = median_ci(sample, 0.95)
        assert ci.exact
        assert ci.coverage == pytest.approx(0.96484375)
        # not the trivial [min, max] interval
        assert ci.low > sample.min() and ci.high < sample.max()
        covered += ci.low <= true_median <= ci.high
    assert covered >= 184  # >= 92 % of 200 (expected ~193)


# ------------------------------------------------------------------------------------------------
# summarize


def test_summarize_fields_on_known_sample():
    s = summarize([10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 10.3])
    assert s.n == 7
    assert s.median == pytest.approx(10.0)
    assert s.mean == pytest.approx(np.mean([10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 10.3]))
    assert s.stdev == pytest.approx(np.std([10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 10.3], ddof=1))
    assert s.cv == pytest.approx(s.stdev / s.mean)
    assert (s.minimum, s.maximum) == (9.8, 10.3)
    # n=7 at 95%: k=1 (coverage 1 - 2/128); k=2 covers only 1 - 16/128
    assert (s.ci_low, s.ci_high) == (9.8, 10.3)
    assert s.ci_exact
    assert not s.bimodal and s.bands is None
    assert not s.high_variance


def test_summarize_small_n():
    one = summarize([12.5])
    assert one.n == 1 and one.median == 12.5
    assert one.stdev is None and one.cv is None
    assert one.ci_low is None and one.ci_high is None and not one.ci_exact
    assert not one.high_variance and not one.bimodal
    two = summarize([10.0, 11.0])
    assert (two.ci_low, two.ci_high) == (10.0, 11.0)
    assert not two.ci_exact and two.ci_coverage == pytest.approx(0.5)


def test_high_variance_flag_and_threshold():
    noisy = [10, 12, 8, 11, 9, 13, 7]  # cv = sqrt(28/6)/10 = 0.216
    s = summarize(noisy)
    assert s.cv == pytest.approx(math.sqrt(28 / 6) / 10)
    assert s.high_variance
    assert not s.bimodal
    assert not summarize(noisy, cv_threshold=0.25).high_variance
    assert not summarize([10.0, 10.2, 9.9, 10.1, 9.8]).high_variance
    assert statistics.HIGH_CV == 0.10


def test_summarize_flags_two_band_sample():
    s = summarize(TWO_BANDS)
    assert s.bimodal
    assert s.bands is not None and s.bands.n_low == 3 and s.bands.n_high == 3
    assert s.high_variance  # two bands 1.8x apart are also high-variance


# ------------------------------------------------------------------------------------------------
# two-band detection


def test_two_band_detects_the_host_bands():
    tb = two_band([16.0, 8.5, 15.2, 9.8, 16.9, 9.1])  # order must not matter
    assert tb is not None
    assert tb.low == (8.5, 9.1, 9.8)
    assert tb.high == (15.2, 16.0, 16.9)
    assert tb.low_median == pytest.approx(9.1)
    assert tb.high_median == pytest.approx(16.0)
    assert tb.gap == pytest.approx(5.4)
    assert tb.ratio == pytest.approx(16.0 / 9.1)
    assert tb.separation >= statistics.BAND_SEPARATION


def test_two_band_ignores_unimodal_noise():
    rng = np.random.default_rng(2024)
    assert two_band(rng.normal(10.0, 0.4, 20)) is None
    for _ in range(20):  # 20 draws of n=20 at cv 4 %
        assert two_band(rng.normal(10.0, 0.4, 20)) is None
    for n in (4, 5, 6, 8):  # small samples at cv 3-5 % as well
        for cv in (0.03, 0.05):
            for _ in range(25):
                assert two_band(rng.normal(10.0, 10.0 * cv, n)) is None


def test_two_band_needs_four_values_and_two_per_band():
    assert two_band([9.0, 16.0, 16.5]) is None  # n=3
    assert two_band([9.0, 16.0, 16.1, 16.2, 16.3]) is None  # one low value is an outlier, not a band
    assert two_band([9.0, 9.2, 16.0, 16.2]) is not None  # n=4, 2 + 2


def test_two_band_needs_ratio_and_separation():
    # well separated relative to spread, but medians only 1.14x apart
    assert two_band([10.0, 10.1, 11.5, 11.6]) is None
    assert two_band([10.0, 10.1, 11.5, 11.6], min_ratio=1.1) is not None
    # 1.8x apart, but the bands are as wide as the gap between them
    assert two_band([5.0, 9.0, 13.0, 17.0, 21.0, 25.0]) is None


def test_two_band_format():
    tb = two_band(TWO_BANDS)
    assert tb.format() == "two bands: 9.1 (n=3) and 16.0 (n=3)"
    assert str(tb) == tb.format()


# ------------------------------------------------------------------------------------------------
# compare


def planted(seed: int, effect: float = 0.15, cv: float = 0.03, n: int = 5):
    rng = np.random.default_rng(seed)
    base = rng.normal(10.0, 10.0 * cv, n)
    cand = rng.normal(10.0 * (1 + effect), 10.0 * (1 + effect) * cv, n)
    return base, cand


def test_compare_planted_effect_is_better():
    base, cand = planted(seed=1)
    d = compare(base, cand)
    assert d.verdict == "better"
    assert d.significant
    assert d.ci_low_pct > 0
    assert d.ci_low_pct <= d.change_pct <= d.ci_high_pct
    assert 8.0 < d.change_pct < 22.0
    assert d.p_value < 0.05
    assert (d.n_baseline, d.n_candidate) == (5, 5)
    # the planted effect is found on (nearly) every seeded draw
    hits = sum(compare(*planted(seed=s), n_resamples=2000).verdict == "better" for s in range(30))
    assert hits >= 28


def test_compare_direction_and_lower_is_better():
    base, cand = planted(seed=3)
    assert compare(cand, base).verdict == "worse"
    assert compare(cand, base).ci_high_pct < 0
    # for latency/loss lower is better
    assert compare(base, cand, higher_is_better=False).verdict == "worse"
    assert compare(cand, base, higher_is_better=False).verdict == "better"


def test_compare_identical_distributions_no_difference():
    rng = np.random.default_rng(7)
    base, cand = rng.normal(10.0, 0.3, 5), rng.normal(10.0, 0.3, 5)
    d = compare(base, cand)
    assert d.verdict == "no difference"
    assert d.ci_low_pct <= 0 <= d.ci_high_pct
    # false-positive rate over many seeded null pairs stays near the nominal 5 %
    false_calls = 0
    for _ in range(60):
        a, b = rng.normal(10.0, 0.3, 5), rng.normal(10.0, 0.3, 5)
        false_calls += compare(a, b, n_resamples=2000).significant
    assert false_calls <= 7


def test_compare_too_few_trials_is_inconclusive():
    d = compare([10.0, 10.1], [12.0, 12.1, 12.2])
    assert d.verdict == "inconclusive"
    assert "fewer than 3" in d.reason
    assert d.change_pct == pytest.approx(100 * (12.1 / 10.05 - 1))
    one = compare([10.0], [12.0])
    assert one.verdict == "inconclusive"
    assert one.ci_low_pct is None and one.ci_high_pct is None


def test_compare_two_band_side_is_inconclusive():
    d = compare(TWO_BANDS, [17.0, 17.2, 17.4, 17.1, 17.3])
    assert d.verdict == "inconclusive"
    assert d.baseline_bands is not None and d.candidate_bands is None
    assert "two bands: 9.1 (n=3) and 16.0 (n=3)" in d.reason
    d2 = compare([10.0, 10.1, 10.2, 10.3], TWO_BANDS)
    assert d2.verdict == "inconclusive" and d2.candidate_bands is not None


def test_compare_three_vs_three_ci_decides_not_p():
    base, cand = [10.0, 10.2, 10.4], [11.5, 11.8, 12.0]
    d = compare(base, cand)
    assert d.p_value == pytest.approx(0.1)  # the smallest possible two-sided MWU p at 3 vs 3
    assert d.verdict == "better"
    # with 3 vs 3 the 95 % percentile-bootstrap interval is [min c / max b - 1, max c / min b - 1]
    assert d.ci_low_pct == pytest.approx(100 * (11.5 / 10.4 - 1))
    assert d.ci_high_pct == pytest.approx(100 * (12.0 / 10.0 - 1))
    # overlapping 3 vs 3 -> no difference
    assert compare(base, [10.1, 10.5, 11.9]).verdict == "no difference"


def test_compare_is_deterministic_and_seedable():
    base, cand = planted(seed=11, effect=0.02, cv=0.05, n=6)
    a = compare(base, cand, seed=5)
    b = compare(base, cand, seed=5)
    assert a == b
    g1 = compare(base, cand, seed=np.random.default_rng(5))
    assert (g1.ci_low_pct, g1.ci_high_pct) == (a.ci_low_pct, a.ci_high_pct)


def test_compare_rejects_bad_input():
    with pytest.raises(ValueError):
        compare([0.0, 10.0, 10.1], [10.0, 10.2, 10.3])  # zero baseline trial
    with pytest.raises(ValueError):
        compare([], [1.0])
    with pytest.raises(ValueError):
        compare([1.0, float("nan"), 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        compare([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], confidence=1.5)
    with pytest.raises(ValueError):
        summarize([])


# ------------------------------------------------------------------------------------------------
# formatting


def test_delta_format():
    d = compare([10.0, 10.2, 10.4], [11.5, 11.8, 12.0])
    shown = dataclasses.replace(d, change_pct=16.2, ci_low_pct=12.0, ci_high_pct=20.1)
    assert shown.format() == "+16.2% [+12.0, +20.1]"
    neg = dataclasses.replace(d, change_pct=-3.54, ci_low_pct=-7.0, ci_high_pct=0.44)
    assert neg.format() == "-3.5% [-7.0, +0.4]"
    none = dataclasses.replace(d, ci_low_pct=None, ci_high_pct=None)
    assert none.format().endswith("% [n/a]")
    assert shown.describe() == "+16.2% [+12.0, +20.1] better (p=0.1, n=3 vs 3)"
    assert isinstance(shown, Delta)


def test_inconclusive_describe_gives_reason():
    text = compare([10.0, 10.1], [12.0, 12.1, 12.2]).describe()
    assert "inconclusive" in text and "fewer than 3" in text


def test_summary_format():
    s = summarize([10.0, 10.2, 9.9, 10.1, 9.8, 10.0, 10.3])
    assert s.format() == "10.0 [9.8, 10.3] (95% CI, n=7, cv 1.7%)"
    small = summarize([10.0, 10.4, 9.9, 10.2, 10.1]).format()
    assert "only 93.8% coverage with n=5" in small
    assert "two bands: 9.1 (n=3) and 16.0 (n=3)" in summarize(TWO_BANDS).format()
    assert "high variance" in summarize(TWO_BANDS).format()


# ------------------------------------------------------------------------------------------------
# loss ratios


def test_loss_summary():
    ratios = [0.0, 0.0001, 0.0002, 0.0003, 0.0002, 0.0, 0.0004]
    ls = loss_summary(ratios)
    assert ls.n == 7
    assert ls.median == pytest.approx(0.0002)
    assert (ls.ci_low, ls.ci_high) == (0.0, 0.0004)  # n=7 at 95 %: [min, max]
    assert ls.ci_exact
    assert ls.lossless == 2 and ls.lossless_fraction == pytest.approx(2 / 7)
    assert ls.maximum == pytest.approx(0.0004)
    assert ls.format() == "0.02% [0%, 0.04%] (95% CI, n=7, 2/7 lossless, worst 0.04%)"
    # larger n narrows the interval to inner order statistics
    many = loss_summary([i * 1e-5 for i in range(1, 21)])
    assert (many.ci_low, many.ci_high) == pytest.approx((6e-5, 15e-5))
    with pytest.raises(ValueError):
        loss_summary([0.1, -0.01])
    with pytest.raises(ValueError):
        loss_summary([0.1, 1.5])


def test_loss_upper_bound_is_clopper_pearson_and_three_over_n_without_loss():
    from scipy.stats import beta

    from labctl.analysis.loss import loss_upper_bound

    assert loss_upper_bound(0, 1_000_000) == pytest.approx(3 / 1_000_000, rel=0.002)  # the rule of three
    assert loss_upper_bound(0, 1_000_000) == pytest.approx(-math.log(0.05) / 1_000_000, rel=1e-5)
    assert loss_upper_bound(7, 10_000) == pytest.approx(beta.ppf(0.95, 8, 9_993))
    assert loss_upper_bound(7, 10_000) > 7 / 10_000
    assert loss_upper_bound(5, 5) == 1.0 and loss_upper_bound(0, 0) is None
    with pytest.raises(ValueError, match="lost 6 of 5 offered"):
        loss_upper_bound(6, 5)
