"""The CI job's regression step through the CLI, as playbooks/roles/labctl/tasks/ci.yml runs it: the
baseline's trials exported as JSON lines, imported into a fresh store, the job's sweep compared with it
(`--baseline-db`, both runs their store's newest), exit 1 only on a regression, the JUnit file kept."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labctl.results.record import TrialRecord
from labctl.results.store import Store
from tests.factories import ENV, noisy, run_records

FLAT = {256: 10.0, 512: 10.0, 1024: 10.0}
SLOWER = {256: 10.0, 512: 8.8, 1024: 10.0}  # rx 512: 12% slower
MUCH_SLOWER = {256: 10.0, 512: 7.0, 1024: 10.0}  # rx 512: 30% slower
CI_ENV = ENV.model_copy(update={"host": "local"})


def store_with(db: Path, records: list[TrialRecord], name: str = "demo") -> int:
    with Store(db) as store:
        run_id = store.create_run(name, {}, [], host="controller", status="finished")
        for record in records:
            store.add_trial(record.model_copy(update={"run_id": run_id, "id": None}))
    return run_id


def ci_compare(cli, tmp_path: Path, job: dict[int, list[float]]) -> tuple[int, str, ET.Element]:
    """The job's steps: export the accepted baseline, import it afresh, compare the job's run with it."""
    accepted = tmp_path / "accepted.db"
    store_with(accepted, run_records(0, noisy(1, FLAT, 0.03, 8), env=CI_ENV))
    baseline_jsonl = tmp_path / "baseline.jsonl"
    code, _, err = cli("export", "--db", str(accepted), "--format", "jsonl", "--out", str(baseline_jsonl))
    assert code == 0, err
    baseline_db = tmp_path / "baseline.db"
    code, out, err = cli("import", str(baseline_jsonl), "--db", str(baseline_db), "--name", "baseline")
    assert code == 0 and "imported 24 trials as run 1" in out, err
    job_db = tmp_path / "labctl.db"
    store_with(job_db, run_records(0, job, env=CI_ENV))
    junit = tmp_path / "compare.xml"
    code, out, err = cli("compare", "--db", str(job_db), "--baseline-db", str(baseline_db), "--metric", "mpps",
                         "--threshold", "5", "--junit", str(junit))
    assert code in (0, 1), err
    return code, out, ET.parse(junit).getroot()


def test_the_ci_step_fails_on_the_one_configuration_that_regressed(cli, tmp_path):
    code, out, root = ci_compare(cli, tmp_path, noisy(2, SLOWER, 0.03, 8))
    assert code == 1 and "verdict: 1 regression," in out
    assert out.startswith("baseline:  run 1 (baseline, host local,")  # the trials' host, not the controller's
    failures = root.findall("./testsuite/testcase/failure")
    assert len(failures) == 1 and root.get("failures") == "1"
    (case,) = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert case.get("name") == "rx_queue_size=512 [mpps]"


def test_the_ci_step_passes_a_remeasurement(cli, tmp_path):
    code, out, root = ci_compare(cli, tmp_path, noisy(3, FLAT, 0.03, 8))
    assert code == 0 and "verdict: 0 regressions," in out
    assert root.get("failures") == "0" and len(root.findall("./testsuite/testcase")) == 3


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    db = tmp_path / "labctl.db"
    store_with(db, run_records(0, noisy(4, FLAT, 0.03, 5)))
    store_with(db, run_records(0, noisy(5, FLAT, 0.03, 5)))
    return db


@pytest.mark.parametrize("args, line", [
    (["--baseline", "abc"],
     "--baseline abc: no run of that name in {db} (allowed: a run id, 1, 2; or a run name, newest first: demo)"),
    (["--baseline", "1", "--candidate", "2x"],
     "--candidate 2x: no run of that name in {db} (allowed: a run id, 1, 2; or a run name, newest first: demo)"),
    (["--baseline", "1", "--threshold", "five"],
     "--threshold five: not a number (allowed: 0 <= PCT < 100, per cent of the baseline median)"),
    (["--baseline", "1", "--metric", "nrd"], "--metric nrd: not a metric of labctl's trials (allowed in runs 1 and 2: mpps)"),
])
def test_bad_text_is_one_line_naming_the_field_and_the_allowed_values(cli, two_runs, args, line):
    code, out, err = cli("compare", "--db", str(two_runs), *args)
    assert (code, out, err.strip()) == (2, "", line.format(db=two_runs))


# --- a baseline named by its run's name (playbooks/ci.yml's labctl_baseline_run) -----------------------


@pytest.fixture
def baselines(tmp_path: Path) -> Path:
    """A store of accepted baselines: 'accepted' twice (the newer one, run 3, at 7 Mpps for rx 512:
    accepted later, after a slowdown), 'other' once, on the CI job's host."""
    db = tmp_path / "baselines.db"
    store_with(db, run_records(0, noisy(11, FLAT, 0.03, 8), env=CI_ENV), name="accepted")
    store_with(db, run_records(0, noisy(12, FLAT, 0.03, 8), env=CI_ENV), name="other")
    store_with(db, run_records(0, noisy(13, MUCH_SLOWER, 0.03, 8), env=CI_ENV), name="accepted")
    return db


