"""ci.yml, the fleet's CI job, on this machine (local connection, preparation skipped), through ansible-runner's
Python API (labctl.fleet): the artefacts arrive (the plot also without grouping); the job's sweep judged
against a named baseline run (passing and failing through planted baselines, and refused before the sweep
when the run or its store is missing) and against a JSONL baseline; a patch gate's builds compared. The
other playbooks (lab-host.yml, sweep.yml across namespaces, the runner job itself) are test_fleet.py's, whose
helpers this module shares.

Everything made here (temporary directories, the job's stores and artefacts) is removed by finalizers, also
when a test fails (LABCTL_KEEP_TEST_DIRS=1 keeps the directories for a look).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from labctl.fleet import HostEvent
from labctl.fleet.run import playbooks_dir, run_playbook
from tests.conftest import ROOT
from tests.factories import build_binary
from tests.integration import test_fleet
from tests.integration.test_fleet import LABCTL, local_connection, private_dir, run, tiny_profile

pytestmark = test_fleet.pytestmark  # DPDK and ansible-core, as the other playbooks' tests
# --- ci.yml, locally ------------------------------------------------------------------------------------


def ci_job(base: Path, name: str, **extra) -> tuple[Path, dict]:
    """(inventory, group variables) of a CI job on this machine: the tiny profile ``name``, preparation
    skipped, labctl from this checkout, everything it writes under ``base``."""
    profile = base / "ci.yaml"
    if not profile.exists():
        tiny_profile(profile, name)
    inventory = base / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"ci": local_connection(base)}}}))
    # labctl_ci_profiles: the job's profile and one shipped one, where a team's job validates every shipped
    # profile as well (19 copies at about 0.4 s each: 7 s of every job, paid again by each job of this module)
    group_vars = {"labctl_prepare": False, "labctl_exe": LABCTL, "labctl_chdir": str(ROOT),
                  "labctl_work": str(base / "work"), "labctl_profile": str(profile),
                  "labctl_ci_profiles": [str(profile), str(ROOT / "domains" / "quick.yaml")],
                  "labctl_env": {f"LABCTL_{k}_DIR": str(base / k.lower()) for k in ("STATE", "RUN", "LOG")}, **extra}
    if group_vars["labctl_ci_profiles"] is None:  # the role's default: every shipped profile and the job's
        del group_vars["labctl_ci_profiles"]
    return inventory, group_vars


def planted(jsonl: Path, out: Path, factor: float) -> Path:
    """``jsonl``'s trials as a baseline ``factor`` times their median rate (mpps), each within 1% of it:
    a baseline that makes the next job a regression (factor 10) or a progression (0.1) whatever the
    host's noise does to it. Steady on purpose: the job's own trials, multiplied, would carry their
    scatter into it (two bands on a shared host are "cannot tell"), so only the job's side can."""
    import statistics

    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    median = statistics.median(line["metrics"]["mpps"] for line in lines if line["status"] == "ok")
    for index, line in enumerate(lines):
        line["metrics"]["mpps"] = factor * median * (1 + 0.002 * (index % 5))
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return out


