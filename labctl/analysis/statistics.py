"""Evidence: the statistics labctl uses to decide whether a measured difference is real.

Everything here is a pure function over a sequence of floats (typically the Mpps of repeated trials of
one configuration) returning a frozen dataclass. Nothing reads the clock, the store or global random
state: the only randomness is the bootstrap in :func:`compare`, driven by a seeded
``numpy.random.Generator`` (``seed=0`` by default), so the same inputs always give the same report.

Why medians, order statistics and two-band detection: the host labctl was built on is itself a 2-vCPU
guest, and identical 64-byte forwarding runs on it landed in two bands (about 8-10 and 15-17 Mpps), while
repeats on a quiet host scatter by a cv of 3-5 %. Means and
normal-theory intervals are pulled around by such runs; medians with distribution-free intervals are not,
and a two-band sample is flagged rather than averaged into a number that no run ever produced.

Public API
----------
- :func:`median_ci` -> :class:`MedianCI`   order-statistic (binomial) interval for the median
- :func:`summarize` -> :class:`Summary`    n, median, mean, stdev, cv, median CI, flags
- :func:`two_band` -> :class:`TwoBand` | None   two-band (bimodal) detection
- :func:`compare` -> :class:`Delta`        candidate vs baseline: % change, bootstrap CI, MWU p, verdict

Loss ratios are summarized by :func:`labctl.analysis.loss.loss_summary` (the same order-statistic
interval); the constants every judgement shares (:data:`CONFIDENCE`, :data:`MIN_TAIL_RESAMPLES`) are here.

Bad input (no values, NaN/inf, a confidence outside (0, 1), a non-positive baseline for a relative
change) raises ``ValueError``: these are programming errors of the caller, not lab faults.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, mannwhitneyu

__all__ = [
    "CONFIDENCE",
    "MIN_TAIL_RESAMPLES",
    "HIGH_CV",
    "MIN_BAND",
    "BAND_RATIO",
    "BAND_SEPARATION",
    "MIN_TRIALS",
    "DEFAULT_RESAMPLES",
    "VERDICTS",
    "MedianCI",
    "Summary",
    "TwoBand",
    "Delta",
    "median_ci",
    "summarize",
    "two_band",
    "compare",
    "as_values",
]

#: The confidence of every interval labctl reports and judges by (a median's, a change's; comparisons and
#: the advisor split it over the intervals they judge together, Bonferroni).
CONFIDENCE = 0.95

#: Fewest bootstrap resamples in each tail of an interval (below it the interval is the extremes):
#: comparisons and the advisor resample at least ``MIN_TAIL_RESAMPLES / ((1 - confidence) / 2)`` times.
MIN_TAIL_RESAMPLES = 5

#: Coefficient of variation above which a sample is flagged ``high_variance``. Repeated runs of one
#: configuration on a quiet host scatter by a few percent; above 10 % the scatter is as large as the
#: effects worth tuning for (a ring-size or pinning change is typically worth 5-20 %), so comparisons
#: need more trials. A two-band sample (8-10 vs 15-17 Mpps) has a cv near 30 % and is always flagged.
HIGH_CV = 0.10

#: Fewest values each band of a two-band result must hold. One stray value is an outlier, not a band.
MIN_BAND = 2

#: Smallest ratio of the high band's median to the low band's median for a two-band call. The bands
#: seen on this host differ by ~1.8x; ordinary unimodal noise at cv 3-5 % never produces 1.25x between
#: the medians of two halves of a sample.
BAND_RATIO = 1.25

#: Smallest gap between the bands, in units of the larger within-band standard deviation. Chosen by
#: simulation (2000 samples per cell, n = 4..20): at 3.0 the detector never fired on normal noise with
#: cv 5 %, fired on about 2 % of samples at cv 10 % (n <= 6; under 1 % for n >= 8), and caught more
#: than 99 % of samples drawn from bands N(9, 0.5) and N(16, 0.5). With only 4-6 values, noise with cv
#: 20-30 % can look like two bands about 8 % of the time; such samples are high-variance anyway.
BAND_SEPARATION = 3.0

#: Fewest trials per side for :func:`compare` to give anything but "inconclusive".
MIN_TRIALS = 3

#: Bootstrap resamples used by :func:`compare`.
DEFAULT_RESAMPLES = 10_000

#: The verdicts :func:`compare` can return.
VERDICTS = ("better", "worse", "no difference", "inconclusive")


# --------------------------------------------------------------------------------------------------
# helpers


def as_values(values: Iterable[float], name: str = "values") -> np.ndarray:
    """A 1-D float array of finite values; ValueError on empty, non-numeric or non-finite input."""
    if not isinstance(values, np.ndarray):
        values = list(values)
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: not a sequence of numbers") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a flat sequence of numbers, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: no values")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or infinite values")
    return arr


def _check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    return confidence


def _num(x: float) -> str:
    """Compact number for reports: one decimal for magnitudes >= 1 (Mpps), 3 significant digits below."""
    if x == 0 or abs(x) >= 1:
        return f"{x:.1f}"
    return f"{x:.3g}"


def _pct(x: float) -> str:
    return f"{x:+.1f}"


# --------------------------------------------------------------------------------------------------
# median confidence interval


@dataclass(frozen=True)
class MedianCI:
    """A distribution-free confidence interval for the median.

    ``low``/``high`` are order statistics of the sample (None when n < 2). ``coverage`` is the
    interval's actual coverage probability for continuous data (it is at least ``confidence`` when
    ``exact`` is True). ``exact`` is False when the sample is too small to reach the requested
    confidence: the interval is then the widest available one, [min, max], whose coverage
    ``1 - 2 * 0.5**n`` is below the request (e.g. 93.75 % for n = 5 at 95 %).
    """

    low: float | None
    high: float | None
    confidence: float
    coverage: float | None
    exact: bool


def median_ci(values: Iterable[float], confidence: float = CONFIDENCE) -> MedianCI:
    """Order-statistic (binomial) confidence interval for the population median.

    Method: with the sample sorted as x(1) <= ... <= x(n), the interval [x(k), x(n+1-k)] covers the
    true median unless fewer than k values fall below it or fewer than k above it. The count below the
    median is Binomial(n, 1/2) whatever the distribution, so the coverage is exactly
    ``1 - 2 * P(B <= k - 1)``, B ~ Bin(n, 1/2), for continuous data (conservative with ties). The
    largest k whose coverage reaches ``confidence`` gives the narrowest valid interval. No normality
    and no resampling are assumed, which suits 3-10 trials with occasional outliers.

    When even k = 1 ([min, max]) falls short (n <= 5 at 95 %), [min, max] is returned with
    ``exact=False`` and its true coverage. For n < 2 the bounds are None.
    """
    confidence = _check_confidence(confidence)
    x = np.sort(as_values(values))
    n = x.size
    if n < 2:
        return MedianCI(None, None, confidence, None, False)
    ks = np.arange(1, n // 2 + 1)
    coverage = 1.0 - 2.0 * binom.cdf(ks - 1, n, 0.5)
    ok = np.nonzero(coverage >= confidence - 1e-12)[0]
    if ok.size == 0:
        k, exact = 1, False
        cov = float(coverage[0])
    else:
        i = int(ok[-1])  # coverage decreases with k: the last k that still reaches the request
        k, exact = int(ks[i]), True
        cov = float(coverage[i])
    return MedianCI(float(x[k - 1]), float(x[n - k]), confidence, cov, exact)


# --------------------------------------------------------------------------------------------------
# two-band detection


@dataclass(frozen=True)
class TwoBand:
    """A sample split into a low and a high band (see :func:`two_band`).

    ``low``/``high`` hold the band values in ascending order; ``gap`` is the distance between the top
    of the low band and the bottom of the high band; ``ratio`` is high_median / low_median;
    ``separation`` is gap / (larger within-band standard deviation), inf when both bands are flat.
    """

    low: tuple[float, ...]
    high: tuple[float, ...]
    low_median: float
    high_median: float
    gap: float
    ratio: float
    separation: float

    @property
    def n_low(self) -> int:
        return len(self.low)

    @property
    def n_high(self) -> int:
        return len(self.high)

    def format(self) -> str:
        """E.g. ``two bands: 8.9 (n=3) and 16.1 (n=3)``."""
        return (
            f"two bands: {_num(self.low_median)} (n={self.n_low}) "
            f"and {_num(self.high_median)} (n={self.n_high})"
        )

    def __str__(self) -> str:
        return self.format()


def two_band(
    values: Iterable[float],
    *,
    min_band: int = MIN_BAND,
    min_ratio: float = BAND_RATIO,
    min_separation: float = BAND_SEPARATION,
) -> TwoBand | None:
    """Detect a two-band (bimodal) sample, as produced by this host's noise; None if not two-band.

    Method: sort the values and split them at the largest gap between consecutive values among the
    splits that leave at least ``min_band`` values on each side (so n < 2 * min_band, i.e. n < 4 by
    default, is never two-band). The split is called two-band only when both

    - the band medians differ by a meaningful ratio: high_median / low_median >= ``min_ratio``
      (1.25); this is what keeps ordinary cv 3-5 % noise from ever firing, and
    - the gap is large against the spread inside the bands: gap >= ``min_separation`` (3.0) times
      the larger of the two bands' sample standard deviations.

    The ratio rule needs positive measurements (throughput); if the low band's median is <= 0 the
    result is None. See the module constants for how the thresholds were chosen.
    """
    x = np.sort(as_values(values))
    n = x.size
    if min_band < 2:
        raise ValueError("min_band must be at least 2 (a band needs a spread)")
    if n < 2 * min_band:
        return None
    gaps = np.diff(x)  # gaps[i - 1] is the gap just below x[i]
    splits = np.arange(min_band, n - min_band + 1)  # split before index i
    i = int(splits[np.argmax(gaps[splits - 1])])
    low, high = x[:i], x[i:]
    low_median, high_median = float(np.median(low)), float(np.median(high))
    if low_median <= 0:
        return None
    ratio = high_median / low_median
    if ratio < min_ratio:
        return None
    gap = float(x[i] - x[i - 1])
    spread = max(float(np.std(low, ddof=1)), float(np.std(high, ddof=1)))
    separation = gap / spread if spread > 0 else math.inf
    if separation < min_separation:
        return None
    return TwoBand(
        low=tuple(float(v) for v in low),
        high=tuple(float(v) for v in high),
        low_median=low_median,
        high_median=high_median,
        gap=gap,
        ratio=ratio,
        separation=separation,
    )


# --------------------------------------------------------------------------------------------------
# summary


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one configuration's trials (see :func:`summarize`).

    ``stdev`` is the sample standard deviation (ddof=1) and ``cv`` = stdev / |mean|; both are None
    for n < 2 (cv also when the mean is 0). ``ci_low``/``ci_high`` bound the median (order-statistic
    method, :func:`median_ci`); ``ci_coverage`` is the interval's actual coverage and ``ci_exact`` is
    False when it is below the requested ``confidence`` (small n) or there is no interval (n < 2).
    ``bimodal`` is True when :func:`two_band` found two bands (they are in ``bands``);
    ``high_variance`` is True when cv > ``cv_threshold``.
    """

    n: int
    median: float
    mean: float
    stdev: float | None
    cv: float | None
    minimum: float
    maximum: float
    ci_low: float | None
    ci_high: float | None
    confidence: float
    ci_coverage: float | None
    ci_exact: bool
    bimodal: bool
    bands: TwoBand | None
    high_variance: bool
    cv_threshold: float

    def format(self) -> str:
        """E.g. ``12.3 [11.8, 12.9] (95% CI, n=5, cv 3.1%)`` followed by any warnings."""
        if self.ci_low is None or self.ci_high is None:
            ci = "[no CI]"
        else:
            ci = f"[{_num(self.ci_low)}, {_num(self.ci_high)}]"
        parts = [f"n={self.n}"]
        if self.ci_low is not None:
            parts.insert(0, f"{self.confidence:.0%} CI" if self.ci_exact else "CI")
        if self.cv is not None:
            parts.append(f"cv {self.cv:.1%}")
        text = f"{_num(self.median)} {ci} ({', '.join(parts)})"
        notes = []
        if self.ci_low is not None and not self.ci_exact and self.ci_coverage is not None:
            notes.append(f"only {self.ci_coverage:.1%} coverage with n={self.n}")
        if self.bands is not None:
            notes.append(self.bands.format())
        if self.high_variance:
            notes.append("high variance")
        return text + "".join(f"; {note}" for note in notes)

    def __str__(self) -> str:
        return self.format()


