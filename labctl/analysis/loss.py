"""Loss ratios (lost / offered packets) of repeated trials: the median with a distribution-free interval.

:func:`loss_summary` -> :class:`LossSummary`, the order-statistic interval of
:func:`labctl.analysis.statistics.median_ci` applied to per-trial ratios. Bad input (no values, NaN,
a ratio outside [0, 1]) raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from labctl.analysis.statistics import CONFIDENCE, as_values, median_ci

__all__ = ["LossSummary", "loss_summary", "loss_upper_bound"]


@dataclass(frozen=True)
class LossSummary:
    """Loss ratios (lost / offered packets) of repeated trials (see :func:`loss_summary`).

    ``median`` with the order-statistic interval ``ci_low``/``ci_high`` (``ci_exact`` and
    ``ci_coverage`` as in :class:`Summary`), the worst trial ``maximum`` and ``lossless``, the number
    of trials that lost nothing.
    """

    n: int
    median: float
    ci_low: float | None
    ci_high: float | None
    confidence: float
    ci_coverage: float | None
    ci_exact: bool
    maximum: float
    lossless: int

    @property
    def lossless_fraction(self) -> float:
        return self.lossless / self.n

    def format(self) -> str:
        """Percentages, e.g. ``0.02% [0.01%, 0.04%] (95% CI, n=7, 2/7 lossless, worst 0.04%)``."""

        def pc(x: float) -> str:
            return f"{100.0 * x:.2g}%"

        ci = "[no CI]" if self.ci_low is None or self.ci_high is None else (
            f"[{pc(self.ci_low)}, {pc(self.ci_high)}]"
        )
        level = f"{self.confidence:.0%} CI" if self.ci_exact else "CI"
        return (
            f"{pc(self.median)} {ci} ({level}, n={self.n}, {self.lossless}/{self.n} lossless, "
            f"worst {pc(self.maximum)})"
        )

    def __str__(self) -> str:
        return self.format()


def loss_summary(ratios: Iterable[float], confidence: float = CONFIDENCE) -> LossSummary:
    """Median loss ratio across trials with a distribution-free interval.

    Method: the order-statistic interval of :func:`median_ci`, applied to the ratios as they are.
    Order statistics need no transformation, cope with exact zeros (lossless trials) and with the
    heavy right tail loss ratios have. Per-trial ratios are summarized, rather than pooling packet
    counts into one binomial proportion, because loss varies far more from run to run (scheduling on
    a 2-vCPU host) than binomial sampling of packets would allow: a pooled interval would be much too
    narrow. Each ratio must lie in [0, 1] (ValueError otherwise).
    """
    r = as_values(ratios, "ratios")
    if np.any(r < 0) or np.any(r > 1):
        raise ValueError("ratios: loss ratios must lie between 0 and 1")
    ci = median_ci(r, confidence)
    return LossSummary(
        n=int(r.size),
        median=float(np.median(r)),
        ci_low=ci.low,
        ci_high=ci.high,
        confidence=ci.confidence,
        ci_coverage=ci.coverage,
        ci_exact=ci.exact,
        maximum=float(np.max(r)),
        lossless=int(np.count_nonzero(r == 0)),
    )


def loss_upper_bound(lost: int, offered: int, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided upper confidence bound of one long trial's loss ratio (a soak's), from its counts.

    Method: the exact binomial (Clopper-Pearson 1934) upper limit, the ``confidence`` quantile of
    Beta(lost + 1, offered - lost); with no loss it is ``1 - (1 - confidence) ** (1 / offered)``, which at 95%
    is 2.996 / offered: the "rule of three" (Hanley & Lippman-Hand 1983), zero loss in N packets bounding the
    ratio at 3/N. It treats each packet as an independent chance of loss; real loss comes in bursts (a host
    stall drops a ring's worth at once), so the bound says how small a steady loss rate the packets counted
    can rule out, not how often a burst recurs: the soak's loss events and their timing say that. None when
    nothing was offered."""
    from scipy.stats import beta  # lazy: scipy

    if lost < 0 or offered < 0 or lost > offered:
        raise ValueError(f"lost {lost} of {offered} offered: not a loss count")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence}: not in (0, 1)")
    if offered == 0:
        return None
    if lost == offered:
        return 1.0
    if lost == 0:
        return 1.0 - (1.0 - confidence) ** (1.0 / offered)
    return float(beta.ppf(confidence, lost + 1, offered - lost))
