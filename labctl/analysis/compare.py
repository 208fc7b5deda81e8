"""Regressions as a verdict: a candidate run against a baseline run, configuration by configuration.

The two runs' trials are paired by their configuration (:func:`labctl.results.record.config_key`: every
knob, defaults included). Each pair gets the change of the metric's median with its bootstrap interval
(:func:`labctl.analysis.statistics.compare`, the interval the reports and the advisor use) and one of
:data:`VERDICTS`. With T the threshold (default 5%) and "bad" meaning lower for rates, higher for loss,
latency, drops and cycles per packet (:func:`lower_is_better`):

``regression``
    the *whole* interval lies beyond T in the bad direction (below -T for a rate);
``progression``
    the whole interval lies beyond T in the good direction;
``no change``
    the whole interval lies within ±T: any change is smaller than the threshold;
``cannot tell``
    anything else, with the reason (``ConfigVerdict.cause``, one of :data:`CAUSES`): the configuration
    is in one run only; a side has no successful trial with the metric; the trials ran on a different
    host, accelerator or lab (those change what is measured, not how well the software does); the
    baseline holds zeros (no relative change); fewer than :data:`~labctl.analysis.statistics.MIN_TRIALS`
    trials, or too few for the confidence a verdict needs (below); a side is two-band (a median of two
    bands depends on how many trials fell in each), unless every candidate trial lies beyond T of every
    baseline trial, which no mix of the bands can undo (then it is a regression or progression); the
    interval is wider than ±T on both sides (noisy); or it excludes 0 but reaches inside T (undecided).

Why the interval and the threshold, not the point estimate: on a noisy host a median 12% lower with an
interval of [-40%, +20%] is not a regression but a measurement that cannot tell, and a CI job that
fails on it cries wolf. The threshold keeps real but small changes from failing a job. "no change" is a
claim too (an equivalence test: the interval inside ±T), so a wide interval is "cannot tell", never
"no change": a job on this host passes, but it does not pretend it would have seen a 5% regression.

Why a family-wise confidence: a job fails when *any* configuration regresses, so every configuration
compared is one more chance for noise to fail it. Each interval is taken at
``1 - (1 - 0.95) / m`` for m configurations compared (Bonferroni, as the advisor does over a knob's
values), which holds the chance that noise alone fails the job, or passes a progression, under 5%.

Why some repeats cannot give a verdict: with n_b vs n_c trials the interval of a bootstrap of medians
cannot be wider than the extremes, so even trials that do not overlap at all (every candidate trial
below every baseline trial) happen by chance with probability 1 / C(n_b + n_c, n_b) on one side: 5% for
3 vs 3, 1.4% for 4 vs 4, 0.4% for 5 vs 5. A regression or progression needs that floor to be within
the interval's one-sided error, (1 - confidence) / 2; otherwise the verdict is "cannot tell" and says
how many repeats would do (3 vs 3 never can; 5 vs 5 can for up to 6 configurations).

Measured on planted re-measurements with no change (3 configurations of normal noise, 200 seeds each,
``tests/unit/analysis/test_compare.py``): no false regression at cv 3% with 3, 5 or 8 trials a side,
3 of 200 at cv 30% (this host's scatter) with 5 or 8. A 95% interval per configuration without the
floor failed 12% of such jobs at 3 vs 3 and cv 30% (4 configurations). The price is power: a 12%
slowdown of one configuration at cv 3% was found (alone) in 159 of 200 seeds with 5 trials a side and
195 with 8; at cv 30% in 2% of them, as it should be: that noise cannot show 12%.

What changed between the runs' environments (every :class:`~labctl.results.record.Environment` field:
QEMU, libvirt, DPDK, kernel, CPU model, accelerator, pins, ...) is listed with the verdicts
(:func:`env_changes`): those are what a CI job upgrades, and what a regression is to be read against.

Which trials: every status is read (failed trials are counted in the notes), but the single
measurements of an NDR/PDR search (``details.role`` calibration, warmup, search or latency: loads
the search picked) are left out: the search's record stands for them, and ``--metric ndr`` / ``pdr``
(``ndr_mpps`` / ``pdr_mpps``) compares those records. Pooling the measurements would give a median of
whatever loads the search tried. Trials that ran while processes that are not labctl's were busy on their CPUs
(``details.busy_strangers``, :mod:`labctl.lab.busy`) are noted per side: such a "regression" may be
the neighbour's, not the software's; the verdict stands, the note says what to read it against.

Inside one run, one knob's values are compared the same way (:mod:`labctl.analysis.within`: ``labctl
compare --by build --baseline base``, a patch's A/B): :func:`pair_item`, :func:`judge_pending` and
:func:`family_notes` are the machinery both pairings share; only which trials pair differs.

Everything here is pure: records in, a :class:`Comparison` out (the bootstrap is seeded).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from labctl.analysis.environments import (
    EnvChange, busy_note, busy_side_note, dimension_problem, env_changes, shared_env,
)
from labctl.analysis.grouping import knob_value, sort_key, varying_knobs
from labctl.analysis.statistics import (
    CONFIDENCE, DEFAULT_RESAMPLES, HIGH_CV, MIN_TAIL_RESAMPLES, MIN_TRIALS, Delta, compare, summarize,
)
from labctl.errors import UserError
from labctl.host.steadiness import unsteady_warning
from labctl.profile.knobs import short_label
from labctl.results.codecs import SCALAR_METRICS
from labctl.results.metrics import (
    ALIASES as METRIC_ALIASES, DEFAULT_THRESHOLD_PCT, METRICS, lower_is_better, shown,
)
from labctl.results.record import SEARCH_ROLES, TrialRecord, judged_trials

__all__ = [
    "DEFAULT_THRESHOLD_PCT", "CONFIDENCE", "VERDICTS", "CAUSES", "NOT_COMPARED", "EnvChange", "Side",
    "Judgement", "ConfigVerdict", "Comparison", "lower_is_better", "measured_metrics", "check_measured", "env_changes",
    "family_confidence", "repeats_needed", "judge", "delta_of", "side_of", "compare_runs",
    "METRIC_ALIASES", "SEARCH_ROLES", "metric_name", "judged_trials", "MIN_TAIL_RESAMPLES",
    "parse_threshold", "check_threshold", "compare_selections", "differing_knobs", "pair_item", "judge_pending", "check_paired",
    "family_notes", "metric_value",
]

VERDICTS = ("regression", "progression", "no change", "cannot tell")

#: Why a configuration got "cannot tell" (``ConfigVerdict.cause``).
CAUSES = {
    "unpaired": "the configuration is in one run only",
    "no-trials": "a side has no successful trial with the metric",
    "environment": "the trials ran on a different host, accelerator or lab",
    "zero-baseline": "the baseline holds zeros: a relative change is undefined",
    "few-repeats": "too few trials for the confidence a verdict needs",
    "two-band": "a side is two-band",
    "noisy": "the interval is wider than the threshold on both sides",
    "undecided": "the interval excludes 0 but reaches inside the threshold",
}

#: Scalar metrics that are settings, not outcomes (no better side in the registry): never compared.
NOT_COMPARED: tuple[str, ...] = tuple(m for m in SCALAR_METRICS if not METRICS[m].compared)


def metric_name(metric: str) -> str:
    """The metric ``metric`` names: ``ndr`` -> ``ndr_mpps``, ``pdr`` -> ``pdr_mpps`` (the registry's
    aliases), others as they are."""
    return METRIC_ALIASES.get(metric, metric)


def parse_threshold(value: float | str | None) -> float | None:
    """``--threshold`` as text or a number: a float, else UserError with the allowed range."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return None if value is None else float(value)
    try:
        return float(str(value).strip().removesuffix("%"))
    except ValueError:
        raise UserError(f"--threshold {value}: not a number (allowed: 0 <= PCT < 100, per cent of the baseline "
                        "median)") from None