def summarize(
    values: Iterable[float],
    confidence: float = CONFIDENCE,
    *,
    cv_threshold: float = HIGH_CV,
) -> Summary:
    """Summarize repeated trials: n, median, mean, stdev, cv, a CI for the median and two flags.

    The median interval is the distribution-free order-statistic interval of :func:`median_ci`
    (widest available, flagged ``ci_exact=False``, when n is too small for ``confidence``; None for
    n < 2). ``bimodal`` comes from :func:`two_band` with its default thresholds, ``high_variance``
    from cv > ``cv_threshold`` (default :data:`HIGH_CV` = 0.10).
    """
    x = as_values(values)
    ci = median_ci(x, confidence)
    n = int(x.size)
    mean = float(np.mean(x))
    if n >= 2:
        stdev: float | None = float(np.std(x, ddof=1))
        cv = stdev / abs(mean) if mean != 0 else None
    else:
        stdev = cv = None
    bands = two_band(x)
    return Summary(
        n=n,
        median=float(np.median(x)),
        mean=mean,
        stdev=stdev,
        cv=cv,
        minimum=float(np.min(x)),
        maximum=float(np.max(x)),
        ci_low=ci.low,
        ci_high=ci.high,
        confidence=ci.confidence,
        ci_coverage=ci.coverage,
        ci_exact=ci.exact,
        bimodal=bands is not None,
        bands=bands,
        high_variance=cv is not None and cv > cv_threshold,
        cv_threshold=cv_threshold,
    )


