"""Sequential verdicts for ``labctl sweep --until decided``: one comparison's verdict at one look.

A *comparison* is a knob's value against its baseline value (the first value of the sweep), pooled
over the other knobs' values through within-block pairs: in every block (one repeat of every
configuration still needed) the candidate and the baseline were measured next to each other at the same
values of the other knobs, so a slow change of the host's speed falls on both. Each pair gives one
*paired difference* ``d``: the log of the ratio candidate / baseline for rates (an effect that scales
with the rate; the mean of the logs is the geometric mean ratio), or the plain difference for loss ratios
(which are often zero, so a ratio has no meaning; the threshold is then in percentage points of loss).

At look ``k`` of at most ``K`` the mean of the ``d`` and its Student t interval are compared with the band
``±threshold``:

- the whole two-sided interval at level ``alpha_k`` beyond ``+threshold`` or ``-threshold``: *better* or
  *worse* (the metric's direction from :mod:`labctl.results.metrics`);
- the whole ``1 - 2 alpha_k`` interval inside the band: *equivalent* (two one-sided tests, Schuirmann
  1987, "A comparison of the two one-sided tests procedure...", J. Pharmacokinet. Biopharm. 15:657);
- *refused* with a reason (zero or missing rates, two bands that do not mix, too few pairs to say);
- else *open*.

Looking after every round must not inflate false verdicts, so the error is spent across the looks:
``alpha_k = A(t_k) - A(t_(k-1))`` with ``t_k = n_k / n_max`` (the information fraction: the pairs at look k
over the most the budget allows) and ``A`` Lan and DeMets' Pocock-type spending function
``alpha * ln(1 + (e - 1) t)`` (Lan & DeMets 1983, "Discrete sequential boundaries for clinical trials",
Biometrika 70:659; Kim & DeMets 1987; Jennison & Turnbull 2000, "Group Sequential Methods", ch. 7). Each
look is tested at its own increment ``alpha_k`` alone: by the Bonferroni inequality the chance of any false
verdict over all looks is at most ``sum(alpha_k) <= alpha`` (conservative: the looks' correlation would
allow more). The Pocock type spends early, so a large effect stops at the first looks; O'Brien-Fleming's
``2 - 2 Phi(z / sqrt(t))`` (``spending="obf"``) keeps nearly all of it for the last.

The confidence a verdict states is the one achieved: ``1 - alpha_k`` of the look that decided it (not the
nominal 95 %). For a comparison still open when the budget ends, :func:`needed_pairs` says how many
pairs the observed noise would need to decide it at the final look's level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

from labctl.analysis.statistics import CONFIDENCE

ALPHA = 1.0 - CONFIDENCE
#: the most looks a sweep takes (each look spends a share of the error; more looks, smaller shares)
MAX_LOOKS = 8
#: the fewest pairs a look judges (a t interval on one pair has no width; two are barely one)
MIN_PAIRS = 3
SPENDINGS = ("pocock", "obf")
#: a rate at or below this is no rate: its ratio has no meaning
ZERO_RATE = 1e-12

Verdict = Literal["better", "worse", "equivalent", "refused", "open"]
DECIDED = ("better", "worse", "equivalent", "refused")


def spent(fraction: float, alpha: float = ALPHA, spending: str = "pocock") -> float:
    """The error spent by information fraction ``fraction`` (0..1): Lan-DeMets spending functions."""
    t = min(max(fraction, 0.0), 1.0)
    if t == 0.0:
        return 0.0
    if spending == "pocock":
        return alpha * math.log(1.0 + (math.e - 1.0) * t)
    if spending == "obf":
        return float(2.0 - 2.0 * stats.norm.cdf(stats.norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))
    raise ValueError(f"spending {spending}: not a spending function (allowed: {', '.join(SPENDINGS)})")


def look_alpha(n: int, n_before: int, n_max: int, alpha: float = ALPHA, spending: str = "pocock") -> float:
    """The level of the look at ``n`` pairs whose previous look was at ``n_before`` (0: the first)."""
    n_max = max(n_max, 1)
    return max(spent(n / n_max, alpha, spending) - spent(n_before / n_max, alpha, spending), 0.0)


def paired_difference(candidate: float | None, baseline: float | None, scale: str) -> float | None:
    """One pair's difference on ``scale`` (``log``: log ratio; ``diff``: plain); None when it has none."""
    if candidate is None or baseline is None or not (math.isfinite(candidate) and math.isfinite(baseline)):
        return None
    if scale == "diff":
        return candidate - baseline
    if candidate <= ZERO_RATE or baseline <= ZERO_RATE:
        return None
    return math.log(candidate / baseline)


def band(threshold_pct: float, scale: str) -> float:
    """The threshold on the scale of the differences: log(1 + T/100), or T percentage points."""
    return math.log1p(threshold_pct / 100.0) if scale == "log" else threshold_pct / 100.0


