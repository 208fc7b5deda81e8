"""Regression verdicts on planted data: which configuration regressed, and when the data cannot tell."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from labctl.analysis.compare import (
    VERDICTS, check_measured, compare_runs, family_confidence, judge, lower_is_better, parse_threshold,
    repeats_needed,
)
from labctl.analysis.comparison_text import render_comparison
from labctl.analysis.junit import junit_tree, write_junit
from labctl.analysis.statistics import compare
from labctl.errors import UserError
from labctl.results.record import Environment
from tests.factories import ENV, noisy, run_records

RINGS = (256, 512, 1024)
FLAT = {rx: 10.0 for rx in RINGS}
SLOWER = {256: 10.0, 512: 8.8, 1024: 10.0}  # rx 512: 12% slower


def verdicts(comparison) -> dict[int, str]:
    return {item.knobs["guest.nics.*.rx_queue_size"]: item.verdict for item in comparison.items}


def test_one_configuration_12_percent_slower_is_the_one_regression():
    base = run_records(1, noisy(1, FLAT, 0.03, 8))
    cand = run_records(2, noisy(2, SLOWER, 0.03, 8), first_id=100)
    result = compare_runs(base, cand, baseline_run={"id": 1}, candidate_run={"id": 2})
    assert [item.knobs["guest.nics.*.rx_queue_size"] for item in result.regressions] == [512]
    assert result.exit_code == 1 and result.count("regression") == 1
    (item,) = result.regressions
    assert item.ci_high_pct < -5.0 and -16 < item.change_pct < -8
    assert item.confidence == pytest.approx(family_confidence(3))
    assert all(v != "regression" for rx, v in verdicts(result).items() if rx != 512)
    text = render_comparison(result)
    assert "rx_queue_size=512: regression: the whole 98.33% interval" in text and "-> exit 1" in text


def test_a_remeasurement_without_change_gives_no_regression():
    result = compare_runs(run_records(1, noisy(3, FLAT, 0.03, 8)), run_records(2, noisy(4, FLAT, 0.03, 8)))
    assert result.exit_code == 0 and not result.regressions
    assert set(verdicts(result).values()) <= {"no change", "cannot tell"}


@pytest.mark.parametrize("n, cv", [(3, 0.03), (5, 0.03), (8, 0.03), (5, 0.30)])
def test_false_regressions_over_200_seeds_of_noise(n, cv):
    """Re-measurements with no change, 3 configurations each: a false regression in at most 5% of them
    (measured: none at cv 3%; 3 of 200 at cv 30%, this host's scatter, with 5 a side)."""
    failed = 0
    for seed in range(200):
        base = run_records(1, noisy(2 * seed, FLAT, cv, n))
        cand = run_records(2, noisy(2 * seed + 1, FLAT, cv, n))
        failed += compare_runs(base, cand).exit_code
    assert failed / 200 <= 0.05
    if cv <= 0.03:
        assert failed == 0


def test_three_repeats_never_give_a_verdict_of_direction():
    """3 vs 3 trials that do not overlap still happen with p = 5% a side: beyond any family confidence."""
    base = run_records(1, {256: [10.0, 10.1, 9.9]})
    cand = run_records(2, {256: [5.0, 5.1, 4.9]}, first_id=10)
    (item,) = compare_runs(base, cand).items
    assert item.verdict == "cannot tell" and item.cause == "few-repeats"
    assert "worse beyond -5%" in item.reason and "p=5.00%" in item.reason and "repeat 4 times" in item.reason
    assert repeats_needed(family_confidence(1)) == 4 and repeats_needed(family_confidence(4)) == 5
    # with 5 a side the same halving is a regression
    base = run_records(1, {256: [10.0, 10.1, 9.9, 10.05, 9.95]})
    cand = run_records(2, {256: [5.0, 5.1, 4.9, 5.05, 4.95]}, first_id=10)
    assert compare_runs(base, cand).items[0].verdict == "regression"


def test_too_few_repeats_and_two_bands_are_cannot_tell_never_a_verdict():
    base = run_records(1, {256: [10.0, 10.1], 512: [8.6, 9.1, 9.0, 15.3, 16.0, 16.8], 1024: [10.0] * 6})
    cand = run_records(2, {256: [5.0, 5.1], 512: [8.0, 8.2, 8.1, 8.3, 8.0, 8.2], 1024: [9.0, 9.1, 8.6, 15.0, 16.1, 16.0]},
                       first_id=100)
    result = compare_runs(base, cand)
    by_rx = {item.knobs["guest.nics.*.rx_queue_size"]: item for item in result.items}
    assert by_rx[256].verdict == "cannot tell" and by_rx[256].cause == "few-repeats"
    assert "fewer than 3 trials" in by_rx[256].reason
    for rx, side in ((512, "baseline"), (1024, "candidate")):
        assert by_rx[rx].verdict == "cannot tell" and by_rx[rx].cause == "two-band"
        assert f"{side} two bands" in by_rx[rx].reason
    assert result.exit_code == 0


def test_a_two_band_side_wholly_beyond_the_threshold_is_judged_by_its_range():
    """Two bands in the candidate (0.6-0.62 and 1.1-1.2, a shared host's scatter) against a baseline ten
    times higher: no mix of the bands brings the median within 5%, so it is a regression; two bands that
    reach into the baseline's range stay "cannot tell"; and 4 vs 4 stays short of the confidence."""
    cand_values = [0.6, 0.62, 0.61, 1.1, 1.2, 1.15]
    base = run_records(1, {256: [10.0, 10.1, 9.9, 10.05, 9.95, 10.0], 512: [1.0, 1.02, 0.99, 1.01, 1.0, 0.98]})
    cand = run_records(2, {256: cand_values, 512: cand_values}, first_id=100)
    result = compare_runs(base, cand)
    by_rx = {item.knobs["guest.nics.*.rx_queue_size"]: item for item in result.items}
    assert by_rx[256].verdict == "regression" and "candidate two bands" in by_rx[256].reason
    assert "every candidate trial lies beyond -5% of every baseline trial" in by_rx[256].reason
    assert "[-94.1%, -87.9%]" in by_rx[256].reason
    assert by_rx[512].verdict == "cannot tell" and by_rx[512].cause == "two-band"
    assert result.exit_code == 1
    # the same ranges read the other way round are a progression
    flipped = compare_runs(run_records(1, {256: cand_values}), run_records(2, {256: [10.0, 10.1, 9.9, 10.05, 9.95, 10.0]}, first_id=100))
    assert flipped.items[0].verdict == "progression" and flipped.exit_code == 0
    # 4 vs 4 with 2 configurations compared: no overlap by chance is 1/C(8,4) = 1.4%, above the 1.25% tail
    four = [0.6, 0.61, 1.1, 1.2]
    few = compare_runs(run_records(1, {256: [10.0, 10.1, 9.9, 10.0], 512: [10.0, 10.1, 9.9, 10.0]}),
                       run_records(2, {256: four, 512: four}, first_id=100))
    assert {(i.verdict, i.cause) for i in few.items} == {("cannot tell", "two-band")}


@pytest.mark.parametrize("field, value, word", [("accel", "kvm", "accelerator"), ("host", "lab2", "host"),
                                                ("lab", "libvirt", "lab")])
def test_another_host_accelerator_or_lab_is_cannot_tell_with_the_reason(field, value, word):
    base = run_records(1, noisy(5, FLAT, 0.01, 6))
    cand = run_records(2, noisy(6, SLOWER, 0.01, 6), env=ENV.model_copy(update={field: value}), first_id=100)
    result = compare_runs(base, cand)
    assert result.exit_code == 0 and {i.verdict for i in result.items} == {"cannot tell"}
    old = getattr(ENV, field)
    assert all(i.cause == "environment" and f"different {word}: {old} vs {value}" in i.reason for i in result.items)
    assert [c.field for c in result.env_changes] == [field]


def test_the_environment_changes_are_listed_above_the_verdicts():
    base = run_records(1, noisy(7, FLAT, 0.02, 5), env=ENV.model_copy(update={"qemu": "7.2.22", "dpdk": "22.11.11"}))
    new_env = ENV.model_copy(update={"qemu": "8.0.5", "dpdk": "23.11.2", "pins": {"vswitch": "0"}})
    result = compare_runs(base, run_records(2, noisy(8, FLAT, 0.02, 5), env=new_env, first_id=100))
    assert [(c.field, c.before, c.after) for c in result.env_changes] == [
        ("qemu", ("7.2.22",), ("8.0.5",)), ("dpdk", ("22.11.11",), ("23.11.2",)),
        ("pins", ("{vswitch=1}",), ("{vswitch=0}",))]
    text = render_comparison(result)
    assert text.index("qemu: 7.2.22 -> 8.0.5") < text.index("configuration") < text.index("verdict:")


def test_loss_and_latency_are_judged_in_their_own_direction():
    assert lower_is_better("loss_ratio") and lower_is_better("latency_p99_us") and lower_is_better("tx_dropped")
    assert not lower_is_better("mpps") and not lower_is_better("gbps")
    base = run_records(1, {256: [0.10, 0.101, 0.099, 0.1005, 0.0995]}, metric="loss_ratio")
    more = run_records(2, {256: [0.13, 0.131, 0.129, 0.1305, 0.1295]}, metric="loss_ratio", first_id=10)
    less = run_records(3, {256: [0.07, 0.071, 0.069, 0.0705, 0.0695]}, metric="loss_ratio", first_id=20)
    assert compare_runs(base, more, "loss_ratio").items[0].verdict == "regression"
    assert compare_runs(base, less, "loss_ratio").items[0].verdict == "progression"
    assert "beyond +5%" in render_comparison(compare_runs(base, more, "loss_ratio"))


def test_no_change_needs_the_whole_interval_inside_the_threshold():
    tight = compare_runs(run_records(1, {256: [10.0, 10.02, 9.98, 10.01, 9.99]}),
                         run_records(2, {256: [10.1, 10.12, 10.08, 10.11, 10.09]}, first_id=10))
    assert tight.items[0].verdict == "no change" and "within ±5%" in tight.items[0].reason
    wide = compare_runs(run_records(1, {256: [10.0, 6.0, 12.0, 8.0, 11.0]}),
                        run_records(2, {256: [9.0, 12.5, 6.5, 10.0, 7.5]}, first_id=10))
    assert wide.items[0].verdict == "cannot tell" and wide.items[0].cause == "noisy"
    assert any("too noisy" in note for note in wide.notes)


def test_the_threshold_decides_what_counts():
    base = run_records(1, {256: [10.0, 10.02, 9.98, 10.01, 9.99]})
    cand = run_records(2, {256: [9.7, 9.72, 9.68, 9.71, 9.69]}, first_id=10)  # -3%, tight
    assert compare_runs(base, cand, threshold_pct=5.0).items[0].verdict == "no change"
    assert compare_runs(base, cand, threshold_pct=1.0).items[0].verdict == "regression"


def test_configurations_in_one_run_only_and_failed_trials():
    base = run_records(1, {256: [10.0] * 3, 512: [10.0] * 3})
    cand = run_records(2, {256: [10.0] * 3, 1024: [10.0] * 3}, first_id=100)
    for record in cand[:3]:
        record.status, record.metrics.mpps = "failed", None
    result = compare_runs(base, cand)
    by_rx = {item.knobs["guest.nics.*.rx_queue_size"]: item for item in result.items}
    assert by_rx[256].cause == "no-trials" and "candidate has no successful trial" in by_rx[256].reason
    assert "3 candidate trials failed" in by_rx[256].notes
    assert by_rx[512].reason == "not in the candidate run" and by_rx[1024].reason == "not in the baseline run"
    assert {item.verdict for item in result.items} == {"cannot tell"}


def test_nothing_pairs_names_the_knobs_that_differ():
    base = run_records(1, {256: [10.0] * 3})
    cand = run_records(2, {256: [10.0] * 3}, first_id=10)
    for record in cand:
        record.config["workload.duration_s"] = 20.0
    result = compare_runs(base, cand)
    assert any("workload.duration_s (10.0 vs 20.0)" in note for note in result.notes)


def test_judge_rules_directly():
    delta = compare([10.0, 10.1, 9.9, 10.05, 9.95], [8.0, 8.1, 7.9, 8.05, 7.95], confidence=0.95)
    assert judge(delta, 5.0, False).verdict == "regression"
    assert judge(delta, 5.0, True).verdict == "progression"  # the same numbers, read as loss
    assert judge(delta, 30.0, False).verdict == "no change"  # -20% is inside a 30% threshold
    assert delta.ci_low_pct < -20.0 < delta.ci_high_pct < 0
    assert judge(delta, 20.0, False).cause == "undecided"  # worse, but maybe by less than 20%
    assert set(VERDICTS) == {"regression", "progression", "no change", "cannot tell"}


def test_junit_has_one_failure_per_regression_and_skips_what_cannot_tell(tmp_path):
    base = run_records(1, {**noisy(1, FLAT, 0.03, 8), 2048: [10.0, 10.1]})
    cand = run_records(2, {**noisy(2, SLOWER, 0.03, 8), 2048: [9.0, 9.1]}, first_id=100,
                       env=ENV.model_copy(update={"dpdk": "23.11.2 <rc&1>"}))
    result = compare_runs(base, cand, baseline_run={"id": 1, "profile_name": "demo"}, candidate_run={"id": 2})
    path = write_junit(result, tmp_path / "compare.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites" and root.get("failures") == "1"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == len(result.items) == 4
    failures = [c for c in cases if c.find("failure") is not None]
    assert len(failures) == len(result.regressions) == 1
    failure = failures[0].find("failure")
    assert failures[0].get("name") == "rx_queue_size=512 [mpps]" and failures[0].get("classname") == "labctl.compare.demo"
    assert "regression beyond the 5% threshold" in failure.get("message") and "mpps 10." in failure.text
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert len(skipped) == result.count("cannot tell") == int(suite.get("skipped")) >= 1
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["env.dpdk"] == "unknown -> 23.11.2 <rc&1>" and props["baseline_run"] == "1"
    assert ET.tostring(junit_tree(result).getroot()).count(b"<failure") == 1


def test_measured_metrics_name_what_a_run_has():
    from labctl.analysis.compare import measured_metrics

    records = run_records(1, {256: [10.0]})
    assert measured_metrics(records) == ["mpps"]
    records[0].metrics.window_s = 5.0
    assert measured_metrics(records) == ["mpps"]  # a setting, not an outcome
    assert Environment().host is None


def ndr_run(run_id: int, ndr: list[float], first_id: int) -> list:
    """An NDR run: per search, 6 single measurements (role search/latency) at loads the search picked,
    with their mpps, then the search's record (role ndr) with ndr_mpps and pdr_mpps."""
    out = []
    for i, value in enumerate(ndr):
        for j, load in enumerate((1.0, 8.0, 4.0, 2.0, 3.0, 0.5)):
            (rec,) = run_records(run_id, {256: [load]}, first_id=first_id + len(out))
            rec.details["role"] = "latency" if j == 5 else "search"
            out.append(rec)
        (rec,) = run_records(run_id, {256: [value]}, metric="ndr_mpps", first_id=first_id + len(out))
        rec.metrics.pdr_mpps = 2 * value
        rec.details["role"] = "ndr"
        out.append(rec)
    return out


def test_ndr_and_pdr_compare_the_searches_records_not_their_measurements():
    base = ndr_run(1, [2.0, 2.02, 1.98, 2.01, 1.99], 1)
    cand = ndr_run(2, [1.6, 1.62, 1.58, 1.61, 1.59], 1000)  # NDR 20% lower
    result = compare_runs(base, cand, "ndr")
    (item,) = result.items
    assert result.metric == "ndr_mpps" and item.verdict == "regression"
    assert item.baseline.n == 5 and item.candidate.n == 5  # the 30 search measurements are not pooled
    assert compare_runs(base, cand, "pdr").items[0].verdict == "regression"
    with pytest.raises(UserError, match=r"--metric mpps: not measured in runs 1 and 2 \(allowed: ndr_mpps, pdr_mpps, "
                                        r"ndr \(= ndr_mpps\), pdr \(= pdr_mpps\)\)"):
        check_measured("mpps", [base, cand], "runs 1 and 2")
    with pytest.raises(UserError, match=r"--metric nrd: not a metric of labctl's trials \(allowed in runs 1 and 2: "):
        check_measured("nrd", [base, cand], "runs 1 and 2")
    check_measured("ndr", [base, cand], "runs 1 and 2")  # the alias passes


def test_the_search_roles_are_the_apis():
    from labctl import api
    from labctl.analysis.compare import SEARCH_ROLES

    assert SEARCH_ROLES == api.SEARCH_ROLES


def test_busy_strangers_are_noted_per_configuration_and_overall():
    base = run_records(1, noisy(11, FLAT, 0.02, 5))
    cand = run_records(2, {rx: [v * 0.5 for v in vals] for rx, vals in noisy(12, FLAT, 0.02, 5).items()}, first_id=100)
    for record in cand:
        record.details["busy_strangers"] = [{"during": "window", "pid": 4995, "name": "python3", "cpu_pct": 49.0,
                                             "affinity": "1"}]
    result = compare_runs(base, cand)
    assert result.count("regression") == 3
    assert all("candidate: busy strangers in 5/5 trials" in item.notes for item in result.items)
    assert not any("baseline: busy" in note for item in result.items for note in item.notes)
    (note,) = [n for n in result.notes if "busy" in n]
    assert note.startswith("15 of the candidate's 15 trials ran with processes that are not labctl's busy")
    assert "(python3 4995)" in note


def test_the_runs_are_shown_with_the_host_their_trials_recorded():
    base = run_records(1, {256: [10.0] * 3})
    cand = run_records(2, {256: [10.0] * 3}, env=ENV.model_copy(update={"host": None}), first_id=10)
    result = compare_runs(base, cand, baseline_run={"id": 1, "host": "controller"},
                          candidate_run={"id": 2, "host": "controller"})
    assert result.baseline["host"] == "lab1"  # the trials' env.host (a CI job's inventory name)
    assert result.candidate["host"] == "controller"  # no host recorded: the run's own
    assert render_comparison(result).startswith("baseline:  run 1 (host lab1)")


def test_thresholds_given_as_text():
    assert parse_threshold("7.5") == 7.5 and parse_threshold("3%") == 3.0 and parse_threshold(None) is None
    with pytest.raises(UserError, match=r"^--threshold five: not a number \(allowed: 0 <= PCT < 100"):
        parse_threshold("five")


def test_every_metric_is_judged_by_one_direction_rule():
    """Reports, pivots and comparisons read one rule: lost frames, retransmits and CPU spent per KB are
    worse higher; bandwidth, transactions and rates better higher."""
    from labctl.analysis import pivot
    from labctl.api import report_metrics

    worse_higher = {"lost", "reordered", "duplicate", "retransmits", "service_demand_host_us_per_kb",
                    "service_demand_guest_us_per_tx", "host_cpu_cores", "rr_latency_us", "vswitch_cycles_per_packet"}
    better_higher = {"mpps", "ndr_mpps", "pdr_mpps", "bandwidth_gbps", "transactions_per_s", "rx_packets"}
    assert worse_higher | better_higher <= set(report_metrics())
    assert all(lower_is_better(m) for m in worse_higher)
    assert not any(lower_is_better(m) for m in better_higher)
    assert pivot.lower_is_better is lower_is_better
