"""Recommendations from measured trials: per knob, the value to use for the best rate at acceptable loss.

``advise(trials)`` looks at the stored trials of a sweep (:class:`labctl.results.record.TrialRecord`) and, for
every knob that varies across them, compares its values *holding every other knob fixed*, then pools
those like-for-like comparisons. It recommends a value only when the evidence says so, and otherwise
says why not and what to measure next.

Knobs
-----
A knob is a config key with more than one value among the trials. NIC fields that every trial sets
alike on all NICs are one knob (``guest.nics.*.rx_queue_size``); all varying ``guest.pinning.*`` keys
are one knob, ``guest.pinning``, whose values are pinning layouts (split: the vswitch PMD CPU runs no
vCPU; shared: it does). Keys that describe the workload or the measurement rather than a tuning choice
(:data:`CONDITION_KEYS`: packet size, forwarding mode, durations, the profile name...) and the
environment (host, accelerator) are never recommended; they only split the data (a comparison never
mixes packet sizes or hosts) and may be the *condition* of a recommendation.

Method, per knob
----------------
1. Strata: trials with the same values of every other knob (and host/accelerator) form a stratum; a
   stratum with two or more values of the knob is a like-for-like comparison. A configuration's trials
   are a cell.
2. Two-band check (DESIGN.md "Noise"): if the Mpps of all trials split into two bands
   (:func:`labctl.analysis.statistics.two_band`) and configurations landed in both, or a cell of 4+ trials is
   two-band on its own, those cells are *bimodal*. When a quarter or more of the cells (and at least
   two) are bimodal the whole data set is band-limited and nothing is recommended; otherwise strata
   holding a bimodal cell are left out of the comparison.
3. Rate effect of value ``a`` against the reference ``r`` (the schema default when it was measured,
   else the first value measured): per stratum the log ratio of the cell medians; pooled as their
   mean; the interval is a percentile bootstrap (:data:`N_BOOT` resamples) that resamples the trials of
   each cell (the method of :func:`labctl.analysis.statistics.compare`, which gives the figures when there is a
   single stratum). With fewer than :data:`MIN_REPEATS` trials in a cell the strata themselves are
   resampled too (two-stage bootstrap), which needs at least :data:`MIN_POOLED_STRATA` strata and
   :data:`MIN_POOLED_TRIALS` trials per value; with less, the knob is "too few repeats".
   "better" means the interval excludes 0 *and* the change is at least :data:`NOISE_FLOOR_PCT`;
   "worse" the mirror image; otherwise the difference is inside the noise. With ``k`` values the
   confidence is Bonferroni-adjusted, ``1 - (1 - confidence) / (k - 1)``.
4. Loss: a value is acceptable when the median loss ratio of its trials is at most ``max_loss``
   (:data:`DEFAULT_MAX_LOSS`). If no value is acceptable (a saturating generator: testpmd cannot pace)
   all are ranked by rate and a warning says so. A loss effect is the pooled difference of cell median
   loss ratios; "lower loss" needs its interval below 0 and at most half the reference's loss
   (:data:`LOSS_FACTOR`).
5. Decision: (a) the fastest acceptable value if it is "better" than the reference (metric ``mpps``);
   else (b) an acceptable value whose loss is lower and whose rate is not worse (or the reference is not
   acceptable) (metric ``loss_ratio``, ``gain_pct`` is then the relative change of the loss ratio,
   negative = fewer losses); else (c) keep the reference if every other value is "worse", or is
   faster but loses more than ``max_loss`` (significantly more than the reference: metric
   ``loss_ratio``); else inconclusive, with what to measure next.
6. Conditions: the decision is repeated inside each value of every other knob or condition, at
   :data:`CONDITIONAL_CONFIDENCE` shared (Bonferroni) among all the conditions examined, since each is
   one more chance for one lucky configuration to pass; when the trials cannot reach that confidence
   at all (too few bootstrap resamples in a tail, or n_a vs n_b so small that even two sets of trials
   that do not overlap have p = 2 / C(n_a + n_b, n_a) above it), no finding is made in that condition.
   When the outcomes differ and the effect itself differs significantly between them (bootstrap
   interval of the difference at :data:`CONDITIONAL_CONFIDENCE`, not corrected further: it only
   decides how a finding that passed is reported), the knob is reported per condition instead
   (e.g. queues 2 "with split pinning", inconclusive "with shared pinning").

Platform limits: trials that ran ``tx_queue_size`` above 256 on a NIC whose backend is not vhost-user
are mislabelled (QEMU caps tap and network at 256) and are left out with a warning; a recommendation of
``tx_queue_size`` above 256 is only ever made for vhost-user NICs (made conditional on the backend when
the backend varies). Trials from TCG or with shared cores are flagged in the warnings.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

from labctl import platform
from labctl.host.cpuset import format_cpuset, parse_cpuset
from labctl.errors import UserError
from labctl.profile.knobs import flatten
from labctl.results.record import Environment, TrialRecord
from labctl.profile.schema import Profile
from labctl.host.steadiness import unsteady_warning

from labctl.analysis import statistics

__all__ = [
    "DEFAULT_MAX_LOSS",
    "CONFIDENCE",
    "CONDITIONAL_CONFIDENCE",
    "NOISE_FLOOR_PCT",
    "LOSS_FACTOR",
    "MIN_REPEATS",
    "Knob",
    "Recommendation",
    "Inconclusive",
    "Advice",
    "advise",
    "trials_from_store",
    "knob_groups",
    "knob_space",
    "trial_loss",
    "pinning_layout",
    "tx_ring_violation",
    "apply_advice",
    "write_tuned",
    "show_value",
]

#: Default acceptable loss: a median of at most 1 packet in 1000 offered (0.1 %). Zero-loss
#: (RFC 2544) cannot be the bar here: testpmd 22.11 cannot pace the generator, so every trial runs at
#: saturation and loses what the guest cannot forward; what separates configurations is the ring-full
#: drops at a given rate. When no value meets the limit the advisor ranks by rate and says so.
DEFAULT_MAX_LOSS = 0.001

#: Confidence of every interval (Bonferroni-adjusted over a knob's values).
CONFIDENCE = 0.95

#: Confidence of conditional findings (an effect inside one value of another knob, and the difference
#: of effects between conditions): stricter, because every knob is split by every other knob.
CONDITIONAL_CONFIDENCE = 0.99

#: Smallest rate change worth a recommendation, %. Repeated runs of one configuration scatter by a
#: cv of 3-5 % on a quiet host (DESIGN.md); a change below 2 % is inside that noise even when an
#: interval excludes 0, and is not worth a reconfiguration.
NOISE_FLOOR_PCT = 2.0

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

#: Fewest bootstrap resamples each tail of an interval must hold (below it the interval is the extremes).
MIN_TAIL_RESAMPLES = 5

#: QEMU caps tx_queue_size at this unless the backend is vhost-user (labctl.platform, rule "tx-ring-backend").
TX_RING_CAP = platform.TX_RING_CAP

#: Power for the "run --repeat N" advice when a difference is inside the noise.
POWER = 0.8

#: Config keys that describe the workload, the measurement or the lab, not a tuning choice.
CONDITION_KEYS = frozenset({
    "name", "backend", "uri", "repeat", "workload.mode", "workload.packet_size", "workload.duration_s",
    "workload.warmup_s",
})
CONDITION_PREFIXES = ("workload.noisy.",)
ENV_FIELDS = ("host", "accel", "lab")

_DROP_CAUSES = {
    "guest_rx_ring_full": "ring-full drops into the guest (its rx ring, generator -> guest)",
    "vswitch_rx_ring_full": "ring-full drops out of the guest (the vswitch rx ring, guest -> vswitch)",
    "guest_rx_nombuf": "mbuf-pool exhaustion drops in the guest",
    "guest_imissed": "guest rx misses",
    "unaccounted": "unaccounted losses",
}

_MISSING = object()


# --------------------------------------------------------------------------------------------------
# knobs


@dataclass(frozen=True)
class Knob:
    """One dimension of the data: a tuning knob, a condition or an environment field.

    ``name`` is the knob path reported (``guest.nics.*.queues``, ``guest.pinning``, ``env.host``);
    ``paths`` the config keys it reads; ``kind`` one of ``nic``, ``pinning``, ``plain`` (tuning knobs),
    ``condition`` or ``env`` (never recommended).
    """

    name: str
    paths: tuple[str, ...]
    kind: str

    @property
    def tunable(self) -> bool:
        return self.kind in ("nic", "pinning", "plain")

    @property
    def short(self) -> str:
        return "pinning" if self.kind == "pinning" else self.name.rsplit(".", 1)[-1]

    def value_of(self, config: dict[str, Any], env: Environment | None = None) -> Any:
        """The hashable value of this knob in one trial."""
        if self.kind == "env":
            return getattr(env, self.paths[0], None) if env is not None else None
        if self.kind == "pinning":
            return tuple((p, config.get(p)) for p in self.paths)
        return config.get(self.paths[0])

    def json_value(self, value: Any) -> Any:
        if self.kind == "pinning":
            return {p: v for p, v in value}
        return value

    def settings(self, value: Any) -> dict[str, Any]:
        """Knob path -> value assignments (for :func:`labctl.profile.knobs.with_knobs`) that set ``value``."""
        if self.kind == "pinning":
            return {p: v for p, v in value}
        return {self.name: value}


def _nic_key(key: str) -> tuple[int, str] | None:
    parts = key.split(".")
    if len(parts) == 4 and parts[0] == "guest" and parts[1] == "nics" and parts[2].isdigit():
        return int(parts[2]), parts[3]
    return None


def _is_condition(key: str) -> bool:
    return key in CONDITION_KEYS or key.startswith(CONDITION_PREFIXES)


def _hashable(value: Any) -> Any:
    return value if not isinstance(value, (list, dict)) else repr(value)


def knob_groups(records: Iterable[TrialRecord]) -> list[Knob]:
    """The dimensions along which ``records`` vary (see the module docstring): tuning knobs first
    (sorted by name), then conditions, then environment fields."""
    records = list(records)
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r.config))
    varying = [k for k in keys if len({_hashable(r.config.get(k)) for r in records}) > 1]
    knobs: list[Knob] = []
    nic_fields: dict[str, list[str]] = {}
    for key in varying:
        nic = _nic_key(key)
        if nic is not None:
            nic_fields.setdefault(nic[1], []).append(key)
    for field_name, _ in sorted(nic_fields.items()):
        every = sorted((k for k in keys if (_nic_key(k) or (0, ""))[1] == field_name), key=lambda k: _nic_key(k)[0])
        alike = all(len({_hashable(r.config.get(k, _MISSING)) for k in every}) == 1 for r in records)
        if alike and len(every) > 1:
            knobs.append(Knob(f"guest.nics.*.{field_name}", tuple(every), "nic"))
        else:
            knobs.extend(Knob(k, (k,), "plain") for k in nic_fields[field_name])
    pinning = sorted(k for k in varying if k.startswith("guest.pinning."))
    if pinning:
        knobs.append(Knob("guest.pinning", tuple(pinning), "pinning"))
    for key in varying:
        if _nic_key(key) is None and not key.startswith("guest.pinning.") and not _is_condition(key):
            knobs.append(Knob(key, (key,), "plain"))
    knobs.sort(key=lambda k: k.name)
    conditions = sorted((Knob(k, (k,), "condition") for k in varying if _is_condition(k)), key=lambda k: k.name)
    envs = [Knob(f"env.{f}", (f,), "env") for f in ENV_FIELDS
            if len({getattr(r.env, f) for r in records}) > 1]
    return knobs + conditions + envs


def knob_space(records: Iterable[TrialRecord]) -> dict[str, list[Any]]:
    """The sweep space of recorded trials: tuning knob name -> its values in order of first appearance
    (pinning values as ``{path: value}`` dicts). Used by the replay search."""
    records = list(records)
    space: dict[str, list[Any]] = {}
    for knob in knob_groups(records):
        if not knob.tunable:
            continue
        seen: dict[Any, None] = {}
        for r in records:
            seen.setdefault(knob.value_of(r.config, r.env))
        space[knob.name] = [knob.json_value(v) for v in seen]
    return space


# --------------------------------------------------------------------------------------------------
# per-trial facts


def trial_loss(record: TrialRecord) -> float | None:
    """The loss ratio of a trial (lost / offered): ``metrics.loss_ratio``, else the drop counters."""
    m = record.metrics
    if m.loss_ratio is not None and math.isfinite(m.loss_ratio):
        return min(max(float(m.loss_ratio), 0.0), 1.0)
    offered = (m.tx_packets or 0) + (m.tx_dropped or 0)
    if offered > 0 and (m.tx_dropped is not None or m.guest_tx_dropped is not None):
        return min(((m.tx_dropped or 0) + (m.guest_tx_dropped or 0)) / offered, 1.0)
    return None


def _drop_shares(record: TrialRecord) -> dict[str, float]:
    m = record.metrics
    offered = (m.tx_packets or 0) + (m.tx_dropped or 0)
    if offered <= 0 and m.offered_mpps and m.window_s:
        offered = m.offered_mpps * 1e6 * m.window_s
    if offered <= 0:
        return {}
    return {cause: count / offered for cause, count in m.drops.items() if count is not None}


def _cpus(text: Any) -> frozenset[int]:
    if not isinstance(text, str) and not (isinstance(text, int) and not isinstance(text, bool)):
        return frozenset()
    try:
        return parse_cpuset(str(text))
    except ValueError:
        return frozenset()


def pinning_layout(config: dict[str, Any]) -> str:
    """A pinning layout in words: ``split pinning (vswitch PMD on 0, vCPUs on 1)``, ``shared pinning
    (vswitch PMD and vCPUs on 1)``, ``unpinned``."""
    pmd = _cpus(config.get("guest.pinning.vhost"))
    vcpus: frozenset[int] = frozenset()
    for key, value in config.items():
        if key.startswith("guest.pinning.vcpus."):
            vcpus |= _cpus(value)
    if not pmd and not vcpus:
        return "unpinned"
    if pmd and vcpus:
        both = pmd & vcpus
        if both:
            return f"shared pinning (vswitch PMD and vCPUs on {format_cpuset(both)})"
        return f"split pinning (vswitch PMD on {format_cpuset(pmd)}, vCPUs on {format_cpuset(vcpus)})"
    if pmd:
        return f"vswitch PMD on {format_cpuset(pmd)}, vCPUs unpinned"
    return f"vCPUs on {format_cpuset(vcpus)}, vswitch PMD unpinned"


def tx_ring_violation(config: dict[str, Any]) -> list[tuple[int, int, str]]:
    """NICs of a flattened config whose tx_queue_size exceeds 256 on a backend other than vhost-user:
    ``[(nic index, tx_queue_size, backend)]`` (labctl.profile.rules "tx-ring-backend")."""
    out = []
    for key, value in config.items():
        nic = _nic_key(key)
        if nic is None or nic[1] != "tx_queue_size" or not isinstance(value, int) or value <= TX_RING_CAP:
            continue
        backend = config.get(f"guest.nics.{nic[0]}.backend", "vhostuser")
        if backend != "vhostuser":
            out.append((nic[0], value, str(backend)))
    return out


_DEFAULTS = flatten(Profile(name="defaults").model_dump())


def _default_of(knob: Knob) -> Any:
    if knob.kind == "nic":
        return _DEFAULTS.get(knob.paths[0], _MISSING)
    if knob.kind == "plain":
        return _DEFAULTS.get(knob.name, _MISSING)
    return _MISSING


# --------------------------------------------------------------------------------------------------
# results


@dataclass
class Recommendation:
    """One recommended setting. ``metric`` is ``mpps`` (``gain_pct``: relative change of the median
    rate) or ``loss_ratio`` (``gain_pct``: relative change of the median loss ratio, negative = fewer
    losses), against ``baseline``. ``condition`` (knob -> value) is empty for an unconditional
    recommendation; ``settings`` are the knob assignments that apply it."""

    knob: str
    value: Any
    metric: str
    gain_pct: float
    ci_pct: tuple[float, float] | None
    trials: list[int]
    rationale: str
    baseline: Any = None
    condition: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.trials)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "knob": self.knob,
            "value": self.value,
            "metric": self.metric,
            "gain_pct": round(self.gain_pct, 2),
            "ci_pct": None if self.ci_pct is None else [round(self.ci_pct[0], 2), round(self.ci_pct[1], 2)],
            "evidence": {"trials": list(self.trials), "n": self.n},
            "rationale": self.rationale,
        }
        if self.condition:
            data["condition"] = dict(self.condition)
        return data


@dataclass
class Inconclusive:
    """A knob the data cannot decide, with the reason and what to measure next (in ``reason``)."""

    knob: str
    reason: str
    condition: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"knob": self.knob, "reason": self.reason}


@dataclass
class Advice:
    recommendations: list[Recommendation] = field(default_factory=list)
    inconclusive: list[Inconclusive] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    max_loss: float = DEFAULT_MAX_LOSS
    trials_used: int = 0

    def to_dict(self) -> dict[str, Any]:
        """``{"recommendations": [...], "inconclusive": [...], "warnings": [...]}`` (``labctl advise
        --json``). A conditional recommendation also carries ``"condition": {knob: value}``."""
        return {
            "recommendations": [r.to_dict() for r in self.recommendations],
            "inconclusive": [i.to_dict() for i in self.inconclusive],
            "warnings": list(self.warnings),
        }

    def format(self) -> str:
        """The human-readable report of ``labctl advise``."""
        lines = []
        for r in self.recommendations:
            ci = "" if r.ci_pct is None else f" [{r.ci_pct[0]:+.1f}, {r.ci_pct[1]:+.1f}]"
            cond = f" (with {', '.join(f'{k}={show_value(v)}' for k, v in r.condition.items())})" if r.condition else ""
            lines.append(f"recommend {r.knob} = {show_value(r.value)}{cond}: {r.gain_pct:+.1f}%{ci} {r.metric} "
                         f"(n={r.n})")
            lines.append(f"  {r.rationale}")
        for i in self.inconclusive:
            lines.append(f"inconclusive {i.knob}: {i.reason}")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        if not lines:
            lines.append("nothing varies across these trials: there is nothing to compare")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the analysis


class _Cell:
    """The trials of one configuration (one value of every dimension)."""

    def __init__(self, index: int, key: tuple[Any, ...]):
        self.index = index
        self.key = key
        self.refs: list[int] = []
        self.mpps: list[float] = []
        self.loss: list[float | None] = []
        self.shares: list[dict[str, float]] = []
        self.configs: list[dict[str, Any]] = []
        self.bimodal = False
        self._boot: dict[str, np.ndarray] = {}

    @property
    def n(self) -> int:
        return len(self.mpps)

    @property
    def has_loss(self) -> bool:
        return all(x is not None for x in self.loss)

    def median(self) -> float:
        return float(np.median(self.mpps))

    def loss_median(self) -> float:
        return float(np.median([x for x in self.loss if x is not None]))

    def share_median(self, cause: str) -> float:
        return float(np.median([s.get(cause, 0.0) for s in self.shares]))

    def boot(self, what: str, seed: int) -> np.ndarray:
        """Bootstrap medians (``log_mpps`` or ``loss``), N_BOOT of them, fixed per cell."""
        if what not in self._boot:
            rng = np.random.default_rng([seed, self.index, 0 if what == "log_mpps" else 1])
            x = np.log(np.asarray(self.mpps)) if what == "log_mpps" else np.asarray(self.loss, dtype=float)
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


@dataclass
class _Decision:
    recommendation: Recommendation | None = None
    reason: str | None = None
    pick: Any = _MISSING
    contrast: tuple[Any, Any, str] | None = None  # (value, reference, metric) behind the recommendation
    rate_effects: dict[Any, _Effect] = field(default_factory=dict)


def show_value(value: Any) -> str:
    """A knob value for people: pinning dicts as ``path=value`` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _pct_loss(x: float) -> str:
    if x == 0:
        return "0%"
    return f"{100.0 * x:.2g}%"