@pytest.mark.parametrize("plot_by", ["none", ""])
def test_ci_playbook_collects_the_artefacts_and_plots_without_grouping(request, plot_by):
    """labctl_plot_by none (or empty): the plot has no knob on its x axis, a point per configuration;
    before, the role passed `--by none` and labctl's exit 2 failed the job."""
    base = private_dir("labctl-fleet-ci4-", request)
    # one of the two validates what a team's job does: every shipped profile, and the job's own
    every_profile = plot_by == "none"
    inventory, group_vars = ci_job(base, f"ci4-plot-{secrets.token_hex(3)}", labctl_plot_by=plot_by,
                                   **({"labctl_ci_profiles": None} if every_profile else {}))
    steps: list[HostEvent] = []
    run = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, group_vars, data_dir=base / "fleet",
                       on_event=steps.append)
    (host,) = run.hosts
    assert host.status == "ok", host.reason
    got = {p.name for p in host.artifacts.iterdir()}
    assert got >= {"trials.jsonl", "report.md", "report.html", "plot.png", "advice.txt", "labctl.log"}
    assert not got & {"compare.txt", "compare.xml", "compare.html", "baseline.jsonl"}  # no baseline named: not compared
    assert (host.artifacts / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert (host.artifacts / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| guest.nics.*.rx_queue_size |" in (host.artifacts / "report.md").read_text()
    lines = (host.artifacts / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line)["env"]["host"] == "ci" for line in lines)
    assert {s.state for s in steps if s.task == "labctl plot"} == {"started", "ok"}
    validated = {p.name for p in (base / "work").glob("*/ci/profiles/*.yaml")}
    shipped = {p.name for p in (ROOT / "domains").glob("*.yaml")}
    assert validated == (shipped | {"ci.yaml"} if every_profile else {"ci.yaml", "quick.yaml"})


@pytest.fixture(scope="module")
def first_ci_job(request):
    """The first CI job of a host, shared by the baseline tests below (each continues from a copy): the
    tiny profile swept 5 times over, its trials kept in the host's history (labctl_history_db), a
    labctl_baseline that does not exist yet (a team's first job: nothing to compare with). Returns the
    job's directory (its profile ``ci.yaml``, ``history.db``) with its ``trials.jsonl``, and the profile's name."""
    base = private_dir("labctl-fleet-ci4-first-", request)
    name = f"ci4-base-{secrets.token_hex(3)}"
    inventory, group_vars = ci_job(base, name, labctl_ci_args=["--repeat", "5"], labctl_history_db=str(base / "history.db"),
                                   labctl_baseline=str(base / "missing.jsonl"))
    first = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, group_vars, data_dir=base / "fleet")
    (host,) = first.hosts
    assert host.status == "ok", host.reason
    assert (host.artifacts / "plot.png").exists()  # labctl_plot_by auto: against the profile's sweep knob
    assert not (host.artifacts / "compare.xml").exists()  # no baseline file: not compared
    shutil.copy(host.artifacts / "trials.jsonl", base / "trials.jsonl")
    return base, name


def continued_ci_job(first: tuple[Path, str], prefix: str, request, **extra) -> tuple[Path, Path, Path, dict]:
    """(base, history, inventory, group variables) of the next job of ``first``'s host, in a directory of its
    own: the profile and the history copied, so each test's jobs add to its own copy of the history."""
    source, name = first
    base = private_dir(prefix, request)
    for file in ("ci.yaml", "history.db", "trials.jsonl"):
        shutil.copy(source / file, base / file)
    history = base / "history.db"
    inventory, group_vars = ci_job(base, name, labctl_ci_args=["--repeat", "5"], labctl_history_db=str(history), **extra)
    return base, history, inventory, group_vars


