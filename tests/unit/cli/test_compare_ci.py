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
    (["--baseline", "abc"], "--baseline abc: not a run id (allowed: 1, 2)"),
    (["--baseline", "1", "--candidate", "2x"], "--candidate 2x: not a run id (allowed: 1, 2)"),
    (["--baseline", "1", "--threshold", "five"],
     "--threshold five: not a number (allowed: 0 <= PCT < 100, per cent of the baseline median)"),
    (["--baseline", "1", "--metric", "nrd"], "--metric nrd: not a metric of labctl's trials (allowed in runs 1 and 2: mpps)"),
])
def test_bad_text_is_one_line_naming_the_field_and_the_allowed_values(cli, two_runs, args, line):
    code, out, err = cli("compare", "--db", str(two_runs), *args)
    assert (code, out, err.strip()) == (2, "", line)


def test_a_threshold_with_a_percent_sign_is_taken(cli, two_runs):
    code, out, _ = cli("compare", "--db", str(two_runs), "--baseline", "1", "--threshold", "30%", "--json")
    assert code == 0 and json.loads(out)["threshold_pct"] == 30.0