def _pollers_apart(env: Any) -> bool:
    """The trial's pins, as read back from its threads, put the vswitch PMDs and the guest's forwarding
    cores on disjoint CPUs, and the monitor saw no two pollers share one."""
    pins = dict(getattr(env, "pins", None) or {})
    if getattr(env, "shared_cores", False) or not pins:
        return False
    try:
        host = {c for k, v in pins.items() if k.startswith("vswitch.") for c in parse_cpuset(str(v))}
        guest = {c for k, v in pins.items() if k.startswith("guest.") for c in parse_cpuset(str(v))}
    except ValueError:  # pins from another version or an import: no claim
        return False
    return bool(host) and bool(guest) and not host & guest


class _Analysis:
    def __init__(self, records: list[TrialRecord], refs: list[int], dims: list[Knob], max_loss: float,
                 confidence: float, noise_floor_pct: float, seed: int):
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
            cell.mpps.append(float(r.metrics.mpps))
            cell.loss.append(trial_loss(r))
            cell.shares.append(_drop_shares(r))
            cell.configs.append(r.config)
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
        values = [x for c in self.cells.values() for x in c.mpps]
        band = statistics.two_band(values) if len(values) >= 2 * statistics.MIN_BAND else None
        if band is not None:
            threshold = (band.low[-1] + band.high[0]) / 2.0
            for cell in self.cells.values():
                if any(x < threshold for x in cell.mpps) and any(x > threshold for x in cell.mpps):
                    cell.bimodal = True
        for cell in self.cells.values():
            if cell.n >= 2 * statistics.MIN_BAND:
                own = statistics.two_band(cell.mpps)
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
            text = (f"two bands at {self.band.low_median:.1f} and {self.band.high_median:.1f} Mpps ({where}): "
                    "a median then depends on which band its runs hit")
        else:
            text = f"two-band results ({where})"
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
        rows = np.stack([a.boot("log_mpps", self.seed) - b.boot("log_mpps", self.seed) for a, b in pairs])
        boots = self._pool(rows, pairs, rng)
        alpha = 1.0 - confidence
        lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
        est, lo_pct, hi_pct = 100 * math.expm1(point), 100 * math.expm1(lo), 100 * math.expm1(hi)
        if len(pairs) == 1 and min(pairs[0][0].n, pairs[0][1].n) >= 2:
            # one like-for-like comparison: the figures of statistics.compare, as labctl report shows them
            a, b = pairs[0]
            delta = statistics.compare(b.mpps, a.mpps, confidence=confidence, seed=self.seed, n_resamples=N_BOOT)
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
            r_lo, r_hi = np.quantile(ratios, [alpha / 2, 1 - alpha / 2])
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

    # -- one knob, one set of strata -----------------------------------------------------------------

    def decide(self, k: int, strata: list[dict[Any, _Cell]], confidence: float,
               condition: dict[str, Any]) -> _Decision:
        knob = self.dims[k]
        comparable = [s for s in strata if len(s) >= 2]
        usable = [s for s in comparable if not any(c.bimodal for c in s.values())]
        if not usable:
            if comparable:
                return _Decision(reason=self.band_reason())
            return _Decision(reason=self._no_pairs_reason(k))
        values = sorted({v for s in usable for v in s}, key=lambda v: self.order[(k, v)])
        default = _default_of(knob)
        ref = default if default in values else values[0]
        conf = 1.0 - (1.0 - confidence) / (max(1, len(values) - 1) * self.family)
        if condition:
            unreachable = self._unreachable(k, usable, values, ref, conf, condition)
            if unreachable is not None:
                return _Decision(reason=unreachable)

        trials_of: dict[Any, list[_Cell]] = {v: [s[v] for s in usable if v in s] for v in values}
        loss_med: dict[Any, float | None] = {}
        for v, cells in trials_of.items():
            losses = [x for c in cells for x in c.loss]
            loss_med[v] = float(np.median(losses)) if losses and all(x is not None for x in losses) else None
        known = [v for v in values if loss_med[v] is not None]
        acceptable = {v for v in known if loss_med[v] <= self.max_loss} if len(known) == len(values) else set(values)
        if not acceptable:
            acceptable = set(values)
            if known:
                self.saturated[knob.name] = min(loss_med[v] for v in known)

        effects: dict[Any, _Effect] = {}
        few = []
        for v in values:
            if v == ref:
                continue
            pairs = [(s[v], s[ref]) for s in usable if v in s and ref in s]
            if not pairs:
                continue
            if not self._enough(pairs):
                few.append((v, pairs))
                continue
            effects[v] = self.rate_effect(pairs, conf)
        decision = _Decision(rate_effects=effects)
        if not effects:
            if few:
                decision.reason = self._few_reason(k, few)
            else:
                decision.reason = self._no_pairs_reason(k)
            return decision

        est = {ref: 0.0, **{v: e.est_pct for v, e in effects.items()}}
        ranked = sorted((v for v in est if v in acceptable), key=lambda v: -est[v])
        rejected = [v for v in est if v not in acceptable]

        # (a) a faster acceptable value
        best = ranked[0] if ranked else None
        if best is not None and best != ref and self.better(effects[best]):
            e = effects[best]
            text = self._rate_text(k, best, ref, e)
            runner = next((v for v in ranked[1:] if v != ref), None)
            if runner is not None:
                pairs = [(s[best], s[runner]) for s in usable if best in s and runner in s]
                if pairs and self._enough(pairs):
                    direct = self.rate_effect(pairs, conf)
                    if not self.better(direct):
                        text += (f"; {self.label(k, runner)} is within the noise of it "
                                 f"({direct.format()} vs it)")
            text += self._loss_note(k, best, ref, loss_med)
            text += self._rejected_text(k, rejected, best, est, loss_med)
            decision.recommendation = self._recommend(k, best, ref, "mpps", e, text, condition)
            decision.pick, decision.contrast = best, (best, ref, "mpps")
            return decision

        # (b) an acceptable value that loses less at a rate that is not worse
        ref_ok = ref in acceptable
        candidates = []
        for v in values:
            if v == ref or v not in acceptable or v not in effects:
                continue
            if ref_ok and self.worse(effects[v]):
                continue
            le = self.loss_effect(effects[v].pairs, conf)
            if self.loss_better(le):
                candidates.append((loss_med[v] if loss_med[v] is not None else 0.0, -est[v], v, le))
        if candidates:
            _, _, pick, le = min(candidates, key=lambda c: (c[0], c[1]))
            text = self._loss_text(k, pick, ref, le, effects[pick])
            text += self._rejected_text(k, [v for v in rejected if v != ref], pick, est, loss_med)
            decision.recommendation = self._recommend(k, pick, ref, "loss_ratio", le, text, condition)
            decision.pick, decision.contrast = pick, (pick, ref, "loss_ratio")
            return decision

        # (c) keep the reference: every alternative is slower, or loses more than the limit allows
        if ref_ok and len(effects) == len(values) - 1:
            slower = {v for v, e in effects.items() if self.worse(e)}
            lossy: dict[Any, _Effect] = {}
            for v, e in effects.items():
                if v not in slower and v not in acceptable:
                    le = self.loss_effect([(b, a) for a, b in e.pairs], conf)
                    if self.loss_better(le):
                        lossy[v] = le
            keep = " (keep the default)" if ref == _default_of(knob) else ""
            if effects and len(slower) + len(lossy) == len(effects) and lossy:
                alt = max(lossy, key=lambda v: effects[v].est_pct)
                le = lossy[alt]
                text = (f"{self.label(k, ref)} is the fastest value within the {_pct_loss(self.max_loss)} loss "
                        f"limit{keep}: {self.label(k, alt)} forwarded {effects[alt].format()} Mpps against it but lost "
                        f"{_pct_loss(loss_med[alt])} of packets against {_pct_loss(loss_med[ref])} (loss ratio "
                        f"{le.format()} with {self.label(k, ref)}, {self._strata_text(le, 'loss')})")
                decision.recommendation = self._recommend(k, ref, alt, "loss_ratio", le, text, condition)
                decision.pick, decision.contrast = ref, (ref, alt, "loss_ratio")
                return decision
            if effects and len(slower) == len(effects):
                alt = max(effects, key=lambda v: effects[v].est_pct)
                pairs = [(b, a) for a, b in effects[alt].pairs]
                e = self.rate_effect(pairs, conf)
                text = (f"{self.label(k, ref)} is the fastest{keep}: {self.label(k, alt)}, the best alternative, "
                        f"forwarded {effects[alt].format()} Mpps against it ({self._strata_text(effects[alt])})")
                text += self._loss_note(k, ref, alt, loss_med)
                decision.recommendation = self._recommend(k, ref, alt, "mpps", e, text, condition)
                decision.pick, decision.contrast = ref, (ref, alt, "mpps")
                return decision

        decision.reason = self._noise_reason(k, ref, effects, est, acceptable, loss_med)
        return decision

    # -- texts ---------------------------------------------------------------------------------------

    def _no_pairs_reason(self, k: int) -> str:
        knob = self.dims[k]
        partners = []
        for j, other in enumerate(self.dims):
            if j == k:
                continue
            mapping: dict[Any, set[Any]] = {}
            for cell in self.cells.values():
                mapping.setdefault(cell.key[k], set()).add(cell.key[j])
            if all(len(v) == 1 for v in mapping.values()) and len({next(iter(v)) for v in mapping.values()}) > 1:
                partners.append(other.name)
        together = f" (it changed together with {', '.join(partners)})" if partners else ""
        return (f"no two configurations differ only in {knob.short}{together}: sweep it on its own, "
                "with the other knobs fixed")

    def _few_reason(self, k: int, few: list[tuple[Any, list[tuple[_Cell, _Cell]]]]) -> str:
        v, pairs = few[0]
        per_config = min(min(a.n, b.n) for a, b in pairs)
        per_value = min(sum(a.n for a, _ in pairs), sum(b.n for _, b in pairs))
        return (f"too few repeats: n={per_config} per configuration ({per_value} per value over "
                f"{len(pairs)} configuration{'s' * (len(pairs) > 1)} of the other knobs); run --repeat 5")

    def _strata_text(self, e: _Effect, metric: str = "mpps") -> str:
        m = len(e.pairs)
        if m == 1:
            return f"n={e.n_a} vs {e.n_b}"
        if metric == "mpps":
            up = sum(1 for a, b in e.pairs if a.median() > b.median())
            return f"faster in {up} of {m} configurations of the other knobs, n={e.n_a} vs {e.n_b}"
        down = sum(1 for a, b in e.pairs if a.loss_median() < b.loss_median())
        return f"lower loss in {down} of {m} configurations of the other knobs, n={e.n_a} vs {e.n_b}"

    def _rate_text(self, k: int, value: Any, ref: Any, e: _Effect) -> str:
        med_a = float(np.median([x for a, _ in e.pairs for x in a.mpps]))
        med_b = float(np.median([x for _, b in e.pairs for x in b.mpps]))
        return (f"{self.label(k, value)} forwarded {e.format()} Mpps against {self.label(k, ref)} "
                f"(median {med_a:.2f} vs {med_b:.2f} Mpps; {self._strata_text(e)})")

    def _loss_note(self, k: int, value: Any, ref: Any, loss_med: dict[Any, float | None]) -> str:
        a, b = loss_med.get(value), loss_med.get(ref)
        if a is None or b is None:
            return ""
        limit = "within" if a <= self.max_loss else "above"
        return f"; median loss {_pct_loss(a)} vs {_pct_loss(b)} ({limit} the {_pct_loss(self.max_loss)} limit)"

    def _rejected_text(self, k: int, rejected: list[Any], pick: Any, est: dict[Any, float],
                       loss_med: dict[Any, float | None]) -> str:
        out = ""
        for v in rejected:
            if est.get(v, -math.inf) > est.get(pick, 0.0) and loss_med.get(v) is not None:
                out += (f"; {self.label(k, v)} was faster ({est[v] - est.get(pick, 0.0):+.1f} points) but lost "
                        f"{_pct_loss(loss_med[v])} of packets, above the {_pct_loss(self.max_loss)} limit")
        return out

    def _loss_text(self, k: int, value: Any, ref: Any, le: _Effect, rate: _Effect) -> str:
        causes = set()
        for a, b in le.pairs:
            for s in a.shares + b.shares:
                causes.update(s)
        best_cause, best_drop = None, 0.0
        for cause in sorted(causes):
            va = float(np.mean([a.share_median(cause) for a, _ in le.pairs]))
            vb = float(np.mean([b.share_median(cause) for _, b in le.pairs]))
            if vb - va > best_drop:
                best_cause, best_drop, shares = cause, vb - va, (vb, va)
        if best_cause is not None:
            what = _DROP_CAUSES.get(best_cause, f"{best_cause} drops")
            text = (f"{what} fell from {_pct_loss(shares[0])} to {_pct_loss(shares[1])} of packets with "
                    f"{self.label(k, value)}")
        else:
            b = float(np.mean([b.loss_median() for _, b in le.pairs]))
            a = float(np.mean([a.loss_median() for a, _ in le.pairs]))
            text = f"loss fell from {_pct_loss(b)} to {_pct_loss(a)} of packets with {self.label(k, value)}"
        text += (f" against {self.label(k, ref)} (loss ratio {le.format()}, {self._strata_text(le, 'loss')}); "
                 f"the rate {'did not change' if not self.better(rate) and not self.worse(rate) else 'changed'} "
                 f"({rate.format()} Mpps)")
        return text

    def _noise_reason(self, k: int, ref: Any, effects: dict[Any, _Effect], est: dict[Any, float],
                      acceptable: set[Any], loss_med: dict[Any, float | None]) -> str:
        slower = [v for v, e in effects.items() if self.worse(e)]
        ties = [v for v in effects if v not in slower] or list(effects)
        alt = max(ties, key=lambda v: abs(effects[v].est_pct))
        e = effects[alt]
        cvs = [float(np.std(c.mpps, ddof=1) / np.mean(c.mpps)) for a, b in e.pairs for c in (a, b) if c.n >= 2]
        cv = float(np.median(cvs)) if cvs else None
        text = (f"differences inside the noise: {self.label(k, alt)} {e.format()} Mpps against "
                f"{self.label(k, ref)} ({self._strata_text(e)})")
        if cv is not None and cv > 0:
            z = norm.ppf(1 - (1 - self.confidence) / 2) + norm.ppf(POWER)
            # medians: variance about pi/2 times the mean's; two sides; pooled over the strata
            per_value = math.ceil(2 * (math.pi / 2) * (cv * z / math.log1p(self.floor / 100.0)) ** 2)
            repeats = max(MIN_REPEATS, math.ceil(per_value / len(e.pairs)))
            if repeats <= 100:
                text += (f"; to resolve a {self.floor:g}% difference at the observed cv {100 * cv:.1f}% run "
                         f"--repeat {repeats} (about {per_value} trials per value)")
            else:
                text += (f"; a {self.floor:g}% difference is below what cv {100 * cv:.1f}% can resolve "
                         "(over 100 repeats): treat the values as equivalent, or quiet the host "
                         "(`labctl doctor --steadiness 20` measures it) and repeat")
        for v in slower:
            if v != alt:
                text += f"; {self.label(k, v)} is slower ({effects[v].format()} Mpps): avoid it"
        if len(acceptable) < len(est):
            text += "; " + ", ".join(f"{self.label(k, v)} lost {_pct_loss(loss_med[v])}" for v in est
                                     if v not in acceptable and loss_med.get(v) is not None)
            text += f" (above the {_pct_loss(self.max_loss)} limit)"
        return text

    def _recommend(self, k: int, value: Any, ref: Any, metric: str, e: _Effect, text: str,
                   condition: dict[str, Any]) -> Recommendation:
        knob = self.dims[k]
        ci = None if e.lo_pct is None or e.hi_pct is None else (float(e.lo_pct), float(e.hi_pct))
        settings = knob.settings(value)
        if knob.kind == "pinning":
            # the whole measured layout, so the tuned profile runs exactly what was measured
            config = next(a for a, _ in e.pairs if a.key[k] == value).configs[0] if any(
                a.key[k] == value for a, _ in e.pairs) else next(b for _, b in e.pairs).configs[0]
            settings = {p: v for p, v in sorted(config.items()) if p.startswith("guest.pinning.")}
        return Recommendation(
            knob=knob.name, value=knob.json_value(value), metric=metric, gain_pct=float(e.est_pct), ci_pct=ci,
            trials=e.refs, rationale=text, baseline=knob.json_value(ref), condition=dict(condition),
            settings=settings,
        )

    # -- one knob, with conditions ---------------------------------------------------------------------

    def knob(self, k: int) -> tuple[list[Recommendation], list[Inconclusive]]:
        knob = self.dims[k]
        if self.band_limited:
            return [], [Inconclusive(knob.name, self.band_reason())]
        strata = self.strata(k)
        overall = self.decide(k, strata, self.confidence, {})
        split = self._condition_split(k, strata, overall)
        if split is None:
            if overall.recommendation is not None:
                return [overall.recommendation], []
            return [], [Inconclusive(knob.name, overall.reason or "no decision")]
        j, decisions = split
        recs, incs = [], []
        for value, d in decisions:
            cond_text = f"with {self.label(j, value)}"
            if d.recommendation is not None:
                d.recommendation.rationale = f"{cond_text}: {d.recommendation.rationale}"
                recs.append(d.recommendation)
            else:
                cond = {self.dims[j].name: self.dims[j].json_value(value)}
                incs.append(Inconclusive(knob.name, f"{cond_text}: {d.reason}", cond))
        return recs, incs

    def _unreachable(self, k: int, usable: list[dict[Any, _Cell]], values: list[Any], ref: Any, conf: float,
                     condition: dict[str, Any]) -> str | None:
        """Why no comparison of this knob inside ``condition`` can reach ``conf``, or None when one can.

        Two limits: the bootstrap must keep :data:`MIN_TAIL_RESAMPLES` resamples in each tail, and the
        trials must be able to show it at all: with n_a vs n_b trials, even two sets that do not overlap
        happen by chance with probability 2 / C(n_a + n_b, n_a) (5 vs 5: 0.8%)."""
        alpha = 1.0 - conf
        sizes = [(sum(s[v].n for s in usable if v in s and ref in s), sum(s[ref].n for s in usable if v in s and ref in s))
                 for v in values if v != ref]
        floors = [2.0 / math.comb(a + b, a) for a, b in sizes if a and b]
        if alpha / 2 * N_BOOT + 1e-9 >= MIN_TAIL_RESAMPLES and floors and min(floors) <= alpha:
            return None
        where = ", ".join(f"{name}={show_value(v)}" for name, v in condition.items())
        a, b = max(sizes, key=lambda ab: ab[0] + ab[1]) if sizes else (0, 0)
        floor = f" (n={a} vs {b}: trials that do not overlap at all still have p = {2.0 / math.comb(a + b, a):.2%})" \
            if a and b else ""
        return (f"with {where}: a finding inside one of the conditions examined needs {100 * conf:.3f}% confidence, "
                f"beyond what these trials can reach{floor}; measure {self.dims[k].short} on its own with "
                "that setting, or repeat more")

    def _condition_split(self, k: int, strata: list[dict[Any, _Cell]],
                         overall: _Decision) -> tuple[int, list[tuple[Any, _Decision]]] | None:
        best: tuple[float, int, list[tuple[Any, _Decision]]] | None = None
        # every condition examined is one more chance for noise to pass: Bonferroni over them too
        conditions = sum(n for n in (len({next(iter(s.values())).key[j] for s in strata if len(s) >= 2})
                                     for j in range(len(self.dims)) if j != k) if n >= 2)
        confidence = 1.0 - (1.0 - CONDITIONAL_CONFIDENCE) / max(1, conditions)
        for j, other in enumerate(self.dims):
            if j == k:
                continue
            groups: dict[Any, list[dict[Any, _Cell]]] = {}
            for s in strata:
                if len(s) < 2:
                    continue
                u = next(iter(s.values())).key[j]
                groups.setdefault(u, []).append(s)
            if len(groups) < 2:
                continue
            ordered = sorted(groups, key=lambda u: self.order[(j, u)])
            decisions = [(u, self.decide(k, groups[u], confidence, {other.name: other.json_value(u)}))
                         for u in ordered]
            picks = {repr(d.pick) if d.recommendation is not None else None for _, d in decisions}
            if len(picks) < 2 or picks == {None}:
                continue
            if overall.recommendation is not None and all(
                    d.recommendation is not None and d.pick == overall.pick or d.recommendation is None
                    and not self._contradicts(k, groups[u], overall) for u, d in decisions):
                continue  # same outcome wherever the data can tell
            size = self._interaction(k, groups, decisions)
            if size is not None and (best is None or size > best[0]):
                best = (size, j, decisions)
        if best is None:
            return None
        _, j, decisions = best
        for u, d in decisions:
            if d.recommendation is not None:
                self._attach_condition(d.recommendation, j, u)
        return j, decisions

    def _contradicts(self, k: int, strata: list[dict[Any, _Cell]], overall: _Decision) -> bool:
        """Whether, inside these strata, the overall recommendation's contrast is absent (its effect
        is inside the noise where the overall one is clear)."""
        if overall.contrast is None:
            return False
        a, b, metric = overall.contrast
        pairs = [(s[a], s[b]) for s in strata if a in s and b in s and not s[a].bimodal and not s[b].bimodal]
        if not pairs or not self._enough(pairs):
            return False
        if metric == "mpps":
            e = self.rate_effect(pairs, CONDITIONAL_CONFIDENCE)
            return not self.better(e)
        return not self.loss_better(self.loss_effect(pairs, CONDITIONAL_CONFIDENCE))

    def _interaction(self, k: int, groups: dict[Any, list[dict[Any, _Cell]]],
                     decisions: list[tuple[Any, _Decision]]) -> float | None:
        """The largest significant difference of a recommended contrast between two conditions
        (in % of rate, or in loss-ratio points x 100), or None."""
        alpha = 1.0 - CONDITIONAL_CONFIDENCE
        found = None
        for u, d in decisions:
            if d.contrast is None:
                continue
            a, b, metric = d.contrast
            here = self._contrast(groups[u], a, b, metric)
            if here is None:
                continue
            for u2, _ in decisions:
                if u2 == u:
                    continue
                there = self._contrast(groups[u2], a, b, metric)
                if there is None:
                    continue
                diff = here.boots - there.boots
                lo, hi = np.quantile(diff, [alpha / 2, 1 - alpha / 2])
                if lo > 0 or hi < 0:
                    size = abs(here.est_pct - there.est_pct)
                    found = size if found is None else max(found, size)
        return found

    def _contrast(self, strata: list[dict[Any, _Cell]], a: Any, b: Any, metric: str) -> _Effect | None:
        pairs = [(s[a], s[b]) for s in strata if a in s and b in s and not s[a].bimodal and not s[b].bimodal]
        if not pairs or not self._enough(pairs):
            return None
        if metric == "mpps":
            return self.rate_effect(pairs, CONDITIONAL_CONFIDENCE)
        return self.loss_effect(pairs, CONDITIONAL_CONFIDENCE)

    def _attach_condition(self, rec: Recommendation, j: int, value: Any) -> None:
        rec.condition[self.dims[j].name] = self.dims[j].json_value(value)