# --------------------------------------------------------------------------------------------------
# comparison


@dataclass(frozen=True)
class Delta:
    """The change of a candidate configuration against a baseline (see :func:`compare`).

    ``change_pct`` = 100 * (candidate_median / baseline_median - 1). ``ci_low_pct``/``ci_high_pct``
    bound it (percentile bootstrap at ``confidence``; None when either side has fewer than 2 values).
    ``p_value`` is the two-sided Mann-Whitney U p-value, reported for reference only. ``verdict`` is
    one of :data:`VERDICTS` and ``reason`` says why in one line. ``baseline_bands`` and
    ``candidate_bands`` hold a two-band split of either side, if one was found.
    """

    baseline_median: float
    candidate_median: float
    change_pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    confidence: float
    p_value: float
    n_baseline: int
    n_candidate: int
    verdict: str
    reason: str
    higher_is_better: bool
    baseline_bands: TwoBand | None
    candidate_bands: TwoBand | None
    n_resamples: int

    @property
    def significant(self) -> bool:
        """True when the verdict is "better" or "worse"."""
        return self.verdict in ("better", "worse")

    def format(self) -> str:
        """The change and its interval, e.g. ``+16.2% [+12.0, +20.1]`` (``[n/a]`` without a CI)."""
        if self.ci_low_pct is None or self.ci_high_pct is None:
            return f"{_pct(self.change_pct)}% [n/a]"
        return f"{_pct(self.change_pct)}% [{_pct(self.ci_low_pct)}, {_pct(self.ci_high_pct)}]"

    def describe(self) -> str:
        """One report line, e.g. ``+16.2% [+12.0, +20.1] better (p=0.008, n=5 vs 5)``."""
        text = (
            f"{self.format()} {self.verdict} "
            f"(p={self.p_value:.2g}, n={self.n_baseline} vs {self.n_candidate})"
        )
        if self.verdict == "inconclusive":
            text += f": {self.reason}"
        return text

    def __str__(self) -> str:
        return self.describe()