def test_a_named_baseline_is_the_newest_run_of_that_name(cli, tmp_path, baselines):
    job = tmp_path / "labctl.db"
    store_with(job, run_records(0, noisy(14, MUCH_SLOWER, 0.03, 8), env=CI_ENV), name="demo")
    code, out, err = cli("compare", "--db", str(job), "--baseline-db", str(baselines), "--baseline", "accepted",
                         "--json")
    data = json.loads(out)
    assert code == 0, err
    assert data["baseline"]["id"] == 3 and data["baseline"]["profile_name"] == "accepted"
    assert data["counts"]["regression"] == 0  # run 1 (before the slowdown) would have failed rx 512
    code, out, _ = cli("compare", "--db", str(job), "--baseline-db", str(baselines), "--baseline", "1")
    assert code == 1 and out.startswith("baseline:  run 1 (accepted, host local,")


def test_in_one_store_a_name_skips_the_candidate(cli, tmp_path):
    db = tmp_path / "labctl.db"
    store_with(db, run_records(0, noisy(15, FLAT, 0.03, 8)), name="nightly")
    store_with(db, run_records(0, noisy(16, MUCH_SLOWER, 0.03, 8)), name="nightly")  # the candidate: newest
    code, out, _ = cli("compare", "--db", str(db), "--baseline", "nightly", "--json")
    data = json.loads(out)
    assert code == 1 and (data["baseline"]["id"], data["candidate"]["id"]) == (1, 2)
    code, out, err = cli("compare", "--db", str(db), "--baseline", "nightly", "--candidate", "1")
    assert code == 0 and "baseline:  run 2 (nightly" in out, err

    lone = tmp_path / "lone.db"
    store_with(lone, run_records(0, noisy(17, FLAT, 0.03, 8)), name="once")
    store_with(lone, run_records(0, noisy(18, FLAT, 0.03, 8)), name="twice")
    code, out, err = cli("compare", "--db", str(lone), "--baseline", "twice")
    assert (code, out) == (2, "") and err.strip() == (
        f"--baseline twice: only the candidate run 2 has that name in {lone} "
        "(allowed: a run id, 1, 2; or a run name, newest first: twice, once)")


@pytest.mark.parametrize("args, words", [
    (["--baseline", "nope"], "--baseline nope: no run of that name in {base} (allowed: a run id, 1..3; or a run "
                             "name, newest first: accepted, other)"),
    (["--baseline", "9"], "--baseline 9: no such run in {base} (allowed: 1..3)"),
    (["--baseline", " "], "--baseline  : empty in {base} (allowed: a run id, 1..3;"),
])
def test_an_unknown_baseline_name_is_one_line_and_exit_2(cli, tmp_path, baselines, args, words):
    job = tmp_path / "labctl.db"
    store_with(job, run_records(0, noisy(19, FLAT, 0.03, 8), env=CI_ENV))
    code, out, err = cli("compare", "--db", str(job), "--baseline-db", str(baselines), *args)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert err.strip().startswith(words.format(base=baselines))


def test_a_missing_baseline_store_names_the_baseline_option(cli, tmp_path):
    job = tmp_path / "labctl.db"
    store_with(job, run_records(0, noisy(20, FLAT, 0.03, 8)))
    code, _, err = cli("compare", "--db", str(job), "--baseline-db", str(tmp_path / "none.db"), "--baseline", "x")
    assert code == 2 and err.strip().startswith(f"--baseline-db {tmp_path / 'none.db'}: no such result store")


def test_a_baseline_of_another_profile_is_refused_not_passed(cli, tmp_path, baselines):
    """No configuration recurs (the profile's name is a knob of every trial): before, every row was
    "cannot tell" and exit 0, so a CI job naming the wrong baseline passed without a verdict."""
    job = tmp_path / "labctl.db"
    other = [r.model_copy(update={"config": {**r.config, "name": "quick-2"}})
             for r in run_records(0, noisy(21, FLAT, 0.03, 8), env=CI_ENV)]
    store_with(job, other)
    junit = tmp_path / "compare.xml"
    code, out, err = cli("compare", "--db", str(job), "--baseline-db", str(baselines), "--baseline", "other",
                         "--junit", str(junit))
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert err.startswith("--baseline 2: none of its configurations recurs in candidate run 1, knobs that differ: "
                          "name ('demo' vs 'quick-2')")
    assert "(allowed: a baseline run of the candidate's profile and configurations)" in err
    assert not junit.exists()


def test_export_takes_a_run_by_name(cli, tmp_path, baselines):
    out_file = tmp_path / "accepted.jsonl"
    code, _, err = cli("export", "--db", str(baselines), "--run", "accepted", "--out", str(out_file))
    assert code == 0 and "wrote 24 trials" in err
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    by_rx = {}
    for line in lines:
        by_rx.setdefault(line["config"]["guest.nics.0.rx_queue_size"], []).append(line["metrics"]["mpps"])
    assert 6.0 < sorted(by_rx[512])[4] < 8.0  # run 3's rx 512 (7), not run 1's (10)
    code, _, err = cli("export", "--db", str(baselines), "--run", "ci4-nope", "--out", str(out_file))
    assert code == 2 and err.strip().startswith(f"--run ci4-nope: no run of that name in {baselines}")


def test_a_threshold_with_a_percent_sign_is_taken(cli, two_runs):
    code, out, _ = cli("compare", "--db", str(two_runs), "--baseline", "1", "--threshold", "30%", "--json")
    assert code == 0 and json.loads(out)["threshold_pct"] == 30.0