# --------------------------------------------------------------------------------------------------
# the entry points


def advise(
    trials: Iterable[TrialRecord],
    max_loss: float = DEFAULT_MAX_LOSS,
    *,
    confidence: float = CONFIDENCE,
    noise_floor_pct: float = NOISE_FLOOR_PCT,
    seed: int = 0,
) -> Advice:
    """Recommend, per knob, the value for the best rate at a median loss ratio of at most ``max_loss``.

    ``trials``: records of any status (failed and aborted ones are counted in a warning and left out).
    Deterministic: the bootstrap is seeded with ``seed``. See the module docstring for the rules.
    """
    if not 0.0 <= max_loss <= 1.0:
        raise UserError(f"max loss {max_loss}: a loss ratio is between 0 and 1 (e.g. 0.001 for 0.1%)")
    records = list(trials)
    advice = Advice(max_loss=max_loss)
    refs_all = [r.id if r.id is not None else i + 1 for i, r in enumerate(records)]
    ok = [(ref, r) for ref, r in zip(refs_all, records)
          if r.status == "ok" and r.metrics.mpps is not None and math.isfinite(r.metrics.mpps) and r.metrics.mpps > 0]
    not_ok = len(records) - len(ok)
    if not_ok:
        advice.warnings.append(f"{not_ok} of {len(records)} trials failed, were aborted or measured no rate: "
                               "they are left out")
    excluded: dict[tuple[int, str], int] = {}
    kept = []
    for ref, r in ok:
        bad = tx_ring_violation(r.config)
        if bad:
            for _, size, backend in bad:
                excluded[(size, backend)] = excluded.get((size, backend), 0) + 1
            continue
        kept.append((ref, r))
    if excluded:
        count = sum(1 for _, r in ok if tx_ring_violation(r.config))
        which = ", ".join(f"tx_queue_size {size} on {backend}" for size, backend in sorted(excluded))
        advice.warnings.append(
            f"left out {count} trial{'s' * (count > 1)} with {which}: tx_queue_size above {TX_RING_CAP} needs the "
            f"vhost-user backend (QEMU caps tap and network at {TX_RING_CAP}, so those guests ran a "
            f"{TX_RING_CAP}-entry tx ring whatever the record says); never use it without backend vhostuser")
    if not kept:
        if records:
            advice.warnings.append("no successful trials to compare")
        return advice
    refs = [ref for ref, _ in kept]
    recs = [r for _, r in kept]
    advice.trials_used = len(recs)
    advice.warnings.extend(_environment_warnings(recs))

    dims = knob_groups(recs)
    analysis = _Analysis(recs, refs, dims, max_loss, confidence, noise_floor_pct, seed)
    if analysis.bimodal_cells:
        advice.warnings.append(analysis.band_reason())
    high = [c for c in analysis.cells.values() if c.n >= 2 and not c.bimodal
            and np.std(c.mpps, ddof=1) / np.mean(c.mpps) > statistics.HIGH_CV]
    if high:
        advice.warnings.append(
            f"{len(high)} of {len(analysis.cells)} configurations scatter by more than "
            f"{100 * statistics.HIGH_CV:.0f}% (cv) between repeats: comparisons involving them need more repeats")

    for k, knob in enumerate(dims):
        if not knob.tunable:
            continue
        found, open_ = analysis.knob(k)
        advice.recommendations.extend(found)
        advice.inconclusive.extend(open_)
    if analysis.saturated:
        names = ", ".join(f"{knob} (lowest median loss {_pct_loss(low)})" for knob, low in analysis.saturated.items())
        advice.warnings.append(
            f"no value of {names} met the {_pct_loss(max_loss)} loss limit: the generator offers more than the "
            "guest forwards (testpmd cannot pace), so these values are ranked by rate alone")
    _platform_check(advice, dims, recs)
    return advice