def test_ci_playbook_judges_the_sweep_against_a_named_baseline_run(first_ci_job, request):
    """The job names its baseline run (labctl_baseline_run) in a result store (labctl_baseline_db).
    The first job (first_ci_job) had no baseline and started the host's history. Its trials, planted 10
    times slower and 10 times faster, are imported as the runs ci4-low (into a store on the controller)
    and ci4-high (into the history on the host). Job 2 names ci4-low from the controller's store: 2
    progressions, exit 0, the job passes. Job 3 names ci4-high in the host's history: 2 regressions, the
    job fails with the verdict. Job 4 names a run no store holds: it fails before its sweep with labctl's
    one line."""
    base, history, inventory, group_vars = continued_ci_job(first_ci_job, "labctl-fleet-ci4-named-", request)
    data_dir = base / "fleet"
    jsonl = base / "trials.jsonl"
    controller_db = base / "controller-baselines.db"
    for path, factor, run_name, db in ((base / "low.jsonl", 0.1, "ci4-low", controller_db),
                                       (base / "high.jsonl", 10, "ci4-high", history)):
        imported = run([*LABCTL, "import", str(planted(jsonl, path, factor)), "--db", str(db), "--name", run_name])
        assert "imported 10 trials as run" in imported.stdout, imported.stderr

    passing = run_playbook("ci", playbooks_dir() / "ci.yml", inventory,
                           {**group_vars, "labctl_baseline_run": "ci4-low", "labctl_baseline_db": str(controller_db),
                            "labctl_baseline_db_on": "controller"}, data_dir=data_dir)
    (host,) = passing.hosts
    assert host.status == "ok", host.reason
    text = (host.artifacts / "compare.txt").read_text()
    assert text.startswith("baseline:  run 1 (ci4-low, host ci,") and "/baseline.db)" in text.splitlines()[0]
    # a side can come out two-band on this busy host ("cannot tell"): the planted 10x decides the rest
    assert re.search(r"^verdict: 0 regressions, [12] progressions?, 0 no change, [01] cannot tell -> exit 0$", text, re.M)
    root = ET.parse(host.artifacts / "compare.xml").getroot()
    assert root.get("failures") == "0" and len(root.findall("./testsuite/testcase")) == 2
    assert (host.artifacts / "compare.html").read_text().startswith("<!DOCTYPE html>")
    def rates(path: Path) -> list[float]:
        return [json.loads(line)["metrics"]["mpps"] for line in path.read_text().splitlines()]

    assert rates(host.artifacts / "baseline.jsonl") == rates(base / "low.jsonl")  # the trials it compared with

    failing = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, {**group_vars, "labctl_baseline_run": "ci4-high"},
                           data_dir=data_dir)
    (host,) = failing.hosts
    assert host.status == "failed"
    assert re.fullmatch(r"Fail the job on a regression: labctl compare: verdict: ([12]) regressions?, 0 progressions, "
                        r"0 no change, [01] cannot tell -> exit 1 against run ci4-high of "
                        + re.escape(f"{history} (compare.txt and compare.xml in {host.artifacts})"), host.reason), host.reason
    root = ET.parse(host.artifacts / "compare.xml").getroot()
    assert root.get("failures") in ("1", "2") and len(root.findall("./testsuite/testcase")) == 2
    assert (host.artifacts / "compare.txt").read_text().startswith("baseline:  run 2 (ci4-high, host ci,")
    assert {"report.md", "plot.png", "trials.jsonl", "trend.txt", "trend.xml", "trend.html", "baseline.jsonl"} <= {
        p.name for p in host.artifacts.iterdir()}

    unknown = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, {**group_vars, "labctl_baseline_run": "ci4-nope"},
                           data_dir=data_dir)
    (host,) = unknown.hosts
    assert host.status == "failed"
    assert host.reason.startswith(f"Stop when the store has no such run: labctl_baseline_run=ci4-nope: --run ci4-nope: "
                                  f"no run of that name in {history} (allowed: a run id, 1..")
    assert "ci4-high" in host.reason
    assert not (host.artifacts / "trials.jsonl").exists()  # it stopped before the sweep


