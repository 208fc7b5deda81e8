"""The trials of a sweep arranged for comparison, and the pooled effects between them.

:class:`_Cell` holds the trials of one configuration with its bootstrap medians; :class:`_Effect` is a
value's effect against another, pooled over like-for-like pairs of cells; :class:`_Effects` groups the
trials into cells, finds two-band results and estimates rate and loss effects (steps 1-4 of the method
in :mod:`advisor.recommend`). The decisions on top of it are :class:`advisor.engine._Analysis`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from labctl.analysis import statistics
from labctl.results.metrics import SHORT_NAMES, TCP_RATES, lookup
from labctl.results.record import TrialRecord

from advisor.advice import show_value
from advisor.facts import _drop_shares, _pollers_apart, pinning_layout, trial_loss
from advisor.knobs import Knob

__all__ = [
    "LOSS_FACTOR",
    "MIN_REPEATS",
    "MIN_POOLED_STRATA",
    "MIN_POOLED_TRIALS",
    "BAND_SHARE",
    "N_BOOT",
    "Rate",
    "FORWARDING",
    "rate_of",
]

#: A "lower loss" must at least halve the reference's median loss ratio; loss ratios scatter by tens of
#: percent from run to run, so smaller reductions are noise.
LOSS_FACTOR = 2.0

#: Trials per configuration for a within-configuration (stage-2) bootstrap; :data:`statistics.MIN_TRIALS`.
MIN_REPEATS = statistics.MIN_TRIALS

#: With fewer repeats per configuration, pooling needs this many strata and trials per value.
MIN_POOLED_STRATA = 3
MIN_POOLED_TRIALS = 6

#: Share of bimodal cells (at least 2) from which the whole data set is treated as band-limited.
BAND_SHARE = 0.25

#: Bootstrap resamples.
N_BOOT = 4000



# --------------------------------------------------------------------------------------------------
# the rate ranked


@dataclass(frozen=True)
class Rate:
    """The rate the analysis ranks (higher is better) and its words: ``metric`` (the record's field the
    cells hold), ``unit`` and ``verb`` for the rationale, whether a loss limit applies (forwarding
    trials lose packets; TCP retransmits what its path drops), and the service demands (lower is better)
    a recommendation quotes beside the rate."""

    metric: str = "mpps"
    unit: str = "Mpps"
    verb: str = "forwarded"
    loss_limited: bool = True
    demands: tuple[str, ...] = ()
    at_goal: bool = False  # an NDR/PDR rate: found at its loss goal, so no loss is left to weigh

    def value(self, record: TrialRecord) -> float | None:
        """The trial's value of this rate (its own field of the record), or None."""
        value = getattr(record.metrics, self.metric)
        return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

    def loss(self, record: TrialRecord) -> float | None:
        """The loss weighed beside the rate: the trial's own for ``mpps``, 0 for an NDR/PDR rate (at its
        loss goal by construction), None where no loss limit applies (TCP retransmits what is lost)."""
        if not self.loss_limited:
            return None
        return 0.0 if self.at_goal else trial_loss(record)

    def drop_shares(self, record: TrialRecord) -> dict[str, float]:
        """Where the trial's packets were dropped, for a rate measured at the trial's own load only."""
        return _drop_shares(record) if self.loss_limited and not self.at_goal else {}

    def show(self, x: float) -> str:
        """A median of this rate: ``9.81`` Mpps, ``2.530`` Gbit/s, ``4357`` trans/s."""
        if self.loss_limited:
            return f"{x:.2f}"
        return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3f}"


#: The forwarding rate at the trial's load (``mpps``).
FORWARDING = Rate()


def rate_of(metric: str) -> Rate:
    """The :class:`Rate` of ``metric``: a tcp kind's rate (:data:`labctl.results.metrics.TCP_RATES`, with
    its service demands and no loss limit), an NDR/PDR search's rate (at its loss goal), else the
    forwarding rate."""
    if metric in TCP_RATES:
        return Rate(metric, SHORT_NAMES[metric], "reached", False, TCP_RATES[metric])
    found = lookup(metric)
    if found is not None and found.kind == "search":
        return Rate(found.name, found.unit, at_goal=True)
    return FORWARDING