def _environment_warnings(records: list[TrialRecord]) -> list[str]:
    out = []
    n = len(records)
    tcg = sum(1 for r in records if r.env.accel == "tcg")
    if tcg:
        out.append(f"{tcg} of {n} trials ran under TCG (no usable KVM): their rates are functional, not "
                   "representative; confirm on a KVM host before applying")
    shared = sum(1 for r in records if r.env.shared_cores)
    if shared:
        out.append(f"{shared} of {n} trials ran on shared cores (two busy pollers on one CPU, or an "
                   "oversubscribed host): the rates reflect the scheduler as much as virtio")
    unsteady = [r for r in records if unsteady_warning(r.warnings)]
    if unsteady:
        out.append(f"{len(unsteady)} of {n} trials ran on a host whose own speed was unsteady just before "
                   "their sweep (labctl sweep --steadiness): its swings, not the knobs, may separate "
                   "the results; interleave, repeat, and prefer findings that hold across sittings")
    hosts = {r.env.host for r in records if r.env.host}
    if len(hosts) > 1:
        out.append(f"trials come from {len(hosts)} hosts ({', '.join(sorted(hosts))}): every comparison "
                   "is made within one host")
    return out


def _platform_check(advice: Advice, dims: list[Knob], records: list[TrialRecord]) -> None:
    """tx_queue_size above 256 only for vhost-user NICs; conditional on the backend when it varies."""
    backend_knobs = [d for d in dims if d.tunable and d.name.endswith(".backend")]
    backend_recs = {r.knob: r for r in advice.recommendations if r.knob.endswith(".backend") and not r.condition}
    kept = []
    for rec in advice.recommendations:
        if not rec.knob.endswith("tx_queue_size") or not isinstance(rec.value, int) or rec.value <= TX_RING_CAP:
            kept.append(rec)
            continue
        config_sets = [r.config for r in records]
        nic_paths = [p.replace("tx_queue_size", "backend") for p in
                     ([rec.knob] if "*" not in rec.knob else
                      sorted({k for c in config_sets for k in c if k.startswith("guest.nics.") and k.endswith(".tx_queue_size")}))]
        for d in backend_knobs:
            if d.name not in rec.condition and any(p in d.paths or d.name == p for p in nic_paths):
                rec.condition[d.name] = "vhostuser"
        clash = [b for b in backend_recs.values() if b.value != "vhostuser" and b.knob in rec.condition]
        if clash:
            advice.warnings.append(
                f"{rec.knob} {rec.value} is recommended only with backend vhostuser, but {clash[0].knob} "
                f"{clash[0].value} is recommended: with that backend keep tx_queue_size {TX_RING_CAP}")
        rec.rationale += (f"; allowed because these NICs use the vhost-user backend (QEMU caps tap and network "
                          f"at {TX_RING_CAP})")
        kept.append(rec)
    advice.recommendations = kept