@pytest.mark.parametrize("extra, reason", [
    ({"labctl_baseline_run": "ci4-x", "labctl_baseline": "/nonexistent/b.jsonl"},
     "Check the CI variables: one baseline: labctl_baseline=/nonexistent/b.jsonl and labctl_baseline_run=ci4-x: give one"),
    ({"labctl_baseline_run": "ci4-x", "labctl_baseline_db": "/nonexistent/b.db", "labctl_baseline_db_on": "cloud"},
     "Check the CI variables: where the baseline store is: labctl_baseline_db_on=cloud: not a place "
     "(allowed: host, controller)"),
    ({"labctl_baseline_run": "ci4-x"},
     "Check the CI variables: a store to find the named run in: labctl_baseline_run=ci4-x: no labctl_baseline_db"),
    ({"labctl_baseline_run": "ci4-x", "labctl_baseline_db": "/nonexistent/b.db"},
     "Stop when it is not: labctl_baseline_db=/nonexistent/b.db: no such result store on ci (allowed:"),
    ({"labctl_baseline_run": "ci4-x", "labctl_baseline_db": "/nonexistent/b.db", "labctl_baseline_db_on": "controller"},
     "Stop when it is not: labctl_baseline_db=/nonexistent/b.db: no such result store on the controller (allowed:"),
])
def test_ci_playbook_refuses_a_baseline_it_cannot_use_before_any_work(request, extra, reason):
    base = private_dir("labctl-fleet-ci4-bad-", request)
    inventory, group_vars = ci_job(base, f"ci4-bad-{secrets.token_hex(3)}", **extra)
    run = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, group_vars, data_dir=base / "fleet")
    (host,) = run.hosts
    assert host.status == "failed" and host.reason.startswith(reason), host.reason
    assert not (base / "work").exists() or not list((base / "work").rglob("labctl.db"))  # no sweep ran


def test_ci_playbook_fails_the_job_on_a_regression_against_its_jsonl_baseline(first_ci_job, request):
    """The JSONL alternative (labctl_baseline). The first job (first_ci_job) found no baseline file and was
    not compared; its trials.jsonl, with every rate made 10 times higher, is the second job's baseline
    (what a team commits as ci/baselines/HOST.jsonl): the second job's sweep regressed by 90% in both
    configurations, so the host fails with the verdict, and compare.xml, compare.txt and the history's
    trend.txt are kept."""
    base, _history, inventory, group_vars = continued_ci_job(first_ci_job, "labctl-fleet-ci4-jsonl-", request)
    name = first_ci_job[1]
    baseline = planted(base / "trials.jsonl", base / "baseline.jsonl", 10)
    second = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, {**group_vars, "labctl_baseline": str(baseline)},
                          data_dir=base / "fleet")
    (host,) = second.hosts
    assert host.status == "failed" and "labctl compare: verdict: 2 regressions" in host.reason
    root = ET.parse(host.artifacts / "compare.xml").getroot()
    assert root.get("failures") == "2" and len(root.findall("./testsuite/testcase")) == 2
    assert "-> exit 1" in (host.artifacts / "compare.txt").read_text()
    trend = (host.artifacts / "trend.txt").read_text()
    assert trend.startswith(f"trend of {name}: mpps")
    assert len([line for line in trend.splitlines() if " UTC " in line]) == 4  # 2 jobs x 2 configurations



def test_ci_playbook_compares_the_builds_of_a_patch_gate(request):
    """labctl_builds: the job's sweep runs every build interleaved and `labctl compare --by build` judges
    each against the baseline build; its rows in the posts' shape are kept as compare-builds.txt (and the
    JUnit file). One repeat cannot decide: "cannot tell", exit 0, the job passes with the artefacts."""
    base = private_dir("labctl-fleet-ci4-builds-", request)
    os.chmod(base, 0o755)
    same = build_binary(base / "same", copy_of=shutil.which("dpdk-testpmd"))
    inventory, group_vars = ci_job(base, f"ci4-builds-{secrets.token_hex(3)}", labctl_plot_by="none",
                                   labctl_builds={"base": {}, "same": {"forwarder": str(same)}})
    run = run_playbook("ci", playbooks_dir() / "ci.yml", inventory, group_vars, data_dir=base / "fleet")
    (host,) = run.hosts
    assert host.status == "ok", host.reason
    text = (host.artifacts / "compare-builds.txt").read_text()
    assert "build: base vs same" in text and "cannot tell" in text, text
    assert (host.artifacts / "compare-builds.xml").read_text().startswith("<?xml")
    lines = [json.loads(line) for line in (host.artifacts / "trials.jsonl").read_text().splitlines()]
    assert [line["config"]["build"] for line in lines] == ["base", "same", "base", "same"]