# --------------------------------------------------------------------------------------------------
# the analysis


class _Cell:
    """The trials of one configuration (one value of every dimension)."""

    def __init__(self, index: int, key: tuple[Any, ...]):
        self.index = index
        self.key = key
        self.refs: list[int] = []
        self.rates: list[float] = []
        self.loss: list[float | None] = []
        self.shares: list[dict[str, float]] = []
        self.configs: list[dict[str, Any]] = []
        self.demands: dict[str, list[float]] = {}  # service demand -> the trials' values (tcp kinds)
        self.bimodal = False
        self._boot: dict[str, np.ndarray] = {}

    @property
    def n(self) -> int:
        return len(self.rates)

    @property
    def has_loss(self) -> bool:
        return all(x is not None for x in self.loss)

    def median(self) -> float:
        return float(np.median(self.rates))

    def loss_median(self) -> float:
        return float(np.median([x for x in self.loss if x is not None]))

    def share_median(self, cause: str) -> float:
        return float(np.median([s.get(cause, 0.0) for s in self.shares]))

    def boot(self, what: str, seed: int) -> np.ndarray:
        """Bootstrap medians (``log_rate`` or ``loss``), N_BOOT of them, fixed per cell."""
        if what not in self._boot:
            rng = np.random.default_rng([seed, self.index, 0 if what == "log_rate" else 1])
            x = np.log(np.asarray(self.rates)) if what == "log_rate" else np.asarray(self.loss, dtype=float)
            idx = rng.integers(0, x.size, size=(N_BOOT, x.size))
            self._boot[what] = np.median(x[idx], axis=1)
        return self._boot[what]


@dataclass
class _Effect:
    """A pooled effect of value a against value b over ``pairs`` of cells (a_cell, b_cell)."""

    est_pct: float
    lo_pct: float
    hi_pct: float
    pairs: list[tuple[_Cell, _Cell]]
    boots: np.ndarray  # pooled log ratios (rate) or loss differences (loss), N_BOOT
    diff_hi: float = 0.0  # loss only: upper bound of the absolute difference
    ratio: float = 1.0  # loss only: pooled median loss ratio a / b

    @property
    def n_a(self) -> int:
        return sum(a.n for a, _ in self.pairs)

    @property
    def n_b(self) -> int:
        return sum(b.n for _, b in self.pairs)

    @property
    def refs(self) -> list[int]:
        out: set[int] = set()
        for a, b in self.pairs:
            out.update(a.refs)
            out.update(b.refs)
        return sorted(out)

    def format(self) -> str:
        return f"{self.est_pct:+.1f}% [{self.lo_pct:+.1f}, {self.hi_pct:+.1f}]"