def trials_from_store(db: str | Path, run_id: int | None = None) -> tuple[int, list[TrialRecord]]:
    """The trials (every status) of ``run_id`` (default: the latest run) in the store at ``db``."""
    from labctl.results.store import Store

    if not Path(db).exists():
        raise UserError(f"{db}: no result store here (run a sweep first, or pass --db)")
    with Store(db) as store:
        if run_id is None:
            run_id = store.latest_run_id()
            if run_id is None:
                raise UserError(f"{db}: the store holds no runs yet")
        store.run(run_id)  # UnknownRunError for a bad id
        return run_id, store.trials(run_id, status=None)


# --------------------------------------------------------------------------------------------------
# --apply


def _child(node: Any, part: str) -> tuple[bool, Any]:
    """(exists, key) of ``part`` below ``node``: list index, dict key, or an int key of an index map."""
    if isinstance(node, list):
        return (part.isdigit() and int(part) < len(node)), (int(part) if part.isdigit() else part)
    if isinstance(node, dict):
        if part in node:
            return True, part
        if part.isdigit() and int(part) in node:
            return True, int(part)
        return False, (int(part) if part.isdigit() and all(isinstance(k, int) for k in node) and node else part)
    return False, part


def _materialize(data: Any, full: Any, parts: list[str]) -> None:
    """Create along ``parts`` what ``data`` (the user's profile) leaves out, taking it from ``full``
    (the same profile validated, every default filled in): lists are copied whole, mappings start
    empty and a leaf gets its default, so that only the knobs being set (and the NIC list) appear."""
    import copy

    if not parts or not isinstance(data, (dict, list)):
        return
    part, rest = parts[0], parts[1:]
    if part == "*":
        if isinstance(data, list):
            for i, item in enumerate(data):
                ref = full[i] if isinstance(full, list) and i < len(full) else None
                _materialize(item, ref, rest)
        return
    exists, key = _child(data, part)
    ref_exists, ref_key = _child(full, part) if full is not None else (False, part)
    ref = full[ref_key] if ref_exists else None
    if not exists:
        if isinstance(data, list) or ref is None and rest:
            return
        if not rest:
            if ref_exists:
                data[key] = copy.deepcopy(ref)
            return
        data[key] = copy.deepcopy(ref) if isinstance(ref, list) else {}
    _materialize(data[key], ref, rest)