def check_threshold(threshold_pct: float) -> None:
    """A regression threshold in per cent of the baseline median: 0 <= PCT < 100."""
    if not (math.isfinite(threshold_pct) and 0.0 <= threshold_pct < 100.0):
        raise UserError(f"--threshold {threshold_pct:g}: out of range (allowed: 0 <= PCT < 100, per cent of "
                        "the baseline median)")


def compare_selections(records: Sequence[TrialRecord], baseline: Iterable[int], candidate: Iterable[int],
                       metric: str, run_id: int | None = None) -> Delta:
    """Two selections (trial ids) of one run's ``records`` compared on ``metric``: the change of the
    candidate's median against the baseline's with its bootstrap 95% interval and a verdict, in the
    metric's own direction (:func:`lower_is_better`). A face's A/B of rows the user picked."""
    a, b = set(baseline), set(candidate)
    if not a or not b:
        raise UserError("compare: both selections need at least one trial (allowed: trial ids of the run)")
    if a & b:
        raise UserError(f"compare: trials {', '.join(map(str, sorted(a & b)))} are in both selections")
    values = {r.id: getattr(r.metrics, metric) for r in records if getattr(r.metrics, metric) is not None}
    unknown = sorted((a | b) - set(values))
    if unknown:
        raise UserError(f"compare: trials {', '.join(map(str, unknown))} have no {metric} in run {run_id}")
    base = [values[i] for i in sorted(a)]
    if min(base) <= 0:
        raise UserError(f"compare: the baseline's {metric} includes 0 (allowed: positive values)")
    return compare(base, [values[i] for i in sorted(b)], higher_is_better=not lower_is_better(metric))


