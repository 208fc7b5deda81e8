"""The advisor's analysis engine: per knob, the decision (steps 5 and 6 of the method in
:mod:`advisor.recommend`) and its words.

:class:`_Analysis` decides one knob over a set of strata (a faster value, a value that loses less,
keep the reference, or inconclusive with what to measure next), writes the rationale or the reason,
and repeats the decision inside each value of every other knob or condition. The cells and effects it
decides on are :mod:`advisor.effects`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from labctl.analysis import statistics
from labctl.results.metrics import SHORT_NAMES

from advisor.advice import Inconclusive, Recommendation, _pct_loss, show_value
from advisor.effects import MIN_REPEATS, N_BOOT, _Cell, _Effect, _Effects
from advisor.facts import _DROP_CAUSES
from advisor.knobs import _MISSING, _default_of

__all__ = [
    "CONFIDENCE",
    "CONDITIONAL_CONFIDENCE",
    "NOISE_FLOOR_PCT",
    "MIN_TAIL_RESAMPLES",
    "POWER",
]

#: Confidence of every interval (Bonferroni-adjusted over a knob's values): the statistics' own.
CONFIDENCE = statistics.CONFIDENCE

#: Confidence of conditional findings (an effect inside one value of another knob, and the difference
#: of effects between conditions): stricter, because every knob is split by every other knob.
CONDITIONAL_CONFIDENCE = 0.99

#: Smallest rate change worth a recommendation, %. Repeated runs of one configuration scatter by a
#: cv of 3-5 % on a quiet host (measured on the 2-vCPU guest labctl was built on); a change below 2 % is
#: inside that noise even when an interval excludes 0, and is not worth a reconfiguration.
NOISE_FLOOR_PCT = 2.0

#: Fewest bootstrap resamples each tail of an interval must hold (below it the interval is the extremes).
MIN_TAIL_RESAMPLES = statistics.MIN_TAIL_RESAMPLES

#: Power for the "run --repeat N" advice when a difference is inside the noise.
POWER = 0.8


@dataclass
class _Decision:
    recommendation: Recommendation | None = None
    reason: str | None = None
    pick: Any = _MISSING
    contrast: tuple[Any, Any, str] | None = None  # (value, reference, metric) behind the recommendation
    rate_effects: dict[Any, _Effect] = field(default_factory=dict)


class _Analysis(_Effects):
    """The decisions of :func:`advisor.recommend.advise` on the cells and effects of :class:`_Effects`."""

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
            text += self._demand_text(k, best, usable)
            decision.recommendation = self._recommend(k, best, ref, self.rate.metric, e, text, condition)
            decision.pick, decision.contrast = best, (best, ref, self.rate.metric)
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
                        f"limit{keep}: {self.label(k, alt)} {self.rate.verb} {effects[alt].format()} {self.rate.unit} "
                        "against it but lost "
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
                        f"{self.rate.verb} {effects[alt].format()} {self.rate.unit} against it "
                        f"({self._strata_text(effects[alt])})")
                text += self._loss_note(k, ref, alt, loss_med)
                text += self._demand_text(k, ref, usable)
                decision.recommendation = self._recommend(k, ref, alt, self.rate.metric, e, text, condition)
                decision.pick, decision.contrast = ref, (ref, alt, self.rate.metric)
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

    def _strata_text(self, e: _Effect, metric: str = "rate") -> str:
        m = len(e.pairs)
        if m == 1:
            return f"n={e.n_a} vs {e.n_b}"
        if metric != "loss":
            up = sum(1 for a, b in e.pairs if a.median() > b.median())
            return f"faster in {up} of {m} configurations of the other knobs, n={e.n_a} vs {e.n_b}"
        down = sum(1 for a, b in e.pairs if a.loss_median() < b.loss_median())
        return f"lower loss in {down} of {m} configurations of the other knobs, n={e.n_a} vs {e.n_b}"

    def _rate_text(self, k: int, value: Any, ref: Any, e: _Effect) -> str:
        med_a = float(np.median([x for a, _ in e.pairs for x in a.rates]))
        med_b = float(np.median([x for _, b in e.pairs for x in b.rates]))
        unit = self.rate.unit
        return (f"{self.label(k, value)} {self.rate.verb} {e.format()} {unit} against {self.label(k, ref)} "
                f"(median {self.rate.show(med_a)} vs {self.rate.show(med_b)} {unit}; {self._strata_text(e)})")

    def _loss_note(self, k: int, value: Any, ref: Any, loss_med: dict[Any, float | None]) -> str:
        if not self.rate.loss_limited:
            return (f"; no loss limit applies: TCP retransmits what its path drops, so the values are ranked by "
                    f"{self.rate.unit} alone")
        a, b = loss_med.get(value), loss_med.get(ref)
        if a is None or b is None:
            return ""
        limit = "within" if a <= self.max_loss else "above"
        return f"; median loss {_pct_loss(a)} vs {_pct_loss(b)} ({limit} the {_pct_loss(self.max_loss)} limit)"

    def _demand_text(self, k: int, pick: Any, strata: list[dict[Any, _Cell]]) -> str:
        """The service demands (lower is better) of ``pick`` against every other value, medians over the
        trials of these strata, where the records carry them; empty for forwarding rates."""
        values = sorted({v for s in strata for v in s}, key=lambda v: self.order[(k, v)])
        parts = []
        for metric in self.rate.demands:
            med = {}
            for v in values:
                xs = [x for s in strata if v in s for x in s[v].demands.get(metric, [])]
                if xs:
                    med[v] = float(np.median(xs))
            others = [v for v in values if v != pick and v in med]
            if pick not in med or not others:
                continue
            if all(med[pick] < med[v] for v in others):
                word = "lower"
            elif all(med[pick] > med[v] for v in others):
                word = "higher"
            else:
                word = "neither lower nor higher than every alternative"
            against = ", ".join(f"{med[v]:.3g} with {self.label(k, v)}" for v in others)
            parts.append(f"{SHORT_NAMES.get(metric, metric)} {med[pick]:.3g} against {against} ({word})")
        if not parts:
            return ""
        return f"; service demand with {self.label(k, pick)} (median, lower is better): " + "; ".join(parts)

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
                 f"({rate.format()} {self.rate.unit})")
        return text

    def _noise_reason(self, k: int, ref: Any, effects: dict[Any, _Effect], est: dict[Any, float],
                      acceptable: set[Any], loss_med: dict[Any, float | None]) -> str:
        slower = [v for v, e in effects.items() if self.worse(e)]
        ties = [v for v in effects if v not in slower] or list(effects)
        alt = max(ties, key=lambda v: abs(effects[v].est_pct))
        e = effects[alt]
        cvs = [float(np.std(c.rates, ddof=1) / np.mean(c.rates)) for a, b in e.pairs for c in (a, b) if c.n >= 2]
        cv = float(np.median(cvs)) if cvs else None
        text = (f"differences inside the noise: {self.label(k, alt)} {e.format()} {self.rate.unit} against "
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
                text += f"; {self.label(k, v)} is slower ({effects[v].format()} {self.rate.unit}): avoid it"
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
        if metric != "loss_ratio":
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
        if metric != "loss_ratio":
            return self.rate_effect(pairs, CONDITIONAL_CONFIDENCE)
        return self.loss_effect(pairs, CONDITIONAL_CONFIDENCE)

    def _attach_condition(self, rec: Recommendation, j: int, value: Any) -> None:
        rec.condition[self.dims[j].name] = self.dims[j].json_value(value)