class _Effects:
    """The trials in cells (one per configuration) with their labels and bands, the settings of the
    analysis (loss limit, confidence, noise floor, seed), and the pooled rate and loss effects between
    cells with the verdicts "better", "worse" and "lower loss"."""

    def __init__(self, records: list[TrialRecord], refs: list[int], dims: list[Knob], max_loss: float,
                 confidence: float, noise_floor_pct: float, seed: int, rate: Rate = FORWARDING):
        self.rate = rate
        self.dims = dims
        self.max_loss = max_loss
        self.confidence = confidence
        self.floor = noise_floor_pct
        self.seed = seed
        self.family = max(1, sum(1 for d in dims if d.tunable))  # Bonferroni over the knobs
        self.saturated: dict[str, float] = {}  # knob -> lowest median loss, where no value met the limit
        self.cells: dict[tuple[Any, ...], _Cell] = {}
        self.labels: dict[tuple[int, Any], str] = {}
        self.order: dict[tuple[int, Any], int] = {}
        for ref, r in zip(refs, records):
            key = tuple(d.value_of(r.config, r.env) for d in dims)
            cell = self.cells.get(key)
            if cell is None:
                cell = self.cells[key] = _Cell(len(self.cells), key)
            cell.refs.append(ref)
            cell.rates.append(float(rate.value(r)))
            cell.loss.append(rate.loss(r))
            cell.shares.append(rate.drop_shares(r))
            cell.configs.append(r.config)
            for metric in rate.demands:
                value = getattr(r.metrics, metric)
                if value is not None and math.isfinite(value):
                    cell.demands.setdefault(metric, []).append(float(value))
            for i, (d, v) in enumerate(zip(dims, key)):
                if (i, v) not in self.labels:
                    self.order[(i, v)] = len(self.order)
                    if d.kind == "pinning":
                        self.labels[(i, v)] = pinning_layout(r.config)
                    else:
                        self.labels[(i, v)] = f"{d.short} {show_value(d.json_value(v))}"
        self.band: statistics.TwoBand | None = None
        self.band_limited = False
        self.bimodal_cells: list[_Cell] = []
        self.pollers_apart = bool(records) and all(_pollers_apart(r.env) for r in records)
        self._find_bands()

    # -- two bands ---------------------------------------------------------------------------------

    def _find_bands(self) -> None:
        values = [x for c in self.cells.values() for x in c.rates]
        band = statistics.two_band(values) if len(values) >= 2 * statistics.MIN_BAND else None
        if band is not None:
            threshold = (band.low[-1] + band.high[0]) / 2.0
            for cell in self.cells.values():
                if any(x < threshold for x in cell.rates) and any(x > threshold for x in cell.rates):
                    cell.bimodal = True
        for cell in self.cells.values():
            if cell.n >= 2 * statistics.MIN_BAND:
                own = statistics.two_band(cell.rates)
                if own is not None:
                    cell.bimodal = True
                    if band is None:
                        band = own
        self.bimodal_cells = [c for c in self.cells.values() if c.bimodal]
        if self.bimodal_cells:
            self.band = band
        share = len(self.bimodal_cells) / max(len(self.cells), 1)
        self.band_limited = len(self.bimodal_cells) >= 2 and share >= BAND_SHARE

    def band_reason(self) -> str:
        where = f"{len(self.bimodal_cells)} of {len(self.cells)} configurations landed in both"
        if self.band is not None:
            text = (f"two bands at {self.band.low_median:.1f} and {self.band.high_median:.1f} {self.rate.unit} "
                    f"({where}): a median then depends on which band its runs hit")
        else:
            text = f"two-band results ({where})"
        if not self.rate.loss_limited:
            return (text + "; check that the host's own speed is steady (labctl doctor --steadiness 20), keep "
                    "other labs off its CPUs, then interleave and repeat")
        if self.pollers_apart:
            return (text + "; the vswitch PMD and the guest's forwarding cores already ran on separate CPUs in "
                    "every trial, so the bands come from the host itself: check its steadiness (labctl doctor "
                    "--steadiness 20), then interleave and repeat, or measure on a quieter host")
        return (text + "; pin the vswitch PMD and the vCPUs to separate cores (labctl advise --plan), check "
                "that the host's own speed is steady (labctl doctor --steadiness 20), and repeat")

    # -- helpers -----------------------------------------------------------------------------------

    def label(self, k: int, value: Any) -> str:
        return self.labels.get((k, value), f"{self.dims[k].short} {value}")

    def strata(self, k: int, cells: Iterable[_Cell] | None = None) -> list[dict[Any, _Cell]]:
        groups: dict[tuple[Any, ...], dict[Any, _Cell]] = {}
        for cell in cells if cells is not None else self.cells.values():
            rest = cell.key[:k] + cell.key[k + 1:]
            groups.setdefault(rest, {})[cell.key[k]] = cell
        return list(groups.values())

    def _rng(self, *parts: Any) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(repr(parts).encode())])

    def _enough(self, pairs: list[tuple[_Cell, _Cell]]) -> bool:
        if min(min(a.n, b.n) for a, b in pairs) >= MIN_REPEATS:
            return True
        return (len(pairs) >= MIN_POOLED_STRATA and sum(a.n for a, _ in pairs) >= MIN_POOLED_TRIALS
                and sum(b.n for _, b in pairs) >= MIN_POOLED_TRIALS)

    def _pool(self, rows: np.ndarray, pairs: list[tuple[_Cell, _Cell]], rng: np.random.Generator) -> np.ndarray:
        """Pool per-pair bootstrap rows (m, B): mean over pairs; strata resampled too when the cells
        are too small for a within-cell bootstrap to carry the noise."""
        m = rows.shape[0]
        if min(min(a.n, b.n) for a, b in pairs) >= MIN_REPEATS or m == 1:
            return rows.mean(axis=0)
        idx = rng.integers(0, m, size=(N_BOOT, m))
        return rows[idx, np.arange(N_BOOT)[:, None]].mean(axis=1)

    def rate_effect(self, pairs: list[tuple[_Cell, _Cell]], confidence: float) -> _Effect:
        rng = self._rng("rate", [(a.index, b.index) for a, b in pairs])
        point = float(np.mean([math.log(a.median()) - math.log(b.median()) for a, b in pairs]))
        rows = np.stack([a.boot("log_rate", self.seed) - b.boot("log_rate", self.seed) for a, b in pairs])
        boots = self._pool(rows, pairs, rng)
        alpha = 1.0 - confidence
        lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
        est, lo_pct, hi_pct = 100 * math.expm1(point), 100 * math.expm1(lo), 100 * math.expm1(hi)
        if len(pairs) == 1 and min(pairs[0][0].n, pairs[0][1].n) >= 2:
            # one like-for-like comparison: the figures of statistics.compare, as labctl report shows them
            a, b = pairs[0]
            delta = statistics.compare(b.rates, a.rates, confidence=confidence, seed=self.seed, n_resamples=N_BOOT)
            est, lo_pct, hi_pct = delta.change_pct, delta.ci_low_pct, delta.ci_high_pct
        return _Effect(est, lo_pct, hi_pct, pairs, boots)

    def loss_effect(self, pairs: list[tuple[_Cell, _Cell]], confidence: float) -> _Effect | None:
        pairs = [(a, b) for a, b in pairs if a.has_loss and b.has_loss]
        if not pairs:
            return None
        rng = self._rng("loss", [(a.index, b.index) for a, b in pairs])
        mean_a = float(np.mean([a.loss_median() for a, _ in pairs]))
        mean_b = float(np.mean([b.loss_median() for _, b in pairs]))
        rows_a = np.stack([a.boot("loss", self.seed) for a, _ in pairs])
        rows_b = np.stack([b.boot("loss", self.seed) for _, b in pairs])
        m = len(pairs)
        if min(min(a.n, b.n) for a, b in pairs) >= MIN_REPEATS or m == 1:
            boot_a, boot_b = rows_a.mean(axis=0), rows_b.mean(axis=0)
        else:
            idx = rng.integers(0, m, size=(N_BOOT, m))
            cols = np.arange(N_BOOT)[:, None]
            boot_a, boot_b = rows_a[idx, cols].mean(axis=1), rows_b[idx, cols].mean(axis=1)
        diffs = boot_a - boot_b
        alpha = 1.0 - confidence
        d_lo, d_hi = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
        if mean_b > 0:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratios = np.where(boot_b > 0, boot_a / np.where(boot_b > 0, boot_b, 1.0), np.inf)
                # between two infinite draws the interpolation is inf - inf: that quantile is infinite
                r_lo, r_hi = np.nan_to_num(np.quantile(ratios, [alpha / 2, 1 - alpha / 2]), nan=np.inf)
            ratio = mean_a / mean_b
            est, lo, hi = 100 * (ratio - 1), 100 * (float(r_lo) - 1), 100 * (float(r_hi) - 1)
        else:
            ratio = math.inf if mean_a > 0 else 1.0
            est = lo = hi = 0.0 if mean_a == 0 else math.inf
        return _Effect(est, lo, hi, pairs, diffs, diff_hi=float(d_hi), ratio=ratio)

    def better(self, e: _Effect) -> bool:
        return e.lo_pct > 0 and e.est_pct >= self.floor

    def worse(self, e: _Effect) -> bool:
        return e.hi_pct < 0 and e.est_pct <= -self.floor

    @staticmethod
    def loss_better(e: _Effect | None) -> bool:
        return e is not None and e.diff_hi < 0 and e.ratio <= 1.0 / LOSS_FACTOR