def metric_value(record: TrialRecord, metric: str) -> float | None:
    """A trial's value of a scalar metric, or None when it has none (or it is not a finite number)."""
    value = getattr(record.metrics, metric, None)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def measured_metrics(records: Iterable[TrialRecord]) -> list[str]:
    """The scalar metrics that successful trials among ``records`` measured (a value in at least one)."""
    ok = [r for r in judged_trials(records) if r.status == "ok"]
    return [m for m in SCALAR_METRICS if m not in NOT_COMPARED and any(metric_value(r, m) is not None for r in ok)]


def check_measured(metric: str, groups: Sequence[Sequence[TrialRecord]], where: str) -> None:
    """UserError unless every group of trials (a run, say) measured ``metric`` (or the metric an alias of
    :data:`METRIC_ALIASES` names); the allowed metrics are those measured in all of them, with their
    aliases. ``where`` names the groups (``runs 1 and 2``)."""
    allowed = [m for m in SCALAR_METRICS if all(m in measured_metrics(group) for group in groups)]
    listed = shown(allowed)
    name = metric_name(metric)
    if name not in SCALAR_METRICS or name in NOT_COMPARED:
        raise UserError(f"--metric {metric}: not a metric of labctl's trials (allowed in {where}: {listed})")
    if name not in allowed:
        raise UserError(f"--metric {metric}: not measured in {where} (allowed: {listed})")


# --------------------------------------------------------------------------------------------------
# verdicts


def family_confidence(m: int, confidence: float = CONFIDENCE) -> float:
    """Each interval's confidence when ``m`` are judged together (Bonferroni)."""
    return 1.0 - (1.0 - confidence) / max(1, m)


def _floor(n_b: int, n_c: int) -> float:
    """Chance that n_c candidate trials all fall below n_b baseline trials with no change at all."""
    return 1.0 / math.comb(n_b + n_c, n_b)


def repeats_needed(confidence: float) -> int:
    """Fewest trials per side (the same on both) whose one-sided floor reaches ``confidence``."""
    n = MIN_TRIALS
    while _floor(n, n) > (1.0 - confidence) / 2:
        n += 1
    return n


@dataclass(frozen=True)
class Judgement:
    verdict: str
    reason: str
    cause: str | None = None  # a key of CAUSES for "cannot tell"