def change_pct(value: float, scale: str) -> float:
    """A difference shown as the user reads it: % change of the rate, or percentage points of loss."""
    if scale != "log":
        return value * 100.0
    return math.expm1(min(value, 50.0)) * 100.0  # an interval at a tiny level and few pairs can be absurdly wide


@dataclass
class Decision:
    verdict: Verdict
    pairs: int
    alpha: float  # the level this look tested at (its share of the error)
    change_pct: float | None = None  # the mean difference, as % change (or loss points)
    low_pct: float | None = None  # the interval at this look's level
    high_pct: float | None = None
    sd: float | None = None  # of the differences
    reason: str = ""

    @property
    def confidence(self) -> float:
        return 1.0 - self.alpha

    @property
    def decided(self) -> bool:
        return self.verdict in DECIDED

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "confidence": self.confidence}


def decide(diffs: Sequence[float], alpha_k: float, threshold_pct: float, lower_is_better: bool,
           scale: str = "log", refusal: str = "") -> Decision:
    """The verdict of one comparison at one look tested at level ``alpha_k`` (see the module's text).
    ``diffs``: the paired differences, candidate against baseline; ``refusal``: a reason found
    elsewhere (two bands, zero rates) that refuses it outright."""
    d = np.asarray([x for x in diffs if x is not None and math.isfinite(x)], dtype=float)
    n = len(d)
    if refusal:
        return Decision("refused", n, alpha_k, reason=refusal)
    if n < MIN_PAIRS or alpha_k <= 0.0:
        return Decision("open", n, alpha_k, reason=f"{n} pairs (a look needs {MIN_PAIRS})" if n < MIN_PAIRS else "")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    t2 = float(stats.t.ppf(1.0 - alpha_k / 2.0, n - 1))  # two-sided at alpha_k: a direction
    t1 = float(stats.t.ppf(1.0 - alpha_k, n - 1))  # 1 - 2 alpha_k: TOST's interval
    tau = band(threshold_pct, scale)
    low, high = mean - t2 * se, mean + t2 * se
    shown = dict(change_pct=change_pct(mean, scale), low_pct=change_pct(low, scale), high_pct=change_pct(high, scale),
                 sd=sd)
    if low > tau or high < -tau:
        up = low > tau
        verdict: Verdict = "worse" if up == lower_is_better else "better"
        return Decision(verdict, n, alpha_k, **shown)
    if mean - t1 * se > -tau and mean + t1 * se < tau:
        shown.update(low_pct=change_pct(mean - t1 * se, scale), high_pct=change_pct(mean + t1 * se, scale))
        return Decision("equivalent", n, alpha_k, **shown)
    return Decision("open", n, alpha_k, **shown)


def needed_pairs(diffs: Sequence[float], alpha_k: float, threshold_pct: float, scale: str = "log",
                 cap: int = 10_000) -> int | None:
    """How many pairs in all the observed noise would need to decide this comparison at level ``alpha_k``:
    the interval's half-width ``z * sd / sqrt(n)`` below the mean's distance to the band's edge (beyond
    it: a direction; inside: equivalence). None: the mean sits on the edge (no number of pairs will
    tell) or more than ``cap`` would be needed."""
    d = np.asarray([x for x in diffs if x is not None and math.isfinite(x)], dtype=float)
    if len(d) < 2 or alpha_k <= 0.0:
        return None
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    tau = band(threshold_pct, scale)
    gap = abs(abs(mean) - tau)
    if sd == 0.0:
        return len(d)
    z = float(stats.norm.ppf(1.0 - (alpha_k / 2.0 if abs(mean) > tau else alpha_k)))
    if gap <= 1e-9 or (z * sd / gap) ** 2 > cap:
        return None
    n = max(math.ceil((z * sd / gap) ** 2), MIN_PAIRS)
    q = 1.0 - (alpha_k / 2.0 if abs(mean) > tau else alpha_k)
    for _ in range(20):  # the t quantile is wider than z with few pairs: iterate to the fixed point
        wanted = max(math.ceil((float(stats.t.ppf(q, n - 1)) * sd / gap) ** 2), MIN_PAIRS)
        if wanted <= n or n > cap:
            break
        n = wanted
    return n if n <= cap else None


def max_looks(n_first: int, n_max: int, step: int, cap: int = MAX_LOOKS) -> int:
    """The looks a budget allows: the first at ``n_first`` pairs, then one every ``step`` up to ``n_max``
    (capped at ``cap``, at most :data:`MAX_LOOKS`)."""
    if n_max <= n_first:
        return 1
    return min(1 + math.ceil((n_max - n_first) / max(step, 1)), cap, MAX_LOOKS)
