"""Trend change detection: jumpavg groups a stored series with a planted step and marks it, and marks nothing
on flat series with this host's own spread (trial noise resampled from the stored embedded-lab trials)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from labctl import api
from labctl.analysis.changes import group_runs
from labctl.results.record import Environment
from tests.datasets import host_residuals, trend_series
from tests.factories import trend_store

RESIDUALS = host_residuals()


def test_the_noise_is_this_hosts_spread():
    import statistics

    assert len(RESIDUALS) >= 150 and 0.12 < statistics.pstdev(RESIDUALS) < 0.25


def test_flat_series_with_the_hosts_spread_are_rarely_marked():
    marked = [seed for seed in range(40) if group_runs(trend_series(seed, residuals=RESIDUALS)).marks]
    assert len(marked) <= 2, marked  # benchmarks/trend_marks.py: none of 300
    assert group_runs(trend_series(0, residuals=RESIDUALS)).marks == []


def test_a_planted_halving_is_marked_at_its_run_and_nowhere_else():
    exact = 0
    for seed in range(40):
        grouping = group_runs(trend_series(seed, step_at=6, factor=0.5, residuals=RESIDUALS))
        marks = [(m.index, m.previous, m.kind) for m in grouping.marks]
        exact += marks == [(6, 5, "regression")]
    assert exact >= 38  # benchmarks/trend_marks.py: all of 300
    grouping = group_runs(trend_series(0, step_at=6, factor=0.5, residuals=RESIDUALS))
    (mark,) = grouping.marks
    assert -60 < mark.change_pct < -40 and grouping.group_of == [0] * 6 + [1] * 4


def test_lower_is_better_swaps_the_names_and_runs_without_values_have_no_group():
    runs = [[10.0, 10.1, 9.9]] * 4 + [[]] + [[20.0, 20.2, 19.8]] * 4
    grouping = group_runs(runs, lower_is_better=True)
    assert [m.kind for m in grouping.marks] == ["regression"] and grouping.marks[0].index == 5
    assert grouping.group_of[4] is None and grouping.marks[0].previous == 3
    assert group_runs([[0.0, 0.0]] * 5).marks == []  # no loss ever: one group
    assert group_runs([]).groups == []


def _store(tmp_path, step: bool):
    return trend_store(tmp_path / "t.db", step, RESIDUALS)


def test_a_stored_series_with_a_step_is_marked_with_its_runs_and_what_changed(tmp_path, cli):
    db = _store(tmp_path, step=True)
    trend = api.trend(db, "demo")
    marked = {s.knobs["guest.nics.*.rx_queue_size"]: s for s in trend.series}
    (mark,) = marked[256].marks
    assert (mark.kind, mark.run_id, mark.previous_run_id) == ("regression", 7, 6)
    assert mark.beyond_threshold and -60 < mark.change_pct < -40
    assert [c.field for c in mark.env_changes] == ["binaries.forwarder"]
    assert "commit" not in mark.env_changes[0].after[0] and "bbbbbbbbbbbb" in mark.env_changes[0].after[0]
    assert marked[1024].marks == [] and len(marked[1024].groups) == 1
    assert [row.group for row in marked[256].rows] == [0] * 6 + [1] * 4
    junit, html = tmp_path / "trend.xml", tmp_path / "trend.html"
    code, out, err = cli("trend", "demo", "--db", str(db), "--junit", str(junit), "--html", str(html))
    assert code == 1, err  # the newest group of rx 256 is a regression beyond 5%
    assert "regression at run 7 (after run 6)" in out and "binaries.forwarder" in out
    assert "no change marked: one group over 10 runs" in out
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "1" and suite.get("tests") == "2"
    failure = suite.find(".//testcase/failure")
    assert failure is not None and "run 7" in failure.get("message")
    page = html.read_text()
    assert "<svg" in page and "regression" in page and "Content-Security-Policy" in page and "<script" not in page
    code, out, _ = cli("trend", "demo", "--db", str(db), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["marks_total"] == 1 and doc["failures"][0]["run_id"] == 7
    # the same marks under the run's page in the TUI: the profile's marks, the shown run's flagged
    assert api.trend_marks(db, 7)[0].endswith("at run 7 (after run 6) <- this run")
    assert api.trend_marks(db, 3)[0].startswith("trend mpps rx_queue_size=256: regression -")


def test_a_flat_stored_series_passes_and_marks_nothing(tmp_path, cli):
    db = _store(tmp_path, step=False)
    code, out, err = cli("trend", "demo", "--db", str(db), "--junit", str(tmp_path / "t.xml"))
    assert code == 0, (out, err)
    assert out.count("no change marked: one group over 10 runs") == 2
    assert ET.parse(tmp_path / "t.xml").getroot().get("failures") == "0"
    assert api.trend_marks(db, 10) == []


@pytest.mark.parametrize("args, message", [
    (["nope"], "--trend nope: no trials of that profile (allowed: demo)"),
    (["demo", "--threshold", "120"], "--threshold 120"),
    (["demo", "--html", "out.txt"], "--html out.txt: the page is written as HTML"),
])
def test_bad_trend_input_is_one_line_and_exit_2(tmp_path, cli, args, message):
    db = _store(tmp_path, step=False)
    code, out, err = cli("trend", *args, "--db", str(db))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (out, err)


def test_an_env_field_change_names_the_commit_of_a_recipe_build():
    from labctl.analysis.environments import env_changes
    from labctl.results.record import TrialRecord

    def record(commit: str) -> TrialRecord:
        binary = {"path": "/c/out/fwd", "sha256": commit * 64, "version": "DPDK 22.11.11", "build": "mine",
                  "recipe": "dpdk", "commit": commit * 40}
        return TrialRecord(config={}, env=Environment(binaries={"forwarder": binary}))

    (change,) = env_changes([record("a")], [record("b")])
    assert change.after == (f"/c/out/fwd@{'b' * 12} (DPDK 22.11.11, mine, commit {'b' * 12})",)


def test_imported_runs_join_their_series_and_are_grouped_with_it(tmp_path, cli):
    """A CI job's runs exported as JSONL and imported (``labctl import``: runs named ci-N, status imported)
    join the series of the six runs measured here; the halving they bring is marked at the first of them."""
    from labctl.results.interchange import export_jsonl, import_files
    from labctl.results.store import Store

    local = trend_store(tmp_path / "t.db", True, RESIDUALS, runs=range(6))
    ci = trend_store(tmp_path / "ci.db", True, RESIDUALS)
    files = [(tmp_path / f"ci-{run_id}.jsonl", f"ci-{run_id}") for run_id in range(7, 11)]
    with Store(ci) as store:
        for path, name in files:  # the CI job's runs after the forwarder's change: half the rate at rx 256
            export_jsonl(store, path, int(name[3:]))
    assert [run_id for run_id, _count in import_files(files, local)] == [7, 8, 9, 10]
    with Store(local) as store:
        assert (store.run(7)["profile_name"], store.run(7)["status"]) == ("ci-7", "imported")
    marked = {s.knobs["guest.nics.*.rx_queue_size"]: s for s in api.trend(local, "demo").series}
    assert [row.run_id for row in marked[256].rows] == list(range(1, 11))
    (mark,) = marked[256].marks
    assert (mark.kind, mark.run_id, mark.previous_run_id) == ("regression", 7, 6) and mark.beyond_threshold
    assert [c.field for c in mark.env_changes] == ["binaries.forwarder"]
    assert marked[1024].marks == [] and len(marked[1024].rows) == 10
    code, out, _ = cli("trend", "demo", "--db", str(local))
    assert code == 1 and "regression at run 7 (after run 6)" in out