def _apply_one(data: dict[str, Any], full: dict[str, Any], settings: dict[str, Any]) -> None:
    from labctl.profile.knobs import set_knob

    for path, value in settings.items():
        if path.startswith("guest.pinning.") and value is None:
            # unpinned in the measured layout: drop the pin (the default) rather than write null
            parts = path.split(".")
            node: Any = data
            for part in parts[:-1]:
                exists, key = _child(node, part)
                if not exists:
                    node = None
                    break
                node = node[key]
            if isinstance(node, dict):
                exists, key = _child(node, parts[-1])
                if exists:
                    del node[key]
            continue
        _materialize(data, full, path.split("."))
        set_knob(data, path, value)


def apply_advice(profile_data: dict[str, Any], advice: Advice) -> tuple[dict[str, Any], list[str]]:
    """The profile ``profile_data`` (a plain dict, as read from YAML) with the recommended settings
    applied and the sweep dropped; returns ``(data, notes)``, notes saying what was applied or skipped.

    Unconditional recommendations are applied; a conditional one when its condition holds in the
    tuned profile, or when two recommendations are each other's condition (queues 2 with split
    pinning, split pinning with queues 2: the pair is applied). A tx_queue_size above 256 is never
    written for a NIC whose backend is not vhost-user. The result is validated against the schema
    (:class:`labctl.profile.schema.Profile`); UserError if it is invalid."""
    import copy

    from pydantic import ValidationError

    try:
        full = Profile.model_validate(profile_data).model_dump()
    except ValidationError as exc:
        raise UserError(f"the profile to tune is invalid: {exc.errors()[0]['msg']}") from None
    data = copy.deepcopy(profile_data)
    data.pop("sweep", None)
    notes: list[str] = []
    applied: list[Recommendation] = []

    def current(knob_name: str, want: Any) -> bool:
        flat = flatten(Profile.model_validate(data).model_dump())
        if knob_name == "guest.pinning" and isinstance(want, dict):
            return all(flat.get(p) == v for p, v in want.items())
        if "*" in knob_name:
            head, tail = knob_name.split(".*.")
            values = [v for k, v in flat.items() if k.startswith(head + ".") and k.endswith("." + tail)]
            return bool(values) and all(v == want for v in values)
        return flat.get(knob_name, _MISSING) == want

    def apply(rec: Recommendation) -> None:
        _apply_one(data, full, rec.settings)
        applied.append(rec)
        cond = f" (with {', '.join(f'{k}={show_value(v)}' for k, v in rec.condition.items())})" if rec.condition else ""
        notes.append(f"applied {rec.knob} = {show_value(rec.value)}{cond}: {rec.metric} {rec.gain_pct:+.1f}%")

    pending = [r for r in advice.recommendations if r.condition]
    for rec in advice.recommendations:
        if not rec.condition:
            apply(rec)
    changed = True
    while changed and pending:
        changed = False
        for rec in list(pending):
            if all(current(k, v) for k, v in rec.condition.items()):
                apply(rec)
                pending.remove(rec)
                changed = True
        if changed:
            continue
        for rec in list(pending):
            mirror = next((o for o in pending if o is not rec and set(o.condition) == {rec.knob}
                           and set(rec.condition) == {o.knob} and o.condition[rec.knob] == rec.value
                           and rec.condition[o.knob] == o.value), None)
            if mirror is not None:
                apply(rec)
                apply(mirror)
                pending.remove(rec)
                pending.remove(mirror)
                changed = True
                break
    for rec in pending:
        cond = ", ".join(f"{k}={show_value(v)}" for k, v in rec.condition.items())
        notes.append(f"skipped {rec.knob} = {show_value(rec.value)}: only with {cond}, which the tuned profile "
                     "does not have")
    try:
        tuned = Profile.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"the tuned profile is invalid: {exc.errors()[0]['msg']}") from None
    pins = data.get("guest", {}).get("pinning", {}).get("vcpus")
    if isinstance(pins, dict):
        for index in sorted((i for i in pins if int(i) >= tuned.guest.vcpus), key=int):
            notes.append(f"dropped the pin of vCPU {index}: the tuned guest has {tuned.guest.vcpus} vCPUs")
            del pins[index]
    violations = tx_ring_violation(flatten(tuned.model_dump()))
    if violations:
        for index, size, backend in violations:
            set_to = {f"guest.nics.{index}.tx_queue_size": TX_RING_CAP}
            _apply_one(data, full, set_to)
            notes.append(f"kept guest.nics.{index}.tx_queue_size {TX_RING_CAP}, not {size}: backend {backend} "
                         f"caps it at {TX_RING_CAP} (needs vhostuser)")
    name = str(data.get("name", full["name"]))
    if not name.endswith("-tuned"):
        data["name"] = name[:34].rstrip("-") + "-tuned"
    return data, notes