def _signs(lower_better: bool) -> tuple[str, str]:
    """The signs of a bad and a good change: (+, -) when lower is better, (-, +) for a rate."""
    return ("+", "-") if lower_better else ("-", "+")


def _beyond(low: float, high: float, t: float, lower_better: bool) -> tuple[bool, bool]:
    """(worse, better): whether the whole change [low, high] (in %) lies beyond ``t`` in the bad or the
    good direction."""
    return (low > t, high < -t) if lower_better else (high < -t, low > t)


def _chance_floor(delta: Delta) -> float | None:
    """The chance that the trials do not overlap at all with no change (:func:`_floor`), when it is above
    the one-sided error ``delta.confidence`` allows; None when n_b vs n_c can reach that confidence."""
    floor = _floor(delta.n_baseline, delta.n_candidate)
    return floor if floor > (1.0 - delta.confidence) / 2 else None


def judge(delta: Delta, threshold_pct: float, lower_better: bool,
          values: tuple[Sequence[float], Sequence[float]] | None = None) -> Judgement:
    """The verdict on one :func:`~labctl.analysis.statistics.compare` result (see the module docstring);
    ``delta.confidence`` is the confidence the verdict needs (:func:`family_confidence`). ``values``
    (baseline, candidate) lets a two-band side be judged by its range (:func:`_range_judgement`)."""
    if delta.verdict == "inconclusive" or delta.ci_low_pct is None or delta.ci_high_pct is None:
        few = min(delta.n_baseline, delta.n_candidate) < MIN_TRIALS
        if not few and values is not None:
            by_range = _range_judgement(delta, threshold_pct, lower_better, *values)
            if by_range is not None:
                return by_range
        return Judgement("cannot tell", delta.reason, "few-repeats" if few else "two-band")
    low, high, t = delta.ci_low_pct, delta.ci_high_pct, threshold_pct
    interval = f"{100 * delta.confidence:.4g}% interval {delta.format()}"
    bad, good = _signs(lower_better)
    worse, better = _beyond(low, high, t, lower_better)
    if worse or better:
        floor = _chance_floor(delta)
        if floor is not None:
            return Judgement("cannot tell", (
                f"{'worse' if worse else 'better'} beyond {bad if worse else good}{t:g}% ({interval}), but "
                f"n={delta.n_baseline} vs {delta.n_candidate} cannot reach {100 * delta.confidence:.4g}%: "
                f"trials that do not overlap at all still happen by chance with p={floor:.2%}; repeat "
                f"{repeats_needed(delta.confidence)} times or more"), "few-repeats")
        if worse:
            return Judgement("regression", f"the whole {interval} lies beyond {bad}{t:g}%")
        return Judgement("progression", f"the whole {interval} lies beyond {good}{t:g}%")
    if -t <= low and high <= t:
        return Judgement("no change", f"the whole {interval} lies within ±{t:g}%")
    if low > 0 or high < 0:
        direction = "worse" if (low > 0) == lower_better else "better"
        side = bad if direction == "worse" else good
        return Judgement("cannot tell", f"{direction}: the {interval} excludes 0 but does not lie wholly "
                                        f"beyond {side}{t:g}%; repeat to decide", "undecided")
    return Judgement("cannot tell", f"too noisy: the {interval} reaches past both -{t:g}% and +{t:g}%, so "
                                    f"n={delta.n_baseline} vs {delta.n_candidate} cannot tell a {t:g}% change; "
                                    "repeat more (--repeat) or quiet the host", "noisy")


