"""labctl compare --run N --by KNOB --baseline VALUE: exit codes 0/1/2, one-line errors, JSON, JUnit and
--format post, inside one stored run of planted builds (and --format post between two runs)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.factories import noisy, run_records
from tests.unit.analysis.builds_data import build_records
from tests.unit.cli.test_compare import add_run


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Run 1: builds base, slow (20% slower), same (a copy) x 64B, 256B; run 2: rx rings 256/512, no build."""
    path = tmp_path / "labctl.db"
    add_run(path, build_records(0), name="builds")
    add_run(path, run_records(0, noisy(1, {256: 10.0, 512: 10.0}, 0.03, 6)), name="rings")
    return path


def test_a_slow_build_exits_1_with_json_and_junit(cli, db, tmp_path):
    junit = tmp_path / "patch.xml"
    code, out, err = cli("compare", "--db", str(db), "--run", "builds", "--by", "build", "--baseline", "base",
                         "--format", "json", "--junit", str(junit))
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["by"] == "build" and data["baseline"]["id"] == 1
    verdicts = {(v["candidate_value"], v["knobs"]["workload.packet_size"]): v["verdict"] for v in data["verdicts"]}
    assert verdicts[("slow", 64)] == verdicts[("slow", 256)] == "regression"
    assert verdicts[("same", 64)] not in ("regression", "progression")
    assert verdicts[("same", 256)] not in ("regression", "progression")
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "2" and root.get("tests") == "4" and f"wrote {junit}" in err


def test_the_copy_alone_exits_0_and_json_is_also_json(cli, db):
    code, out, _ = cli("compare", "--db", str(db), "--run", "1", "--by", "build", "--baseline", "base",
                       "--candidate", "same", "--json")
    assert code == 0 and json.loads(out)["candidate_values"] == ["same"]


def test_format_post_prints_the_rows_as_posted(cli, db):
    code, out, _ = cli("compare", "--db", str(db), "--run", "1", "--by", "build", "--baseline", "base",
                       "--candidate", "slow", "--candidate", "same", "--format", "post")
    lines = out.splitlines()
    assert code == 1 and lines[:3] == ["build: base vs slow", "64B:  4.03 vs 3.20 Mpps (-20.7% [-23.1, -14.3]) regression",
                                       "256B: 3.47 vs 2.75 Mpps (-20.5% [-24.4, -18.1]) regression"]
    assert "run 1 (builds), host lab1, Planted CPU @ 2.0GHz, accelerator tcg" in out


def test_a_frame_size_is_matched_as_the_integer_it_was_recorded_as(cli, db):
    code, out, _ = cli("compare", "--db", str(db), "--run", "1", "--by", "workload.packet_size", "--baseline",
                       "64", "--candidate", "256", "--json")
    data = json.loads(out)
    assert data["baseline_value"] == 64 and data["candidate_values"] == [256] and len(data["verdicts"]) == 3


def test_the_newest_run_by_default_and_format_post_between_runs(cli, db):
    code, out, _ = cli("compare", "--db", str(db), "--by", "guest.nics.*.rx_queue_size", "--baseline", "256")
    assert code == 0 and out.startswith("run:        run 2 (rings, host lab1")
    code, out, _ = cli("compare", "--db", str(db), "--baseline", "2", "--candidate", "2", "--format", "post")
    assert code == 2
    add_run(db, run_records(0, noisy(3, {256: 10.0, 512: 8.8}, 0.03, 6)), name="rings")
    code, out, _ = cli("compare", "--db", str(db), "--baseline", "2", "--candidate", "3", "--format", "post")
    assert code == 1 and out.startswith("run 2 vs run 3\nrx_queue_size=256: ")
    assert "rx_queue_size=512: " in out and out.rstrip().endswith("-> exit 1")


@pytest.mark.parametrize("args, words", [
    (["--run", "1", "--by", "workload.burst", "--baseline", "base"],
     "--by workload.burst: not a knob run 1 varied (allowed: workload.packet_size, build)"),
    (["--run", "1", "--by", "build", "--baseline", "patched"],
     "--baseline patched: not a value of build in run 1 (allowed: base, slow, same)"),
    (["--run", "1", "--by", "build", "--baseline", "base", "--candidate", "fast"],
     "--candidate fast: not a value of build in run 1 (allowed: base, slow, same)"),
    (["--run", "1", "--by", "build"], "--baseline: required with --by build (allowed: a value of build in the run)"),
    (["--run", "9", "--by", "build", "--baseline", "base"], "--run 9: no such run in"),
    (["--run", "nosuch", "--by", "build", "--baseline", "base"], "--run nosuch: no run of that name in"),
    (["--run", "1", "--baseline", "base"], "--run 1: compares inside one run only with --by KNOB"),
    (["--run", "1", "--by", "build", "--baseline", "base", "--baseline-db", "x.db"], "--baseline-db x.db: not with --by"),
    (["--baseline", "1", "--candidate", "2", "--candidate", "1"], "--candidate 2 1: one run against the baseline run"),
    (["--run", "1", "--by", "build", "--baseline", "base", "--metric", "ndr"],
     "--metric ndr: not measured in run 1 (allowed: mpps)"),
    (["--run", "1", "--by", "build", "--baseline", "base", "--format", "csv"], "--format csv: a comparison is shown as"),
])
def test_bad_input_is_one_line_and_exit_2(cli, db, tmp_path, args, words):
    junit = tmp_path / "never.xml"
    code, out, err = cli("compare", "--db", str(db), *args, "--junit", str(junit))
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and not out
    assert not junit.exists()
