"""labctl compare and labctl report --trend: exit codes 0/1/2, one-line errors, JUnit, JSON."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labctl.results.record import TrialRecord
from labctl.results.store import Store
from tests.factories import ENV, noisy, run_records

FLAT = {256: 10.0, 512: 10.0, 1024: 10.0}
SLOWER = {256: 10.0, 512: 8.8, 1024: 10.0}


def add_run(db: Path, records: list[TrialRecord], name: str = "demo") -> int:
    with Store(db) as store:
        run_id = store.create_run(name, {}, [], host=None, status="finished")
        for record in records:
            store.add_trial(record.model_copy(update={"run_id": run_id, "id": None}))
    return run_id


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Runs 1 (baseline), 2 (rx 512 12% slower, DPDK upgraded) and 3 (a re-measurement of run 1)."""
    path = tmp_path / "labctl.db"
    add_run(path, run_records(0, noisy(1, FLAT, 0.03, 8), env=ENV.model_copy(update={"dpdk": "22.11.11"})))
    add_run(path, run_records(0, noisy(2, SLOWER, 0.03, 8), env=ENV.model_copy(update={"dpdk": "23.11.2"})))
    add_run(path, run_records(0, noisy(3, FLAT, 0.03, 8), env=ENV.model_copy(update={"dpdk": "22.11.11"})))
    return path


def test_a_regression_exits_1_with_the_environment_change_above(cli, db, tmp_path):
    junit = tmp_path / "compare.xml"
    code, out, err = cli("compare", "--db", str(db), "--baseline", "1", "--candidate", "2", "--junit", str(junit))
    assert code == 1, err
    assert out.index("dpdk: 22.11.11 -> 23.11.2") < out.index("rx_queue_size=512")
    assert "verdict: 1 regression," in out and "-> exit 1" in out
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1" and len(root.findall("./testsuite/testcase/failure")) == 1
    assert f"wrote {junit}" in err


def test_no_change_exits_0_and_json_carries_the_verdicts(cli, db):
    code, out, _ = cli("compare", "--db", str(db), "--baseline", "1", "--candidate", "3", "--json")
    data = json.loads(out)
    assert code == 0 and data["exit_code"] == 0 and data["counts"]["regression"] == 0
    assert len(data["verdicts"]) == 3 and {v["verdict"] for v in data["verdicts"]} <= {"no change", "cannot tell"}
    assert data["env_changes"] == [] and data["baseline"]["id"] == 1 and data["candidate"]["id"] == 3


def test_the_candidate_defaults_to_the_newest_run_and_the_baseline_can_live_in_another_store(cli, db, tmp_path):
    code, out, _ = cli("compare", "--db", str(db), "--baseline", "2")  # candidate: run 3, 12% faster at 512
    assert code == 0 and "candidate: run 3" in out and "progression" in out
    other = tmp_path / "baseline.db"
    add_run(other, run_records(0, noisy(1, FLAT, 0.03, 8)))
    code, out, _ = cli("compare", "--db", str(db), "--candidate", "2", "--baseline-db", str(other))
    baseline_line = next(line for line in out.splitlines() if line.startswith("baseline:"))
    assert code == 1 and baseline_line.startswith("baseline:  run 1 (demo") and str(other) in baseline_line


@pytest.mark.parametrize("args, words", [
    (["--baseline", "9"], "--baseline 9: no such run in"),
    (["--baseline", "1", "--candidate", "7"], "--candidate 7: no such run in"),
    (["--baseline", "3"], "--baseline 3: the candidate run itself (allowed: another run of"),
    ([], "--baseline: required when the baseline is in the candidate's store (allowed: a run of"),
    (["--baseline", "1", "--threshold", "-1"], "--threshold -1: out of range (allowed: 0 <= PCT < 100"),
    (["--baseline", "1", "--threshold", "nan"], "--threshold nan: out of range"),
    (["--baseline", "1", "--metric", "ndr"], "--metric ndr: not measured in runs 1 and 3 (allowed: mpps)"),
    (["--baseline", "1", "--metric", "pdr"], "(allowed: mpps)"),
])
def test_bad_input_is_one_line_and_exit_2(cli, db, args, words):
    code, out, err = cli("compare", "--db", str(db), *args)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and not out


def test_an_unwritable_junit_is_refused_before_any_work(cli, tmp_path):
    missing_db = tmp_path / "none.db"
    code, _, err = cli("compare", "--db", str(missing_db), "--baseline", "1",
                       "--junit", str(tmp_path / "no-dir" / "x.xml"))
    assert code == 2 and err.startswith("--junit") and "allowed: a file in an existing writable directory" in err
    assert not missing_db.exists()
    code, _, err = cli("compare", "--db", str(missing_db), "--baseline", "1")
    assert code == 2 and "no such result store" in err and not missing_db.exists()


def test_report_trend_marks_the_version_change(cli, db):
    code, out, err = cli("report", "--db", str(db), "--trend", "demo", "--config", "guest.nics.*.rx_queue_size=512")
    assert code == 0, err
    lines = out.splitlines()
    rows = [line for line in lines if line[:2].strip().lstrip("*").isdigit()]
    assert [row.split()[0] for row in rows] == ["1", "*2", "*3"]
    assert "dpdk: 22.11.11 -> 23.11.2" in out and "dpdk: 23.11.2 -> 22.11.11" in out
    code, out, _ = cli("report", "--db", str(db), "--trend", "demo", "--format", "json")
    assert code == 0 and len(json.loads(out)["series"]) == 3


@pytest.mark.parametrize("args, words", [
    (["--trend", "nope"], "--trend nope: no trials of that profile (allowed: demo)"),
    (["--trend", "demo", "--config", "workload.burst"], "--config 'workload.burst': expected KNOB=VALUE"),
    (["--trend", "demo", "--format", "csv"], "--format csv: a trend is shown as table or json"),
    (["--trend", "demo", "--run", "1"], "--run: not with --trend"),
    (["--config", "workload.burst=32"], "--config: only with --trend PROFILE"),
])
def test_report_trend_bad_input_exit_2(cli, db, args, words):
    code, _, err = cli("report", "--db", str(db), *args)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_tcp_run_is_compared_by_its_own_rate_without_metric(cli, tmp_path):
    """Without --metric a tcp_stream candidate is judged on bandwidth_gbps (a tcp trial has no mpps): a second
    guest queue 20% slower is a regression of that configuration, the other is unchanged."""
    from tests.factories import tcp_records

    base = {(1, 1): (1.0, 10.0, 9.0), (1, 2): (1.3, 8.0, 7.0)}
    slower = {(1, 1): (1.0, 10.0, 9.0), (1, 2): (1.04, 8.0, 7.0)}
    db = tmp_path / "tcp.db"
    add_run(db, tcp_records(base, n=8, cv=0.02, seed=1), name="tcp-multiqueue")
    add_run(db, tcp_records(slower, n=8, cv=0.02, seed=2), name="tcp-multiqueue")
    code, out, err = cli("compare", "--db", str(db), "--baseline", "1", "--candidate", "2", "--json")
    data = json.loads(out)
    assert code == 1, err
    assert data["metric"] == "bandwidth_gbps" and data["counts"]["regression"] == 1
    (bad,) = [v for v in data["verdicts"] if v["verdict"] == "regression"]
    assert "guest_queues=2" in bad["label"]
