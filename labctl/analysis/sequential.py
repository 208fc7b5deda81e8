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

Looking after every round must not inflate false verdicts, so the error is spent across the looks
(Lan & DeMets 1983, "Discrete sequential boundaries for clinical trials", Biometrika 70:659; Jennison &
Turnbull 2000, "Group Sequential Methods", ch. 7): by information fraction ``t`` (the pairs at a look over
the most the budget allows) the looks together may have spent ``A(t)`` of it, with ``A`` Lan and DeMets'
Pocock-type ``alpha * ln(1 + (e - 1) t)`` (default: spends early, so a large effect stops at the first
looks) or O'Brien-Fleming-type ``2 - 2 Phi(z_(alpha/2) / sqrt(t))`` (``spending="obf"``: keeps nearly all
of it for the last). Each look's boundary is *exact* (:func:`boundaries`): the chance that noise alone first
crosses it at that look, given that it crossed none before, is the look's increment ``A(t_k) - A(t_(k-1))``,
computed by recursive numerical integration over the looks' joint normal law (Armitage, McPherson & Rowe
1969, J. R. Stat. Soc. A 132:235; Jennison & Turnbull 2000, ch. 19). So over all looks noise alone makes a
false verdict with chance at most ``alpha``, and each look tests at a nominal level larger than its bare
increment (the looks are correlated: a Bonferroni split would waste that). A direction (better or worse
beyond ``±threshold``) is two one-sided tests of ``alpha / 2`` each; equivalence is two one-sided tests
of ``alpha`` each (Schuirmann's TOST, run group-sequentially: Jennison & Turnbull 2000, ch. 6). With the
variance estimated, the nominal levels are read on Student's t (Jennison & Turnbull 2000, ch. 11).

The confidence a verdict states is the one achieved: one minus the nominal level of the look that decided
it (not the nominal 95 %). For a comparison still open, :func:`verdict_chance` is the predictive
probability (Spiegelhalter, Freedman & Blackburn 1986, Control. Clin. Trials 7:8) that the budget's last
look reaches any verdict, the noise and change seen so far carried forward: the sweep stops measuring a
comparison whose chance is below its futility level (*out of reach*; a stop without a verdict cannot make a
false one, so the error stays within alpha). When the budget ends, :func:`needed_pairs` says how many pairs
the observed noise would need to decide it at the final look's level.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats

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


#: points of the grid each look's density is carried on (the boundaries agree with published tables,
#: ldbounds/gsDesign, to 1e-4)
GRID = 601
#: where the grid stops below the mean, in standard deviations (the mass below is under 1e-15)
TAIL = 8.0


@functools.lru_cache(maxsize=4096)
def boundaries(fractions: tuple[float, ...], alpha: float, spending: str = "pocock") -> tuple[float, ...]:
    """One-sided upper boundaries ``z_1 .. z_K`` of a group-sequential test of level ``alpha`` spent by
    ``spending`` at information fractions ``fractions`` (increasing, in (0, 1]): under no effect the
    standardized statistic ``Z_k`` first reaches ``z_k`` at look ``k`` with chance ``A(t_k) - A(t_(k-1))``.
    The density of the score ``S_k = Z_k sqrt(t_k)`` below the boundary is carried from look to look on a
    grid (independent increments of variance ``t_k - t_(k-1)``), and each ``z_k`` solved for by Brent's
    method. A look that adds no information, or whose increment is zero, gets ``inf`` (no crossing)."""
    out: list[float] = []
    grid: np.ndarray | None = None
    mass = np.empty(0)
    t_prev = spent_prev = 0.0
    for t in fractions:
        t = min(max(float(t), 0.0), 1.0)
        share = spent(t, alpha, spending) - spent_prev
        if t <= t_prev or share <= 0.0:
            out.append(math.inf)
            continue
        step = math.sqrt(t - t_prev)
        low = -TAIL * math.sqrt(t)
        if grid is None:
            bound = float(stats.norm.isf(share)) * math.sqrt(t)
            new = np.linspace(low, bound, GRID)
            density = stats.norm.pdf(new / math.sqrt(t)) / math.sqrt(t)
        else:
            carried = mass

            def beyond(b: float) -> float:
                return float(np.sum(carried * stats.norm.sf((b - grid) / step))) - share

            top = float(grid[-1]) + TAIL * step
            bound = optimize.brentq(beyond, float(grid[0]), top, xtol=1e-10) if beyond(float(grid[0])) > 0 else float(grid[0])
            new = np.linspace(low, bound, GRID)
            density = (carried[None, :] * stats.norm.pdf((new[:, None] - grid[None, :]) / step) / step).sum(axis=1)
        width = new[1] - new[0]
        weights = np.full(GRID, width)
        weights[0] = weights[-1] = width / 2.0  # the trapezoid rule
        grid, mass = new, weights * density
        out.append(bound / math.sqrt(t))
        t_prev, spent_prev = t, spent_prev + share
    return tuple(out)


def look_levels(fractions: Sequence[float], alpha: float = ALPHA, spending: str = "pocock") -> tuple[float, float]:
    """The nominal levels of the last of ``fractions``' looks: ``(two-sided level of a direction, one-sided
    level of each of the equivalence test's two tests)``; (0, 0) when the look may not decide."""
    key = tuple(round(min(max(float(f), 0.0), 1.0), 9) for f in fractions)
    direction = boundaries(key, alpha / 2.0, spending)[-1]
    equivalence = boundaries(key, alpha, spending)[-1]
    return 2.0 * float(stats.norm.sf(direction)), float(stats.norm.sf(equivalence))


def final_levels(fractions: Sequence[float], alpha: float = ALPHA, spending: str = "pocock") -> tuple[float, float]:
    """The levels the budget's last look (information fraction 1) would test at after ``fractions``."""
    done = [f for f in fractions if f < 1.0]
    return look_levels([*done, 1.0], alpha, spending)


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
    alpha: float  # the nominal level of the test that decided (a direction: two-sided; equivalence: TOST's size)
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


def _finite(diffs: Sequence[float | None]) -> np.ndarray:
    """The differences that are numbers (a pair without one is left out)."""
    return np.asarray([x for x in diffs if x is not None and math.isfinite(x)], dtype=float)


def decide(diffs: Sequence[float], alpha_k: float, threshold_pct: float, lower_is_better: bool,
           scale: str = "log", refusal: str = "", alpha_eq: float | None = None) -> Decision:
    """The verdict of one comparison at one look: a direction tested at two-sided level ``alpha_k``,
    equivalence by two one-sided tests at ``alpha_eq`` each (default ``alpha_k``; see the module's text).
    ``diffs``: the paired differences, candidate against baseline; ``refusal``: a reason found
    elsewhere (two bands, zero rates) that refuses it outright."""
    d = _finite(diffs)
    n = len(d)
    if refusal:
        return Decision("refused", n, alpha_k, reason=refusal)
    if n < MIN_PAIRS or alpha_k <= 0.0:
        return Decision("open", n, alpha_k, reason=f"{n} pairs (a look needs {MIN_PAIRS})" if n < MIN_PAIRS else "")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    t2 = float(stats.t.ppf(1.0 - alpha_k / 2.0, n - 1))  # two-sided at alpha_k: a direction
    eq = alpha_k if alpha_eq is None else alpha_eq
    t1 = float(stats.t.ppf(1.0 - eq, n - 1)) if eq > 0.0 else math.inf  # 1 - 2 eq: TOST's interval
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
        return Decision("equivalent", n, eq, **shown)
    return Decision("open", n, alpha_k, **shown)


def verdict_chance(diffs: Sequence[float], final_pairs: int, final_levels_: tuple[float, float],
                   threshold_pct: float, scale: str = "log") -> float | None:
    """The predictive probability that the look at ``final_pairs`` pairs, testing at ``final_levels_``
    (:func:`final_levels`), reaches any verdict (better, worse or equivalent), given the pairs seen: the
    final mean is normal about the mean seen with variance ``sd^2 (N - n) / (N n)`` (the noise seen carried
    forward, the change unknown within what was seen). None: too few pairs to say."""
    d = _finite(diffs)
    n, big_n = len(d), int(final_pairs)
    if n < MIN_PAIRS or big_n <= n:
        return None
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    tau = band(threshold_pct, scale)
    a_dir, a_eq = final_levels_
    if sd == 0.0:
        return 1.0
    spread = sd * math.sqrt((big_n - n) / (big_n * n))
    half_dir = float(stats.t.ppf(1.0 - a_dir / 2.0, big_n - 1)) * sd / math.sqrt(big_n) if a_dir > 0 else math.inf
    half_eq = float(stats.t.ppf(1.0 - a_eq, big_n - 1)) * sd / math.sqrt(big_n) if a_eq > 0 else math.inf
    final = stats.norm(mean, spread)
    chance = float(final.sf(tau + half_dir) + final.cdf(-tau - half_dir))
    if half_eq < tau:
        chance += float(final.cdf(tau - half_eq) - final.cdf(-tau + half_eq))
    return min(max(chance, 0.0), 1.0)


def needed_pairs(diffs: Sequence[float], alpha_k: float, threshold_pct: float, scale: str = "log",
                 cap: int = 10_000) -> int | None:
    """How many pairs in all the observed noise would need to decide this comparison at level ``alpha_k``:
    the interval's half-width ``z * sd / sqrt(n)`` below the mean's distance to the band's edge (beyond
    it: a direction; inside: equivalence). None: the mean sits on the edge (no number of pairs will
    tell) or more than ``cap`` would be needed."""
    d = _finite(diffs)
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