def _bootstrap_medians(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, x.size, size=(n_resamples, x.size))
    return np.median(x[idx], axis=1)


def compare(
    baseline: Iterable[float],
    candidate: Iterable[float],
    confidence: float = CONFIDENCE,
    seed: int | np.random.Generator = 0,
    *,
    higher_is_better: bool = True,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> Delta:
    """Compare a candidate configuration's trials against a baseline's.

    Estimate: the relative change of the medians, 100 * (median(candidate) / median(baseline) - 1).

    Interval: percentile bootstrap. Each side is resampled with replacement on its own,
    ``n_resamples`` times, the relative change of the resampled medians is computed each time, and the
    (1 - confidence)/2 and (1 + confidence)/2 quantiles bound it. The generator is
    ``numpy.random.default_rng(seed)`` (or ``seed`` itself if it is a Generator), so results are
    reproducible.

    p-value: two-sided Mann-Whitney U (``scipy.stats.mannwhitneyu``; exact for small samples without
    ties), reported for reference.

    Verdict, in this order:

    - "inconclusive" when either side has fewer than :data:`MIN_TRIALS` (3) values, or either side is
      two-band (:func:`two_band`): a median of a two-band sample depends on how many runs happened to
      land in each band, so a difference between two such medians says nothing about the change;
    - "no difference" when the interval contains 0 (read: no difference *detected* at this n);
    - "better"/"worse" when the interval excludes 0, by its sign and ``higher_is_better``
      (set it False for latency or loss).

    Why the interval and not the p-value decides: with 3 trials against 3, the smallest two-sided
    Mann-Whitney p-value possible is 2 / C(6, 3) = 0.1, so a "p < 0.05" rule could never call any
    change at the trial counts this lab can afford; and a p-value says nothing about the size or
    direction of the change, which is what the advisor ranks by. The interval gives both. Its cost, to
    be aware of: with 3 vs 3 the 95 % bootstrap interval is exactly
    [min(c)/max(b) - 1, max(c)/min(b) - 1], so "better" means every candidate trial beat every
    baseline trial, which happens by chance 10 % of the time (the same event as p = 0.1). From 5
    trials per side the simulated false-positive rate is at or below the nominal 5 %.

    ``baseline`` values must all be > 0 (a relative change to a zero baseline is undefined; drop failed
    zero-throughput trials before comparing). ValueError otherwise.
    """
    confidence = _check_confidence(confidence)
    b = as_values(baseline, "baseline")
    c = as_values(candidate, "candidate")
    if np.any(b <= 0):
        raise ValueError(
            "baseline: relative change needs positive values; drop failed (zero) trials first"
        )
    if n_resamples < 100:
        raise ValueError("n_resamples must be at least 100")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)

    med_b, med_c = float(np.median(b)), float(np.median(c))
    change = 100.0 * (med_c / med_b - 1.0)

    ci_low = ci_high = None
    if b.size >= 2 and c.size >= 2:
        boot_b = _bootstrap_medians(b, n_resamples, rng)
        boot_c = _bootstrap_medians(c, n_resamples, rng)
        deltas = 100.0 * (boot_c / boot_b - 1.0)
        alpha = 1.0 - confidence
        lo, hi = np.quantile(deltas, [alpha / 2.0, 1.0 - alpha / 2.0])
        ci_low, ci_high = float(lo), float(hi)

    p = float(mannwhitneyu(c, b, alternative="two-sided").pvalue)
    if math.isnan(p):  # degenerate input (e.g. all values equal): no evidence of a difference
        p = 1.0

    bands_b = two_band(b)
    bands_c = two_band(c)

    if b.size < MIN_TRIALS or c.size < MIN_TRIALS:
        verdict = "inconclusive"
        reason = (
            f"fewer than {MIN_TRIALS} trials (baseline {b.size}, candidate {c.size}); repeat the runs"
        )
    elif bands_b is not None or bands_c is not None:
        verdict = "inconclusive"
        which = []
        if bands_b is not None:
            which.append(f"baseline {bands_b.format()}")
        if bands_c is not None:
            which.append(f"candidate {bands_c.format()}")
        reason = "; ".join(which) + " - medians of two-band results are not comparable"
    elif ci_low is not None and ci_high is not None and ci_low <= 0.0 <= ci_high:
        verdict = "no difference"
        reason = f"the {confidence:.0%} interval of the change contains 0"
    else:
        up = ci_low is not None and ci_low > 0.0
        verdict = "better" if up == higher_is_better else "worse"
        reason = f"the {confidence:.0%} interval of the change excludes 0"

    return Delta(
        baseline_median=med_b,
        candidate_median=med_c,
        change_pct=change,
        ci_low_pct=ci_low,
        ci_high_pct=ci_high,
        confidence=confidence,
        p_value=p,
        n_baseline=int(b.size),
        n_candidate=int(c.size),
        verdict=verdict,
        reason=reason,
        higher_is_better=higher_is_better,
        baseline_bands=bands_b,
        candidate_bands=bands_c,
        n_resamples=n_resamples,
    )
