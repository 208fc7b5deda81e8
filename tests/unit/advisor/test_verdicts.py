"""The advisor on a ``sweep --until decided`` run: per knob, the run's own verdict, trials and confidence."""

from __future__ import annotations

import random

from advisor.advice import Advice, Inconclusive, Recommendation
from advisor.verdicts import apply_until
from labctl import api
from labctl.measure.sweep import run_sweep
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS
from tests.unit.measure.test_until import CPUS, runner

RX, BURST = "guest.nics.*.rx_queue_size", "workload.burst"


def _state(knob, baseline, candidate, verdict, change, low, high, **kw):
    return {"knob": knob, "baseline": baseline, "candidate": candidate, "verdict": verdict, "trials": 24,
            "looks": 3, "pairs": 12, "alpha": 0.004, "confidence": 0.996, "change_pct": change, "low_pct": low,
            "high_pct": high, "sd": 0.05, "reason": "", **kw}


def _course(*states, stop="decided"):
    return {"budget": "40 trials", "threshold_pct": 5.0, "metric": "mpps", "alpha": 0.05, "spending": "pocock",
            "looks": 3, "looks_planned": 8, "blocks": 12, "max_blocks": 20, "stop": stop, "comparisons": list(states)}


def _engine_advice():  # what the pooled bootstrap said: replaced for the knobs the verdicts cover
    return Advice(recommendations=[Recommendation(RX, 1024, "mpps", 3.0, (1.0, 5.0), [1, 2], "bootstrap")],
                  inconclusive=[Inconclusive(BURST, "inside the noise"), Inconclusive("guest.vcpus", "too few")])


def test_until_verdicts_decide_each_knob_they_cover():
    course = _course(_state(RX, 256, 1024, "better", 19.8, 14.0, 26.0),
                     _state(BURST, 32, 64, "equivalent", 0.4, -2.1, 3.0))
    advice = apply_until(_engine_advice(), course, {RX: {"256": [1, 3], "1024": [2, 4]}, BURST: {"32": [1], "64": [2]}})
    recs = {r.knob: r for r in advice.recommendations}
    assert recs[RX].value == 1024 and recs[RX].gain_pct == 19.8 and recs[RX].ci_pct == (14.0, 26.0)
    assert recs[RX].trials == [1, 2, 3, 4]
    assert "better +19.8% [+14.0, +26.0] after 24 trials, confidence 99.60%" in recs[RX].rationale
    assert recs[BURST].value == 32 and "Equivalent within ±5%: keep 32" in recs[BURST].rationale
    assert "keep the sweep's first, the current value" in recs[BURST].rationale
    assert [i.knob for i in advice.inconclusive] == ["guest.vcpus"]  # a knob the verdicts do not cover stays
    text = advice.format()
    assert "recommend guest.nics.*.rx_queue_size = 1024: +19.8% [+14.0, +26.0] mpps (n=4)" in text


def test_worse_keeps_the_baseline_and_open_is_a_refusal_with_what_it_needs():
    worse = _state(RX, 256, 1024, "worse", -20.0, -30.0, -10.0)
    advice = apply_until(Advice(), _course(worse), {})
    rec = advice.recommendations[0]
    assert rec.value == 256 and rec.baseline == 1024 and rec.gain_pct > 20 and "Keep 256" in rec.rationale
    open_ = _state(BURST, 32, 64, "open", 4.0, -3.0, 12.0, needed_pairs=40, needed_trials=56, needed_s=84.0)
    advice = apply_until(Advice(), _course(open_, stop="budget"), {})
    assert not advice.recommendations
    reason = advice.inconclusive[0].reason
    assert "budget (40 trials) spent" in reason and "needs 40 pairs: 56 more trials, about 1.4 min" in reason
    refused = _state(BURST, 32, 64, "refused", None, None, None, reason="two bands that do not mix")
    assert "refused (two bands that do not mix)" in apply_until(Advice(), _course(refused), {}).inconclusive[0].reason


def test_no_verdicts_leave_the_advice_alone():
    advice = _engine_advice()
    assert apply_until(advice, None, {}) is advice and len(advice.recommendations) == 1


def test_advise_on_an_until_decided_run_names_verdict_trials_confidence(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    result = run_sweep(loaded, db, runner=runner({256: 5.0, 1024: 6.0}, 0.01, [], random.Random(3)),
                       until="decided", budget="80")
    text = api.advise(db, result.run_id).format()
    assert "recommend guest.nics.*.rx_queue_size = 1024" in text
    assert f"until decided (run {result.run_id}): every comparison decided" in text and "confidence" in text
    assert "workload.burst: 64 vs 32: equivalent" in text and "Equivalent within ±5%: keep 32" in text


def test_a_run_judged_on_loss_withdraws_the_ranked_by_rate_warning_for_the_knobs_it_judged():
    pooled = Advice(saturated={RX: 0.0013, BURST: 0.0021}, saturated_paced=True, warnings=["host unsteady"])
    pooled.warnings.append(pooled.saturation_warning())
    assert "no value of guest.nics.*.rx_queue_size (lowest median loss 0.13%), workload.burst" in pooled.warnings[1]
    course = {**_course(_state(RX, 256, 1024, "better", -0.4, -0.6, -0.2)), "metric": "loss_ratio"}
    advice = apply_until(pooled, course, {})
    assert advice.warnings[0] == "host unsteady"
    assert advice.warnings[1].startswith("no value of workload.burst (lowest median loss 0.21%) met the 0.1% loss")
    assert RX not in advice.warnings[1]
    both = {**course, "comparisons": course["comparisons"] + [_state(BURST, 32, 64, "open", 0.1, -0.1, 0.3)]}
    pooled.saturated = {RX: 0.0013, BURST: 0.0021}
    pooled.warnings = ["host unsteady", pooled.saturation_warning()]
    assert apply_until(pooled, both, {}).warnings == ["host unsteady"]
    # a run judged on a rate keeps it: its knobs were ranked by rate
    pooled.saturated = {RX: 0.0013}
    kept = pooled.saturation_warning()
    pooled.warnings = [kept]
    assert apply_until(pooled, _course(_state(RX, 256, 1024, "better", 3.0, 1.0, 5.0)), {}).warnings == [kept]
    assert kept.startswith("no value of guest.nics.*.rx_queue_size")