def _range_judgement(delta: Delta, threshold_pct: float, lower_better: bool, baseline: Sequence[float],
                     candidate: Sequence[float]) -> Judgement | None:
    """A two-band side, judged by the ranges: the median of a two-band sample depends on how many trials
    fell in each band, but whatever the mix, it lies between the side's extremes. So when every
    candidate trial lies beyond T of every baseline trial in one direction (the change of the medians is
    bounded by [min(c)/max(b) - 1, max(c)/min(b) - 1]), the verdict does not depend on the bands, as
    long as n_b vs n_c can reach the confidence (:func:`_floor`: no overlap at all happens by chance
    with that probability). None when the ranges overlap or come within T: "cannot tell" stands."""
    low = 100.0 * (min(candidate) / max(baseline) - 1.0)
    high = 100.0 * (max(candidate) / min(baseline) - 1.0)
    t = threshold_pct
    worse, better = _beyond(low, high, t, lower_better)
    if not (worse or better) or _chance_floor(delta) is not None:
        return None
    bad, good = _signs(lower_better)
    verdict, sign = ("regression", bad) if worse else ("progression", good)
    return Judgement(verdict, f"{delta.reason}; but every candidate trial lies beyond {sign}{t:g}% of every "
                              f"baseline trial (range of the change [{low:+.1f}%, {high:+.1f}%]), whatever the bands")


def delta_of(baseline: Sequence[float], candidate: Sequence[float], metric: str, confidence: float) -> Delta:
    """:func:`~labctl.analysis.statistics.compare` at ``confidence``, in the metric's direction, with
    enough resamples for :data:`MIN_TAIL_RESAMPLES` in each tail."""
    tail = (1.0 - confidence) / 2
    resamples = max(DEFAULT_RESAMPLES, math.ceil(MIN_TAIL_RESAMPLES / tail))
    return compare(baseline, candidate, confidence, higher_is_better=not lower_is_better(metric),
                   n_resamples=resamples)


@dataclass
class Side:
    """One run's trials of one configuration: the successful ones summarized, the failed ones counted."""

    run: int | None
    n: int
    failed: int
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cv: float | None = None
    trials: list[int] = field(default_factory=list)

    def format(self) -> str:
        if self.median is None:
            return f"- (n=0, {self.failed} failed)" if self.failed else "-"
        ci = "[no CI]" if self.ci_low is None else f"[{self.ci_low:.3f}, {self.ci_high:.3f}]"
        return f"{self.median:.3f} {ci} n={self.n}"


def side_of(run: int | None, records: Sequence[TrialRecord], metric: str) -> tuple[Side, list[float]]:
    """The Side of ``records`` for ``metric`` (median with its 95% CI) and the values it summarizes."""
    ok = [r for r in records if r.status == "ok" and metric_value(r, metric) is not None]
    values = [metric_value(r, metric) for r in ok]
    side = Side(run, len(ok), sum(r.status == "failed" for r in records), trials=[r.id for r in ok if r.id])
    if values:
        summary = summarize(values)
        side.median, side.ci_low, side.ci_high, side.cv = summary.median, summary.ci_low, summary.ci_high, summary.cv
    return side, values


@dataclass
class ConfigVerdict:
    """The verdict on one configuration (``key``: its config key, ``label``: its varying knobs)."""

    key: str
    label: str
    knobs: dict[str, Any]
    verdict: str
    reason: str
    baseline: Side | None
    candidate: Side | None
    change_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    confidence: float | None = None
    p_value: float | None = None
    notes: list[str] = field(default_factory=list)
    cause: str | None = None  # for "cannot tell": a key of CAUSES
    candidate_value: Any = None  # within one run (labctl.analysis.within): the compared knob's candidate value

    @property
    def change(self) -> str:
        if self.change_pct is None:
            return "-"
        if self.ci_low_pct is None:
            return f"{self.change_pct:+.1f}% [n/a]"
        return f"{self.change_pct:+.1f}% [{self.ci_low_pct:+.1f}, {self.ci_high_pct:+.1f}]"

    def figures(self, metric: str) -> str:
        """E.g. ``mpps 8.112 [7.900, 8.300] n=5 -> 7.140 [...] n=5: -12.0% [-14.1, -9.8]``."""
        base = self.baseline.format() if self.baseline else "-"
        cand = self.candidate.format() if self.candidate else "-"
        return f"{metric} {base} -> {cand}: {self.change}"

    def apply(self, delta: Delta, judgement: Judgement) -> None:
        self.change_pct, self.ci_low_pct, self.ci_high_pct = delta.change_pct, delta.ci_low_pct, delta.ci_high_pct
        self.confidence, self.p_value = delta.confidence, delta.p_value
        self.verdict, self.reason, self.cause = judgement.verdict, judgement.reason, judgement.cause


