"""The advisor's decision per knob on a ``sweep --until decided`` run: the run's own sequential verdicts.

Such a run stored, in its info (``until``), one verdict per comparison (a knob's value against the sweep's
first value), reached on within-block paired differences with the error spent across the looks
(:mod:`labctl.analysis.sequential`). Those verdicts were what the run measured for: for every knob they
cover they replace the pooled bootstrap's decision (which ignores the blocks and the looks):

- a candidate *better* by more than the threshold: recommend it, with the change, its interval and the
  confidence achieved at the look that decided it (not the nominal 95 %);
- *worse* (every candidate worse, or worse and equivalent): keep the baseline;
- *equivalent* within ±threshold (two one-sided tests, Schuirmann 1987): keep the baseline, the sweep's
  first value (rule: equivalent values buy nothing measurable, so change nothing);
- *open* at the budget or *refused*: inconclusive, with what it would need (repeats, time) or the reason.

With several candidates: the best of those called better wins; any other candidate still open makes the
knob inconclusive unless one is better (a better one is decided whatever the open ones turn out to be
against the baseline, but the ranking among candidates is then not tested: the rationale says so).
"""

from __future__ import annotations

import math
from typing import Any

from advisor.advice import Advice, Inconclusive, Recommendation, show_value
from labctl.analysis.course import describe, heading
from labctl.results.metrics import lookup


def _inverse(state: dict[str, Any], loss: bool) -> tuple[float, tuple[float, float] | None]:
    """The baseline's change against the candidate (the comparison seen from the other side)."""
    if loss:
        return -state["change_pct"], (-state["high_pct"], -state["low_pct"])

    def inv(p: float) -> float:
        return (1.0 / (1.0 + p / 100.0) - 1.0) * 100.0 if p > -100.0 else math.inf

    return inv(state["change_pct"]), (inv(state["high_pct"]), inv(state["low_pct"]))


def _trials(records_by_knob: dict[str, dict[str, list[int]]], knob: str, *values: Any) -> list[int]:
    cells = records_by_knob.get(knob, {})
    return sorted({i for v in values for i in cells.get(repr(v), [])})


def knob_decision(knob: str, states: list[dict[str, Any]], course: dict[str, Any],
                  ids: dict[str, dict[str, list[int]]]) -> Recommendation | Inconclusive:
    """One knob's decision from its comparisons' verdicts (see the module's text)."""
    metric = course.get("metric") or "mpps"
    loss = _judged_on_loss_metric(course)
    head = heading(course, course.get("run_id"))
    baseline = states[0]["baseline"]
    better = [s for s in states if s["verdict"] == "better"]
    if better:
        best = max(better, key=lambda s: -s["change_pct"] if loss else s["change_pct"])
        untested = [s for s in states if s is not best and s["verdict"] in ("better", "open")]
        note = (f"; {', '.join(show_value(s['candidate']) for s in untested)} not ranked against it"
                if untested else "")
        return Recommendation(knob, best["candidate"], metric, best["change_pct"], (best["low_pct"], best["high_pct"]),
                              _trials(ids, knob, baseline, best["candidate"]),
                              f"{head}. {describe(best)}{note}", baseline=baseline, settings={knob: best["candidate"]})
    open_ = [s for s in states if s["verdict"] in ("open", "refused")]
    if open_:
        return Inconclusive(knob, f"{head}. " + "; ".join(describe(s) for s in open_))
    worse = [s for s in states if s["verdict"] == "worse"]
    if worse:  # every candidate worse or equivalent: keep the baseline, shown against the nearest worse one
        near = min(worse, key=lambda s: abs(s["change_pct"]))
        gain, ci = _inverse(near, loss)
        why = "; ".join(describe(s) for s in states)
        return Recommendation(knob, baseline, metric, gain, ci, _trials(ids, knob, baseline, *[s["candidate"] for s in states]),
                              f"{head}. Keep {show_value(baseline)}: {why}", baseline=near["candidate"],
                              settings={knob: baseline})
    # every candidate equivalent within the band: keep the baseline (the sweep's first, the current value)
    widest = max(states, key=lambda s: max(abs(s["low_pct"]), abs(s["high_pct"])))
    gain, ci = _inverse(widest, loss)
    why = "; ".join(describe(s) for s in states)
    return Recommendation(knob, baseline, metric, gain, ci, _trials(ids, knob, baseline, *[s["candidate"] for s in states]),
                          f"{head}. Equivalent within ±{course.get('threshold_pct'):g}%: keep {show_value(baseline)} "
                          f"(rule: equivalent values buy nothing measurable, so keep the sweep's first, the current "
                          f"value): {why}", baseline=widest["candidate"], settings={knob: baseline})


def _judged_on_loss_metric(course: dict[str, Any]) -> bool:
    """Whether the run's verdicts compared a loss (``--verdict-metric loss_ratio``), not a rate."""
    entry = lookup(course.get("metric") or "mpps")
    return entry is not None and entry.kind == "loss"


def _withdraw_ranked_by_rate(advice: Advice, knobs: set[str]) -> None:
    """Withdraw the pooled decision's "ranked by rate alone" warning for the knobs the run's verdicts judged
    on their loss: for those it is not true (they were compared on loss, within blocks)."""
    before = advice.saturation_warning()
    advice.saturated = {k: low for k, low in advice.saturated.items() if k not in knobs}
    at = advice.warnings.index(before) if before in advice.warnings else None
    if at is not None:
        if advice.saturated:
            advice.warnings[at] = advice.saturation_warning()
        else:
            del advice.warnings[at]


def apply_until(advice: Advice, course: dict[str, Any] | None, ids: dict[str, dict[str, list[int]]],
                run_id: int | None = None) -> Advice:
    """``advice`` with every knob the run's ``until`` verdicts cover decided by them (see the module's text).
    ``ids``: per knob, per ``repr`` of a value, the ids of the blocked trials at it; ``run_id`` named in the
    rationale. Unchanged without verdicts."""
    states = (course or {}).get("comparisons") or []
    if not states:
        return advice
    knobs: dict[str, list[dict[str, Any]]] = {}
    for s in states:
        knobs.setdefault(s["knob"], []).append(s)
    advice.recommendations = [r for r in advice.recommendations if r.knob not in knobs]
    advice.inconclusive = [i for i in advice.inconclusive if i.knob not in knobs]
    course = {**(course or {}), "run_id": run_id}
    if advice.saturated and _judged_on_loss_metric(course):
        _withdraw_ranked_by_rate(advice, set(knobs))
    for knob, group in knobs.items():
        decision = knob_decision(knob, group, course, ids)
        if isinstance(decision, Recommendation):
            advice.recommendations.append(decision)
        else:
            advice.inconclusive.append(decision)
    return advice
