"""One knob's values compared inside one run (labctl.analysis.within): the per-patch verdict on planted
builds (``slow`` 20% slower, ``same`` an A/A copy), family-wise over every pair, the environments per
candidate, values matched as recorded, bad options as one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from labctl.analysis import environments
from labctl.analysis.compare import VERDICTS, family_confidence
from labctl.analysis.comparison_text import render_comparison
from labctl.analysis.junit import junit_tree
from labctl.analysis.within import check_options, compare_within, compared_knobs, match_value
from labctl.errors import UserError
from labctl.results.record import Metrics, TrialRecord
from tests.factories import ENV as RX_ENV
from tests.factories import config, noisy
from tests.unit.analysis.builds_data import ENV, build_records

RUN = {"id": 7, "profile_name": "demo"}


def by_row(result) -> dict[tuple, str]:
    return {(item.candidate_value, item.knobs["workload.packet_size"]): item.verdict for item in result.items}


def test_the_slow_build_regresses_at_every_size_and_the_copy_never_moves():
    result = compare_within(build_records(0), "build", "base", run=RUN)
    rows = by_row(result)
    assert result.candidate_values == ["slow", "same"] and result.baseline_value == "base"
    assert rows[("slow", 64)] == rows[("slow", 256)] == "regression"
    assert rows[("same", 64)] not in ("regression", "progression")
    assert rows[("same", 256)] not in ("regression", "progression")
    assert result.exit_code == 1 and result.count("regression") == 2
    # family-wise over the 4 pairs judged (2 candidates x 2 sizes), as run-vs-run compare does
    assert result.confidence == pytest.approx(family_confidence(4))
    assert all(item.confidence == pytest.approx(family_confidence(4)) for item in result.items)
    slow = [i for i in result.items if i.candidate_value == "slow"]
    assert all(-25 < i.change_pct < -15 and i.ci_high_pct < -5 for i in slow)


def test_an_a_a_copy_is_never_judged_a_regression_or_progression_over_100_seeds():
    moved = 0
    for seed in range(100):
        result = compare_within(build_records(seed, factors={"base": 1.0, "same": 1.0}), "build", "base")
        moved += sum(item.verdict in ("regression", "progression") for item in result.items)
    assert moved == 0


def test_a_named_candidate_limits_the_comparison_and_a_lone_copy_exits_0():
    result = compare_within(build_records(1), "build", "base", ["same"], run=RUN)
    assert result.candidate_values == ["same"] and {i.candidate_value for i in result.items} == {"same"}
    assert result.exit_code == 0 and result.confidence == pytest.approx(family_confidence(2))


def test_json_carries_the_knob_its_values_and_each_rows_candidate():
    data = compare_within(build_records(0), "build", "base", run=RUN).to_dict()
    assert (data["by"], data["baseline_value"], data["candidate_values"]) == ("build", "base", ["slow", "same"])
    assert data["counts"] == {"regression": 2, **{v: data["counts"][v] for v in VERDICTS[1:]}}
    assert data["exit_code"] == 1 and data["baseline"]["id"] == data["candidate"]["id"] == 7
    assert data["baseline"]["host"] == "lab1" and data["env"]["accel"] == "tcg"
    row = data["verdicts"][0]
    assert {"candidate_value", "knobs", "verdict", "change", "baseline", "candidate", "cause"} <= set(row)
    assert row["knobs"] == {"workload.packet_size": 64} and "build" not in row["knobs"]


def test_junit_has_a_testcase_per_pair_and_a_failure_per_regression():
    root = junit_tree(compare_within(build_records(0), "build", "base", run=RUN)).getroot()
    assert root.get("tests") == "4" and root.get("failures") == "2"
    names = [case.get("name") for case in root.iter("testcase")]
    assert "packet_size=64 build=slow [mpps]" in names and len(set(names)) == 4
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert properties["by"] == "build" and properties["baseline_value"] == "base"
    assert ET.tostring(root).count(b"<failure") == 2


def test_the_text_names_the_run_the_knob_and_the_values():
    text = render_comparison(compare_within(build_records(0), "build", "base", run=RUN))
    assert text.startswith("run:        run 7 (demo, host lab1)\nbaseline:   build = base\ncandidates: build = slow, same")
    assert "packet_size=64 build=slow: regression: the whole 98.75% interval" in text and "-> exit 1" in text


def test_environment_differences_are_listed_per_candidate():
    envs = {"slow": ENV.model_copy(update={"dpdk": "23.11.2"})}
    result = compare_within(build_records(0, envs=envs), "build", "base", run=RUN)
    assert [c.format() for c in result.env_changes] == ["[build base -> slow] dpdk: 22.11.4 -> 23.11.2"]
    assert "[build base -> slow] dpdk: 22.11.4 -> 23.11.2" in render_comparison(result)


def test_a_dict_of_dicts_environment_field_is_diffed_per_entry(monkeypatch):
    """A field added later (the builds' binaries: role -> path, sha256, version) shows up by itself, and
    a dict of dicts names the entry that changed."""
    monkeypatch.setattr(environments, "ENV_FIELDS", ("dpdk", "binaries"))

    def rec(sha: str):
        binaries = {"forwarder": {"path": "/usr/bin/dpdk-testpmd", "sha256": sha}, "vswitch": {"sha256": "v"}}
        return SimpleNamespace(env=SimpleNamespace(dpdk="22.11.4", binaries=binaries))

    changes = environments.env_changes([rec("aa")], [rec("bb")], "build base -> slow")
    assert [c.field for c in changes] == ["binaries.forwarder"]
    # a binary reads as path@sha256 (its first 12 digits), then its version and build when recorded
    assert changes[0].before == ("/usr/bin/dpdk-testpmd@aa",) and changes[0].after == ("/usr/bin/dpdk-testpmd@bb",)


def test_a_binary_reads_as_path_at_hash_with_its_version_and_build():
    binary = {"path": "/opt/b/dpdk-testpmd", "sha256": "43737e12acf321135ab8", "version": "DPDK 22.11.11",
              "build": "rxfree128"}
    assert environments._shown(binary) == "/opt/b/dpdk-testpmd@43737e12acf3 (DPDK 22.11.11, rxfree128)"


def test_values_are_matched_as_recorded():
    assert match_value("256", [64, 256], "--baseline", "workload.packet_size", 1) == 256
    assert match_value(256, [64, 256], "--baseline", "workload.packet_size", 1) == 256
    assert match_value("10", [10.0, 20.0], "--baseline", "workload.duration_s", 1) == 10.0
    assert match_value("true", [False, True], "--baseline", "guest.hugepages", 1) is True
    assert match_value("base", ["base", "slow"], "--baseline", "build", 1) == "base"
    with pytest.raises(UserError, match=r"^--candidate 257: not a value of workload.packet_size in run 1 "
                                        r"\(allowed: 64, 256\)$"):
        match_value("257", [64, 256], "--candidate", "workload.packet_size", 1)


def test_a_nic_knob_is_compared_collapsed_across_every_nic():
    records = []
    for rx, values in noisy(5, {256: 10.0, 1024: 8.0}, 0.03, 6).items():
        for i, value in enumerate(values):
            cfg = {**config(rx), "guest.nics.1.rx_queue_size": rx, "guest.nics.1.queues": 1}
            records.append(TrialRecord(id=len(records) + 1, run_id=1, config=cfg, env=RX_ENV,
                                       metrics=Metrics(mpps=value), repeat_index=i))
    assert compared_knobs(records) == ["guest.nics.*.rx_queue_size"]
    result = compare_within(records, "guest.nics.*.rx_queue_size", "256")
    (item,) = result.items
    assert item.candidate_value == 1024 and item.verdict == "regression" and item.label == "rx_queue_size=1024"


def test_an_alias_names_the_metric():
    records = build_records(0, metric="ndr_mpps")
    result = compare_within(records, "build", "base", ["slow"], metric="ndr")
    assert result.metric == "ndr_mpps" and result.count("regression") == 2


@pytest.mark.parametrize("by, baseline, candidates, metric, words", [
    ("workload.burst", "base", [], None, "--by workload.burst: not a knob run 7 varied (allowed: "
                                         "workload.packet_size, build)"),
    ("build", "patched", [], None, "--baseline patched: not a value of build in run 7 (allowed: base, slow, same)"),
    ("build", "base", ["fast"], None, "--candidate fast: not a value of build in run 7 (allowed: base, slow, same)"),
    ("build", "base", ["base"], None, "--candidate base: the baseline value itself (allowed: slow, same)"),
    ("build", "base", [], "ndr", "--metric ndr: not measured in run 7 (allowed: mpps)"),
])
def test_bad_input_is_one_line_naming_the_allowed_values(by, baseline, candidates, metric, words):
    with pytest.raises(UserError) as error:
        compare_within(build_records(0), by, baseline, candidates, metric, run=RUN)
    assert str(error.value) == words


@pytest.mark.parametrize("args, words", [
    (dict(run=3, by=None, baseline="1", candidate=None, baseline_db=None), "--run 3: compares inside one run only"),
    (dict(run=None, by=None, baseline="1", candidate=["2", "3"], baseline_db=None), "--candidate 2 3: one run"),
    (dict(run=None, by="build", baseline="base", candidate=None, baseline_db="b.db"), "--baseline-db b.db: not with --by"),
    (dict(run=None, by="build", baseline=None, candidate=None, baseline_db=None), "--baseline: required with --by build"),
])
def test_options_that_do_not_go_together(args, words):
    with pytest.raises(UserError, match="^" + words):
        check_options(**args)
    assert check_options(None, "build", "base", "slow", None) == ["slow"]
    assert check_options(None, None, "1", None, None) == []


def test_values_that_never_share_a_configuration_are_refused():
    """base only at 64B, slow only at 256B: nothing pairs, and a job must not pass on "cannot tell"."""
    kept = {("base", 64), ("slow", 256)}
    records = [r for r in build_records(0) if (r.config["build"], r.config["workload.packet_size"]) in kept]
    with pytest.raises(UserError, match=r"^--baseline base: no configuration of the other knobs in run 7 has "
                                        r"trials of both build=base and slow"):
        compare_within(records, "build", "base", run=RUN)