def _precheck(item: ConfigVerdict, metric: str, b_values: list[float], base: Sequence[TrialRecord],
              cand: Sequence[TrialRecord]) -> bool:
    """Note failed trials, TCG, shared cores and scatter; settle the verdicts that need no statistics
    (as "cannot tell"). True when the pair is to be compared."""
    for side, name in ((item.baseline, "baseline"), (item.candidate, "candidate")):
        if side.failed:
            item.notes.append(f"{side.failed} {name} trial{'s' * (side.failed > 1)} failed")
        if side.cv is not None and side.cv > HIGH_CV:
            item.notes.append(f"{name} cv {side.cv:.0%}")
    records = [*base, *cand]
    if any(r.env.accel == "tcg" for r in records):
        item.notes.append("TCG: functional, not representative")
    if any(r.env.shared_cores for r in records):
        item.notes.append("shared cores")
    for name, side_records in (("baseline", base), ("candidate", cand)):
        busy = busy_side_note(name, side_records)
        if busy:
            item.notes.append(busy)
    missing = [name for side, name in ((item.baseline, "baseline"), (item.candidate, "candidate")) if side.n == 0]
    problem = dimension_problem(base, cand)
    if missing:
        item.reason = " and ".join(f"the {name} has no successful trial with {metric}" for name in missing)
        item.cause = "no-trials"
    elif problem:
        item.reason, item.cause = problem + ": compare runs of one host, accelerator and lab", "environment"
    elif min(b_values) <= 0:
        item.reason = f"the baseline holds {metric} values of 0: a relative change is undefined"
        item.cause = "zero-baseline"
    return item.cause is None


# --------------------------------------------------------------------------------------------------
# the comparison


@dataclass
class Comparison:
    """Every configuration's verdict, the environment changes and notes; ``exit_code`` 1 on a regression."""

    metric: str
    threshold_pct: float
    lower_is_better: bool
    confidence: float  # each interval's (family-wise over the configurations compared)
    baseline: dict[str, Any]  # the run: id, profile_name, host, created_at, db
    candidate: dict[str, Any]
    env_changes: list[EnvChange]
    items: list[ConfigVerdict]
    notes: list[str] = field(default_factory=list)
    #: what the compared trials ran on: host, cpu_model, accel, lab (:func:`shared_env`)
    env: dict[str, Any] = field(default_factory=dict)

    def count(self, verdict: str) -> int:
        return sum(item.verdict == verdict for item in self.items)

    @property
    def regressions(self) -> list[ConfigVerdict]:
        return [item for item in self.items if item.verdict == "regression"]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0

    def summary(self) -> str:
        """E.g. ``1 regression, 0 progressions, 3 no change, 0 cannot tell``."""
        plural = {"regression": "regressions", "progression": "progressions"}
        return ", ".join(f"{n} {verdict if n == 1 else plural.get(verdict, verdict)}"
                         for verdict, n in ((v, self.count(v)) for v in VERDICTS))

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "threshold_pct": self.threshold_pct, "lower_is_better": self.lower_is_better,
            "confidence": self.confidence, "baseline": self.baseline, "candidate": self.candidate,
            "env_changes": [asdict(c) for c in self.env_changes],
            "verdicts": [{**_item_dict(item), "change": item.change} for item in self.items],
            "counts": {verdict: self.count(verdict) for verdict in VERDICTS},
            "exit_code": self.exit_code, "notes": self.notes, "env": self.env,
        }


def _item_dict(item: ConfigVerdict) -> dict[str, Any]:
    data = asdict(item)
    if item.candidate_value is None:  # run against run: no knob value to name
        del data["candidate_value"]
    return data


