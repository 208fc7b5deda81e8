"""Recommendations from measured trials: per knob, the value to use for the best rate at acceptable loss.

``advise(trials)`` looks at the stored trials of a sweep (:class:`labctl.results.record.TrialRecord`) and, for
every knob that varies across them, compares its values *holding every other knob fixed*, then pools
those like-for-like comparisons. It recommends a value only when the evidence says so, and otherwise
says why not and what to measure next.

Knobs
-----
A knob (:class:`advisor.knobs.Knob`) is a config key with more than one value among the trials. NIC
fields that every trial sets alike on all NICs are one knob (``guest.nics.*.rx_queue_size``); all
varying ``guest.pinning.*`` keys are one knob, ``guest.pinning``, whose values are pinning layouts
(split: the vswitch PMD CPU runs no vCPU; shared: it does). Keys that describe the workload or the
measurement rather than a tuning choice (:data:`advisor.knobs.CONDITION_KEYS`: packet size, forwarding
mode, durations, the profile name, the TCP workload kind, sessions and direction...) and the
environment (host, accelerator) are never recommended; they only split the data (a comparison never
mixes packet sizes or hosts) and may be the *condition* of a recommendation.

Method, per knob
----------------
1. Strata: trials with the same values of every other knob (and host/accelerator) form a stratum; a
   stratum with two or more values of the knob is a like-for-like comparison. A configuration's trials
   are a cell.
2. Two-band check (on a 2-vCPU guest host identical 64-byte runs landed in two bands, about 8-10 and
   15-17 Mpps, where repeats on a quiet host scatter by a cv of 3-5 %): if the rates of all trials split
   into two bands
   (:func:`labctl.analysis.statistics.two_band`) and configurations landed in both, or a cell of 4+ trials is
   two-band on its own, those cells are *bimodal*. When a quarter or more of the cells (and at least
   two) are bimodal the whole data set is band-limited and nothing is recommended; otherwise strata
   holding a bimodal cell are left out of the comparison.
3. Rate effect of value ``a`` against the reference ``r`` (the schema default when it was measured,
   else the first value measured): per stratum the log ratio of the cell medians; pooled as their
   mean; the interval is a percentile bootstrap (:data:`advisor.effects.N_BOOT` resamples) that
   resamples the trials of each cell (the method of :func:`labctl.analysis.statistics.compare`, which
   gives the figures when there is a single stratum). With fewer than :data:`advisor.effects.MIN_REPEATS`
   trials in a cell the strata themselves are resampled too (two-stage bootstrap), which needs at least
   :data:`advisor.effects.MIN_POOLED_STRATA` strata and :data:`advisor.effects.MIN_POOLED_TRIALS` trials
   per value; with less, the knob is "too few repeats".
   "better" means the interval excludes 0 *and* the change is at least
   :data:`advisor.engine.NOISE_FLOOR_PCT`; "worse" the mirror image; otherwise the difference is inside
   the noise. With ``k`` values the confidence is Bonferroni-adjusted, ``1 - (1 - confidence) / (k - 1)``.
4. Loss: a value is acceptable when the median loss ratio of its trials is at most ``max_loss``
   (:data:`advisor.advice.DEFAULT_MAX_LOSS`). If no value is acceptable (a saturating generator: testpmd
   cannot pace) all are ranked by rate and a warning says so. A loss effect is the pooled difference of
   cell median loss ratios; "lower loss" needs its interval below 0 and at most half the reference's
   loss (:data:`advisor.effects.LOSS_FACTOR`).
5. Decision: (a) the fastest acceptable value if it is "better" than the reference (metric ``mpps``);
   else (b) an acceptable value whose loss is lower and whose rate is not worse (or the reference is not
   acceptable) (metric ``loss_ratio``, ``gain_pct`` is then the relative change of the loss ratio,
   negative = fewer losses); else (c) keep the reference if every other value is "worse", or is
   faster but loses more than ``max_loss`` (significantly more than the reference: metric
   ``loss_ratio``); else inconclusive, with what to measure next.
6. Conditions: the decision is repeated inside each value of every other knob or condition, at
   :data:`advisor.engine.CONDITIONAL_CONFIDENCE` shared (Bonferroni) among all the conditions examined,
   since each is one more chance for one lucky configuration to pass; when the trials cannot reach that
   confidence at all (too few bootstrap resamples in a tail, or n_a vs n_b so small that even two sets
   of trials that do not overlap have p = 2 / C(n_a + n_b, n_a) above it), no finding is made in that
   condition. When the outcomes differ and the effect itself differs significantly between them
   (bootstrap interval of the difference at :data:`advisor.engine.CONDITIONAL_CONFIDENCE`, not corrected
   further: it only decides how a finding that passed is reported), the knob is reported per condition
   instead (e.g. queues 2 "with split pinning", inconclusive "with shared pinning").

Kernel-stack trials (``workload.kind`` tcp_stream / tcp_rr): the rate ranked is the run's own,
``bandwidth_gbps`` or ``transactions_per_s`` (:data:`TCP_METRICS`, higher is better), by the same steps;
no loss limit applies (TCP retransmits what its path drops: step 4 accepts every value, and the rationale
says so where a forwarding one gives the loss beside the limit). A recommendation (or keeping the
reference) also quotes the median service demands (netperf's CPU per KB or per transaction, host and
guest, lower is better) of its value against every other value, where the trials carry them; they
inform, they do not decide.

Platform limits: trials that ran ``tx_queue_size`` above 256 on a NIC whose backend is not vhost-user
are mislabelled (QEMU caps tap and network at 256) and are left out with a warning; a recommendation of
``tx_queue_size`` above 256 is only ever made for vhost-user NICs (made conditional on the backend when
the backend varies). Trials from TCG or with shared cores are flagged in the warnings.

Modules
-------
This module is the entry point, :func:`advise` (``labctl.api.advise`` reads a run from the store). The
parts: :mod:`advisor.knobs` (the knob model), :mod:`advisor.facts` (per-trial facts: loss, drop causes,
pinning layout, tx ring limits), :mod:`advisor.effects` (cells, bands and pooled effects: steps 1-4),
:mod:`advisor.engine` (the decisions and their words: steps 5-6), :mod:`advisor.advice` (the result
types) and :mod:`advisor.apply` (``labctl advise --apply``: the tuned profile).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from labctl.errors import UserError
from labctl.platform import TX_RING_CAP
from labctl.results.record import TrialRecord
from labctl.host.steadiness import unsteady_warning

from labctl.analysis import statistics
from labctl.results.metrics import FORWARDING_RATES, TCP_RATES, ranked_rates

from advisor.advice import DEFAULT_MAX_LOSS, Advice
from advisor.effects import FORWARDING, Rate, rate_of
from advisor.engine import CONFIDENCE, NOISE_FLOOR_PCT, _Analysis
from advisor.facts import tx_ring_violation
from advisor.knobs import Knob, knob_groups

__all__ = ["advise", "RATE_METRICS", "TCP_METRICS", "ADVISED_METRICS", "advised_metrics"]


# --------------------------------------------------------------------------------------------------
# the entry points


#: The rates the advisor ranks: the rate at the trial's load (``mpps``), or the highest rate with no loss
#: (``ndr_mpps``) or at most 0.5% loss (``pdr_mpps``) an NDR/PDR search found (the registry's).
RATE_METRICS = FORWARDING_RATES

#: The rates of the kernel-stack kinds (:data:`labctl.results.metrics.TCP_RATES`): ``bandwidth_gbps``
#: (tcp_stream), ``transactions_per_s`` (tcp_rr); higher is better, no loss limit (TCP retransmits).
TCP_METRICS = tuple(TCP_RATES)

#: Every rate the advisor ranks.
ADVISED_METRICS = RATE_METRICS + TCP_METRICS

#: The rates these trials can be ranked by (:func:`labctl.results.metrics.ranked_rates`).
advised_metrics = ranked_rates


def advise(
    trials: Iterable[TrialRecord],
    max_loss: float = DEFAULT_MAX_LOSS,
    *,
    confidence: float = CONFIDENCE,
    noise_floor_pct: float = NOISE_FLOOR_PCT,
    seed: int = 0,
    metric: str = "mpps",
) -> Advice:
    """Recommend, per knob, the value for the best rate at a median loss ratio of at most ``max_loss``.

    ``trials``: records of any status (failed and aborted ones are counted in a warning and left out;
    paced trials the generator could not keep up with, too). ``metric``: the rate ranked
    (:data:`ADVISED_METRICS`; for NDR/PDR the loss limit does not apply: those rates are at their loss
    goal; nor for the tcp rates, whose recommendations also quote the service demands the trials
    carry). Deterministic: the bootstrap is seeded with ``seed``. See the module docstring for the rules.
    """
    if metric not in ADVISED_METRICS:
        raise UserError(f"metric {metric}: not a rate the advisor ranks (allowed: {', '.join(ADVISED_METRICS)})")
    trials = list(trials)
    invalid = [r for r in trials if r.metrics.valid is False]
    trials = [r for r in trials if r.metrics.valid is not False]
    rate = rate_of(metric)
    advice = _advise(trials, max_loss, confidence=confidence, noise_floor_pct=noise_floor_pct, seed=seed,
                     rate=rate)
    if invalid:
        advice.warnings.append(f"left out {len(invalid)} paced trials the generator could not keep up with "
                               "(invalid: it fell behind its schedule): they measure the generator, not the lab")
    if metric != "mpps":
        advice.warnings = [w for w in advice.warnings if "loss limit" not in w]
    return advice


def _advise(
    trials: Iterable[TrialRecord],
    max_loss: float = DEFAULT_MAX_LOSS,
    *,
    confidence: float = CONFIDENCE,
    noise_floor_pct: float = NOISE_FLOOR_PCT,
    seed: int = 0,
    rate: Rate = FORWARDING,
) -> Advice:
    """The analysis of :func:`advise`, ranking by ``rate`` (its own field of each record, its words)."""
    if not 0.0 <= max_loss <= 1.0:
        raise UserError(f"max loss {max_loss}: a loss ratio is between 0 and 1 (e.g. 0.001 for 0.1%)")
    records = list(trials)
    advice = Advice(max_loss=max_loss)
    refs_all = [r.id if r.id is not None else i + 1 for i, r in enumerate(records)]
    ok = [(ref, r) for ref, r in zip(refs_all, records)
          if r.status == "ok" and (rate.value(r) or 0.0) > 0]
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
    analysis = _Analysis(recs, refs, dims, max_loss, confidence, noise_floor_pct, seed, rate)
    if analysis.bimodal_cells:
        advice.warnings.append(analysis.band_reason())
    high = [c for c in analysis.cells.values() if c.n >= 2 and not c.bimodal
            and np.std(c.rates, ddof=1) / np.mean(c.rates) > statistics.HIGH_CV]
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
        advice.saturated = dict(analysis.saturated)
        advice.saturated_paced = all(r.metrics.valid is not None for r in recs)  # labgen reports validity
        advice.warnings.append(advice.saturation_warning())
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
    for field, what in (("accel", "accelerators"), ("lab", "labs")):
        seen = sorted({getattr(r.env, field) for r in records if getattr(r.env, field)})
        if len(seen) > 1:
            out.append(f"trials come from {len(seen)} {what} ({', '.join(seen)}): every comparison is made within "
                       f"one {field}, and none pools them")
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
