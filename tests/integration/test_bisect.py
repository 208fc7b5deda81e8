"""``labctl bisect`` on the embedded lab: a git history of a forwarder wrapper (the builds tests' planted
handicap, built by a recipe) with the regression planted at a known commit and a commit that does not build;
the bisect is killed after two steps, run again, and finds the commit, each step measured once and each
commit built once.

Never a throughput threshold: the steps are judged by the until-decided verdicts, and the test checks which
commit they called bad, what the store holds and what the recipe built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from labctl.results import bisects as records
from labctl.results.store import Store
from tests.conftest import DOMAINS, ROOT
from tests.factories import git_history
from tests.integration.conftest import needs_dpdk
from tests.integration.test_builds import SLOW_READS, TESTPMD

#: the recipe's build script, committed with the history: it counts its runs (one line per commit built, in
#: the file $COUNTER names), fails where the file "broken" exists, and writes the forwarder: a wrapper that
#: execs Debian's testpmd with the revision's noisy-mode reads per packet (reads.txt) appended
BUILD = f"""#!/bin/sh
echo "$LABCTL_COMMIT" >> "$COUNTER"
[ ! -e broken ] || {{ echo "error: this revision does not build" >&2; exit 2; }}
mkdir -p out
printf '#!/bin/sh\\nexec {TESTPMD} "$@" --noisy-lkup-num-reads=%s\\n' "$(cat reads.txt)" > out/dpdk-testpmd
chmod 755 out/dpdk-testpmd
"""


@pytest.fixture
def history(tmp_path, monkeypatch):
    """c0 (good) .. c6 (bad): c3, the search's first pick, does not build (fixed in c4); c5 reads 16 times as
    much per packet as vnf.yaml asks (the builds tests' planted handicap): the regression."""
    monkeypatch.setenv("LABCTL_BUILD_CACHE_DIR", str(tmp_path / "cache"))
    commits = [{"build.sh": BUILD, "reads.txt": "128\n", "_subject": "start"},
               {"notes.txt": "1\n", "_subject": "notes"},
               {"notes.txt": "2\n", "_subject": "more notes"},
               {"broken": "yes\n", "_subject": "a change that does not build"},
               {"broken": None, "_subject": "fix the build"},
               {"reads.txt": f"{SLOW_READS}\n", "_subject": "read the table more often"},
               {"notes.txt": "6\n", "_subject": "after the regression"}]
    return git_history(tmp_path / "src", commits)


def _profile(tmp_path) -> str:
    data = yaml.safe_load((DOMAINS / "vnf.yaml").read_text())
    data["name"] = "it-bisect"
    data["workload"].update(duration_s=1, warmup_s=0.5)
    data["recipes"] = {"fwd": {"repo": str(tmp_path / "src"), "argv": ["./build.sh"], "output": "out/dpdk-testpmd",
                               "role": "forwarder", "env": {"COUNTER": str(tmp_path / "count")}}}
    path = tmp_path / "bisect.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _labctl(*args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"LABCTL_FAULT": fault} if fault else {})}
    return subprocess.run([sys.executable, "-m", "labctl.cli", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)


@needs_dpdk
def test_a_killed_bisect_resumes_and_finds_the_planted_commit(no_leftovers, tmp_path, history):
    db = str(tmp_path / "bisect.db")
    command = ("bisect", _profile(tmp_path), "--recipe", "fwd", "--good", history[0], "--bad", "main",
               "--budget", "60", "--db", db)
    killed = _labctl(*command, fault="bisect.step:KILL:2")
    assert killed.returncode == -9, killed.stderr
    assert "labctl-fault: bisect.step KILL" in killed.stderr
    with Store(db) as store:
        (stored,) = records.bisects(store)
        before = records.steps(store, stored["id"])
        runs_before = store.runs()
    assert stored["status"] == "running"  # killed: nobody closed it
    assert [(s.sha, s.kind, s.verdict) for s in before] == [(history[3], "skip", "skip"), (history[2], "measure", "good")]
    assert history[3][:12] in before[0].detail["error"] and os.path.isfile(before[0].detail["log"])
    built_before = (tmp_path / "count").read_text().split()
    assert sorted(built_before) == sorted([history[0], history[6], history[3], history[2]])

    resumed = _labctl(*command, "--json", "--html", str(tmp_path / "bisect.html"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming bisect {stored['id']}: 2 steps stored" in resumed.stderr
    answer = json.loads(resumed.stdout)
    assert answer["first_bad"] == history[5] and answer["parent"] == history[4]
    assert answer["first_bad_subject"] == "read the table more often" and answer["direction"] == "worse"
    final = answer["final"]["comparison"]
    assert final["verdict"] == "worse" and final["high_pct"] < -5.0
    steps = [(s["sha"], s["kind"]) for s in answer["steps"]]
    assert steps[:2] == [(s.sha, s.kind) for s in before] and len(steps) == len(set(steps))
    assert steps[2:] == [(history[4], "measure"), (history[5], "measure"), (history[5], "final")]
    built = (tmp_path / "count").read_text().split()
    assert sorted(built) == sorted(set(built))  # no commit built twice, not even the one that failed
    assert set(built) == {history[i] for i in (0, 2, 3, 4, 5, 6)}
    with Store(db) as store:
        runs = store.runs()
        step_runs = [s.run_id for s in records.steps(store, stored["id"]) if s.run_id is not None]
        trials = [t for run in step_runs for t in store.trials(run, status=None)]
    assert len(runs) == len(runs_before) + 3 and len(step_runs) == len(set(step_runs)) == 4
    assert all(t.status == "ok" for t in trials), [t.error for t in trials if t.status != "ok"]
    for t in trials:  # every trial ran the recipe's build of its commit, and says so
        forwarder = t.env.binaries["forwarder"]
        assert forwarder["recipe"] == "fwd" and forwarder["commit"].startswith(t.config["build"])
        assert forwarder["version"].startswith("DPDK 22.11")
    page = (tmp_path / "bisect.html").read_text()
    assert history[5][:12] in page and "<svg" in page and "final pair" in page