def _with_trial_host(run: dict[str, Any] | None, records: Sequence[TrialRecord]) -> dict[str, Any] | None:
    """``run`` with ``host`` replaced by the host its trials recorded, when they all recorded one."""
    hosts = {r.env.host for r in records}
    if run is None or len(hosts) != 1 or None in hosts:
        return run
    return {**run, "host": hosts.pop()}


def _by_key(records: Iterable[TrialRecord]) -> dict[str, list[TrialRecord]]:
    out: dict[str, list[TrialRecord]] = {}
    for record in records:
        out.setdefault(record.config_key, []).append(record)
    return out


def differing_knobs(baseline: Sequence[TrialRecord], candidate: Sequence[TrialRecord]) -> str:
    """The knobs no value of which both runs share, as ``knob (old values vs new values)``, the first five
    shown (empty when there are none): why no configuration of one run recurs in the other."""
    differ = []
    for knob in dict.fromkeys(k for r in (*baseline, *candidate) for k in r.config):
        old = sorted({repr(r.config.get(knob, "absent")) for r in baseline})
        new = sorted({repr(r.config.get(knob, "absent")) for r in candidate})
        if not set(old) & set(new):
            differ.append(f"{knob} ({', '.join(old)} vs {', '.join(new)})")
    return "; ".join(differ[:5]) + (f"; and {len(differ) - 5} more" if len(differ) > 5 else "")


def check_paired(result: Comparison, baseline: Sequence[TrialRecord], candidate: Sequence[TrialRecord]) -> Comparison:
    """``result``, unless none of the baseline run's configurations recurs in the candidate run: then a
    UserError naming the knobs that differ (such a comparison has nothing to judge, and a CI job would
    pass on it without a verdict)."""
    if result.items and all(item.cause == "unpaired" for item in result.items):
        differ = differing_knobs(judged_trials(baseline), judged_trials(candidate))
        raise UserError(f"--baseline {result.baseline.get('id')}: none of its configurations recurs in candidate "
                        f"run {result.candidate.get('id')}{', knobs that differ: ' + differ if differ else ''} "
                        "(allowed: a baseline run of the candidate's profile and configurations)")
    return result


def _unpaired_note(base: dict[str, list[TrialRecord]], cand: dict[str, list[TrialRecord]]) -> str | None:
    """When no configuration pairs: the knobs whose values differ between the runs (a changed profile,
    or a labctl that records a new knob), so the user sees why."""
    if set(base) & set(cand) or not base or not cand:
        return None
    shown = differing_knobs([r for group in base.values() for r in group], [r for group in cand.values() for r in group])
    return "no configuration of the baseline recurs in the candidate" + (f": knobs that differ: {shown}" if shown else "")


def pair_item(key: str, label: str, knobs: dict[str, Any], b_records: Sequence[TrialRecord],
              c_records: Sequence[TrialRecord], metric: str, ids: tuple[Any, Any], missing: tuple[str, str],
              pending: list[tuple[ConfigVerdict, list[float], list[float]]]) -> ConfigVerdict:
    """One configuration's :class:`ConfigVerdict` before the statistics: its sides summarized, and
    "cannot tell" settled where no statistics are needed (a side missing: ``missing`` names where, as
    "not in the ``missing[0]``" for the baseline's and ``missing[1]`` for the candidate's; no trials,
    another host, zeros). A pair to be judged is appended to ``pending`` for :func:`judge_pending`."""
    (b_side, b_values), (c_side, c_values) = side_of(ids[0], b_records, metric), side_of(ids[1], c_records, metric)
    item = ConfigVerdict(key, label, knobs, "cannot tell", "", b_side if b_records else None,
                         c_side if c_records else None)
    if not b_records or not c_records:
        item.reason, item.cause = f"not in the {missing[1] if b_records else missing[0]}", "unpaired"
    elif _precheck(item, metric, b_values, b_records, c_records):
        pending.append((item, b_values, c_values))
    return item