def write_tuned(path_in: str | Path, advice: Advice, path_out: str | Path) -> list[str]:
    """Read the profile ``path_in``, apply ``advice`` (:func:`apply_advice`) and write ``path_out`` as
    YAML with a comment header naming every applied recommendation with its gain and rationale, and the
    skipped ones. Returns the notes. The written profile is validated like any profile (rules
    included) by reading it back; ProfileError if it is not valid here."""
    import yaml

    from labctl.profile.load import load_profile
    from labctl.errors import YamlProblem
    from labctl.profile.yamlsrc import load_yaml

    source = Path(path_in)
    try:
        data, _lines = load_yaml(source.read_bytes())
    except YamlProblem as exc:
        from labctl.errors import ProfileError

        raise ProfileError(str(source), [exc.problem]) from None
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: a profile is a YAML mapping")
    tuned, notes = apply_advice(data, advice)
    header = [f"# Tuned by labctl advise from {source.name}."]
    for rec in advice.recommendations:
        header.append(f"# {rec.knob} = {show_value(rec.value)}: {rec.metric} {rec.gain_pct:+.1f}%"
                      + (f" [{rec.ci_pct[0]:+.1f}, {rec.ci_pct[1]:+.1f}]" if rec.ci_pct else ""))
        header.append(f"#   {rec.rationale}")
    header.extend(f"# {note}" for note in notes)
    for inc in advice.inconclusive:
        header.append(f"# inconclusive: {inc.knob}: {inc.reason}")
    for warning in advice.warnings:
        header.append(f"# warning: {warning}")
    text = "\n".join(header) + "\n" + yaml.safe_dump(tuned, sort_keys=False, default_flow_style=False)
    out = Path(path_out)
    out.write_text(text, encoding="utf-8")
    load_profile(out)
    return notes