def judge_pending(pending: Sequence[tuple[ConfigVerdict, list[float], list[float]]], metric: str,
                  threshold_pct: float) -> float:
    """Judge every pending pair at the family-wise confidence over all of them (:func:`family_confidence`:
    the same correction whether the pairs are configurations of two runs or a knob's values in one);
    returns that confidence."""
    confidence = family_confidence(len(pending))
    for item, b_values, c_values in pending:
        delta = delta_of(b_values, c_values, metric, confidence)
        item.apply(delta, judge(delta, threshold_pct, lower_is_better(metric), (b_values, c_values)))
    return confidence


def family_notes(items: Sequence[ConfigVerdict], compared: int, confidence: float, threshold_pct: float,
                 ok: Sequence[TrialRecord], baseline: Sequence[TrialRecord],
                 candidate: Sequence[TrialRecord]) -> list[str]:
    """The notes under the verdicts: the family-wise confidence, the noisy configurations, unsteady hosts
    and busy strangers."""
    notes = []
    if compared > 1:
        notes.append(f"{compared} configurations compared: each interval at {100 * confidence:.4g}%, so that "
                     f"noise alone fails the whole comparison less than {1 - CONFIDENCE:.0%} of the time")
    noisy = sum(i.cause == "noisy" for i in items)
    if noisy:
        notes.append(f"{noisy} of {len(items)} configurations are too noisy to tell a {threshold_pct:g}% change "
                     "either way: they do not fail the job, and they do not show that nothing regressed")
    unsteady = sum(unsteady_warning(r.warnings) is not None for r in ok)
    if unsteady:
        notes.append(f"{unsteady} of {len(ok)} trials ran on a host measured unsteady before their sweep")
    busy = busy_note(baseline, candidate)
    if busy:
        notes.append(busy)
    return notes


def compare_runs(baseline: Sequence[TrialRecord], candidate: Sequence[TrialRecord], metric: str = "mpps",
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT, baseline_run: dict[str, Any] | None = None,
                 candidate_run: dict[str, Any] | None = None) -> Comparison:
    """Pair the configurations of two runs' trials (every status) and give each a verdict.

    ``baseline_run``/``candidate_run`` describe the runs (id, profile_name, host, created_at, db) for the
    output (the host shown is the one the trials recorded, ``env.host``, when they agree: a fleet's or
    CI job's trials name their inventory host). Configurations are listed in the order of their knob
    values. ``metric`` may be an alias (``ndr``); the single measurements of NDR/PDR searches are left
    out (:func:`judged_trials`)."""
    metric = metric_name(metric)
    baseline, candidate = judged_trials(baseline), judged_trials(candidate)
    baseline_run, candidate_run = _with_trial_host(baseline_run, baseline), _with_trial_host(candidate_run, candidate)
    base, cand = _by_key(baseline), _by_key(candidate)
    ok = [r for r in (*baseline, *candidate) if r.status == "ok"]
    knobs = [k for k in varying_knobs(ok) if not k.startswith("env.")]
    b_id, c_id = (baseline_run or {}).get("id"), (candidate_run or {}).get("id")
    items: list[ConfigVerdict] = []
    pending: list[tuple[ConfigVerdict, list[float], list[float]]] = []
    for key in [*base, *(k for k in cand if k not in base)]:
        example = (base.get(key) or cand[key])[0]
        values = {k: knob_value(example, k) for k in knobs}
        label = short_label(values.items(), " ") or str(example.config.get("name", "all"))
        items.append(pair_item(key, label, values, base.get(key, []), cand.get(key, []), metric, (b_id, c_id),
                               ("baseline run", "candidate run"), pending))
    confidence = judge_pending(pending, metric, threshold_pct)
    items.sort(key=lambda item: tuple(sort_key(item.knobs[k]) for k in knobs))
    unpaired = _unpaired_note(base, cand)
    notes = [unpaired] if unpaired else []
    notes += family_notes(items, len(pending), confidence, threshold_pct, ok, baseline, candidate)
    return Comparison(metric, threshold_pct, lower_is_better(metric), confidence, baseline_run or {"id": b_id},
                      candidate_run or {"id": c_id}, env_changes(baseline, candidate), items, notes,
                      env=shared_env([*baseline, *candidate]))
