"""``labctl bisect``'s course, on a real git history and recipe builds, with trials simulated per commit: the
planted commit found with its interval against its parent, a commit that does not build skipped and named,
an undecided step reported and never guessed, a killed bisect resumed without repeating a step or a
build, and every bad argument refused before anything is built."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from labctl.errors import KnobError, Terminated, UserError
from labctl.measure import bisect as b
from labctl.measure import bisect_request
from labctl.measure.until import Pairing, State
from labctl.analysis.sequential import Decision
from labctl.profile.load import load_profile
from labctl.results import bisects as records
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store
from tests.conftest import DOMAINS
from tests.factories import git_history

CPUS = frozenset({0, 1})
BUILD = """#!/bin/sh
echo "$LABCTL_COMMIT" >> "$COUNTER"
[ ! -e broken ] || { echo "error: does not compile" >&2; exit 2; }
mkdir -p out && printf '#!/bin/sh\\nexec true\\n' > out/fwd && chmod 755 out/fwd
"""


@pytest.fixture
def history(tmp_path, monkeypatch):
    """Nine commits: c0 good .. c8 bad; c4, the first the search picks, does not build (fixed in c5)."""
    monkeypatch.setenv("LABCTL_BUILD_CACHE_DIR", str(tmp_path / "cache"))
    commits = [{"build.sh": BUILD, "note": "0\n"}]
    for i in range(1, 9):
        change: dict = {"note": f"{i}\n", "_subject": f"change {i}"}
        if i == 4:
            change["broken"] = "yes\n"
        if i == 5:
            change["broken"] = None
        commits.append(change)
    return git_history(tmp_path / "src", commits)


def profile(tmp_path: Path) -> Path:
    data = yaml.safe_load((DOMAINS / "vnf.yaml").read_text())
    data["recipes"] = {"fwd": {"repo": str(tmp_path / "src"), "argv": ["./build.sh"], "output": "out/fwd",
                               "role": "forwarder", "env": {"COUNTER": str(tmp_path / "count")}}}
    data["sweep"] = {"workload.burst": [32, 64]}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def runner(speeds: dict[str, float], noise: dict[str, float], calls: list, seed: int = 1, stop_after: int | None = None):
    """Trials whose rate is the commit's planted speed with Gaussian noise (per commit, default 3%)."""
    rng = random.Random(seed)

    def run(loaded, repeat_index, on_event=None, session=None):
        from labctl.profile.knobs import flatten

        build = loaded.profile.build
        calls.append(build)
        if stop_after is not None and len(calls) > stop_after:
            raise Terminated("SIGTERM")
        sha = next(s for s in speeds if s.startswith(build))
        rate = speeds[sha] * (1 + rng.gauss(0, noise.get(sha, 0.03)))
        return TrialRecord(config=flatten(loaded.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=rate, loss_ratio=0.0), env=Environment(accel="none"))
    return run


def request(tmp_path, good, bad, budget="200", **kw):
    loaded = load_profile(profile(tmp_path), cpus=CPUS)
    return bisect_request.check_request(loaded, "fwd", good, bad, budget, db=tmp_path / "b.db", **kw)


def built_commits(tmp_path: Path) -> list[str]:
    path = tmp_path / "count"
    return path.read_text().split() if path.exists() else []


def test_the_planted_commit_is_found_with_its_interval_and_the_broken_one_skipped(tmp_path, history):
    speeds = {sha: (10.0 if i < 6 else 5.0) for i, sha in enumerate(history)}  # c6 halves the rate
    calls: list = []
    req = request(tmp_path, history[0], "main")
    assert req.commits == history[1:] and "sweep" in req.notes[0]
    result = b.run_bisect(req, runner(speeds, {}, calls))
    assert result.status == "found" and result.exit_code == 0
    assert result.first_bad == history[6] and result.parent == history[5] and result.first_bad_subject == "change 6"
    assert result.direction == "worse"
    final = result.final["comparison"]
    assert final["verdict"] == "worse" and -55 < final["change_pct"] < -45 and final["high_pct"] < -5
    kinds = [(s["sha"], s["kind"], s["verdict"]) for s in result.steps]
    assert kinds[0] == (history[4], "skip", "skip")  # c4 does not build: skipped, its log named
    skip = result.steps[0]
    assert history[4][:12] in skip["detail"]["error"] and Path(skip["detail"]["log"]).is_file()
    measured = [sha for sha, kind, _ in kinds if kind == "measure"]
    assert len(measured) == len(set(measured))
    verdicts = {sha: v for sha, kind, v in kinds if kind == "measure"}
    assert all(v == ("bad" if history.index(sha) >= 6 else "good") for sha, v in verdicts.items())
    assert sorted(built_commits(tmp_path)) == sorted({history[0], history[8], *measured, history[4]})
    with Store(tmp_path / "b.db") as store:
        stored = records.bisect(store)
        runs = store.runs()
    assert stored["status"] == "finished" and stored["info"]["result"]["first_bad"] == history[6]
    assert len(runs) == len(measured) + 1  # a run per measured step and one for the final pair
    assert all(run["status"] == "finished" for run in runs)
    with Store(tmp_path / "b.db") as store:  # each step's looks planned over at most --step-blocks (8) blocks
        horizons = [store.run(run["id"])["info"]["until"]["max_blocks"] for run in runs]
    assert horizons and all(h == bisect_request.STEP_BLOCKS for h in horizons), horizons
    assert set(calls) <= {b.label(s) for s in history}
    assert "first bad commit: " + history[6] in result.message
    # the answer as text, as JSON, as a page; the stored bisect reads back the same
    from labctl import api

    text = api.render_bisect(result.to_dict())
    assert f"found: first bad commit: {history[6]}" in text and "skip (does not build)" in text
    assert f"final pair (run {result.steps[-1]['run_id']}): {history[6][:12]} against its parent {history[5][:12]}: worse" in text
    page = api.bisect_html(result.to_dict(), tmp_path / "b.html").read_text()
    assert history[6][:12] in page and "<svg" in page and "<script" not in page
    stored_doc = api.bisect_document(tmp_path / "b.db")
    assert stored_doc["first_bad"] == history[6] and len(stored_doc["steps"]) == len(result.steps)


def test_a_killed_bisect_resumes_without_repeating_a_step_or_a_build(tmp_path, history):
    speeds = {sha: (10.0 if i < 6 else 5.0) for i, sha in enumerate(history)}
    calls: list = []
    req = request(tmp_path, history[0], history[8])
    with pytest.raises(Terminated):
        b.run_bisect(req, runner(speeds, {}, calls, stop_after=20))  # killed inside the third measured step
    with Store(tmp_path / "b.db") as store:
        before = records.steps(store, 1)
        assert records.bisect(store, 1)["status"] == "aborted"
        (killed,) = [run for run in store.runs() if run["status"] == "aborted"]  # c6's step, 2 trials in
        assert killed["ok"] == 2
    assert [s.kind for s in before] == ["skip", "measure", "measure"]  # c4 (broken) skipped, c3 and c5 measured
    built_before = built_commits(tmp_path)
    calls2: list = []
    result = b.run_bisect(request(tmp_path, history[0], history[8]), runner(speeds, {}, calls2))
    assert result.resumed and result.bisect_id == 1 and result.first_bad == history[6]
    shas = [(s["sha"], s["kind"]) for s in result.steps]
    assert len(shas) == len(set(shas)) and shas[:3] == [(s.sha, s.kind) for s in before]
    # after the resume: c6's step (good, c6, bad) and the final pair (c5 against c6); c3's step is not repeated
    assert set(calls2) == {b.label(history[i]) for i in (0, 5, 6, 8)}
    c6 = next(s for s in result.steps if s["sha"] == history[6] and s["kind"] == "measure")
    assert c6["run_id"] == killed["id"] and c6["detail"]["replayed"] == 2  # taken up, its two trials kept
    assert len(calls2) == c6["detail"]["trials"] - 2 + result.steps[-1]["detail"]["trials"]
    with Store(tmp_path / "b.db") as store:
        step_runs = [s.run_id for s in records.steps(store, 1) if s.run_id is not None]
        assert len(step_runs) == len(set(step_runs)) == 4 and len(store.runs()) == 4
        trials = store.trials(killed["id"], status=None)
        cells = [(t.details["block"], t.config["build"]) for t in trials if t.status != "aborted"]
        assert len(cells) == len(set(cells)) == c6["detail"]["trials"]  # no trial of it measured twice
        assert [t.status for t in trials].count("aborted") == 1  # the one the kill interrupted, kept as such
    rebuilt = built_commits(tmp_path)[len(built_before):]
    assert not set(rebuilt) & set(built_before)  # nothing built twice: not the broken commit, not good or bad


def test_an_undecided_step_is_reported_never_guessed(tmp_path, history):
    speeds = {sha: (10.0 if i < 4 else 5.0) for i, sha in enumerate(history)}
    noisy = {history[3]: 0.9}  # c3's trials scatter over +-90%: no verdict within its share
    req = request(tmp_path, history[0], history[8], budget="60")
    result = b.run_bisect(req, runner(speeds, noisy, []))
    step = next(s for s in result.steps if s["sha"] == history[3])
    assert step["verdict"] == "cannot tell"
    line = b.describe_step(step["detail"], "cannot tell")
    assert f"{history[3][:12]} between" in line and "cannot tell (vs good" in line and "%" in line
    assert result.first_bad is None and result.status in ("narrowed", "budget") and result.exit_code == 1
    assert history[3] in result.candidates and "the first bad commit is one of" in result.message


def test_no_change_between_good_and_bad_ends_the_bisect(tmp_path, history):
    speeds = {sha: 10.0 for sha in history}
    result = b.run_bisect(request(tmp_path, history[0], history[8], budget="300", threshold_pct=20),
                          runner(speeds, {history[i]: 0.01 for i in range(9)}, []))
    assert result.status == "no change" and result.exit_code == 1 and "equivalent within ±20%" in result.message


@pytest.mark.parametrize("good, bad, match", [
    ("nope", "main", r"^--good nope: not a revision of .* \(allowed: a commit, tag or branch"),
    ("main~8", "no-such-tag", r"^--bad no-such-tag: not a revision of"),
    ("main", "main~8", r"^--good main: not an ancestor of --bad main~8 \(allowed: an older commit"),
    ("main", "main", r"^--bad main: the same commit as --good main"),
    ("--all", "main", r"^--good --all: not a revision"),
])
def test_bad_revisions_are_refused_before_any_build(tmp_path, history, good, bad, match):
    with pytest.raises(UserError, match=match) as caught:
        request(tmp_path, good, bad)
    assert "\n" not in str(caught.value)
    assert built_commits(tmp_path) == [] and not (tmp_path / "b.db").exists()


def test_bad_recipe_and_budget_are_refused(tmp_path, history):
    loaded = load_profile(profile(tmp_path), cpus=CPUS)
    with pytest.raises(UserError, match=r"^--recipe dpdk: not a recipe of vnf \(allowed: fwd\)"):
        bisect_request.check_request(loaded, "dpdk", "main~8", "main", db=tmp_path / "b.db")
    with pytest.raises(KnobError, match=r"^--budget 10: less than the 33 trials"):
        bisect_request.check_request(loaded, "fwd", "main~8", "main", "10", db=tmp_path / "b.db")
    with pytest.raises(KnobError, match=r"^--budget soon: not a trial count or a duration"):
        bisect_request.check_request(loaded, "fwd", "main~8", "main", "soon", db=tmp_path / "b.db")


def test_the_course_halves_steps_around_skips_and_names_the_range():
    commits = [f"{i:040x}" for i in range(1, 9)]  # 8 commits after good; the last is bad
    course = b.Course(commits)
    assert course.next() == commits[3]  # between -1 and 7: the middle, 3
    course.verdicts[commits[3]] = b.SKIP
    assert course.next() == commits[2]  # the nearest untested, the earlier of two
    course.verdicts[commits[2]] = b.GOOD
    assert course.bounds() == (2, 7) and course.next() == commits[4]
    course.verdicts[commits[4]] = b.BAD
    assert course.next() is None
    assert course.answer() == (None, None, [commits[3], commits[4]])  # the skipped one could be it
    course.verdicts[commits[3]] = b.GOOD
    assert course.answer() == (commits[4], commits[3], [])
    assert b.Course([commits[0]]).answer() == (commits[0], None, [])  # bad's parent is good


def _state(verdict: str) -> State:
    state = State(Pairing("build", "a", "b"))
    state.decision = Decision(verdict, 3, 0.05)
    return state


@pytest.mark.parametrize("g, bb, direction, expected", [
    ("equivalent", "open", "worse", "good"), ("open", "better", "worse", "good"),
    ("worse", "open", "worse", "bad"), ("open", "equivalent", "worse", "bad"),
    ("worse", "better", "worse", "bad"),  # partial: in between
    ("equivalent", "equivalent", "worse", "cannot tell"),
    ("open", "open", "worse", None), ("better", "open", "better", "bad"), ("open", "worse", "better", "good"),
])
def test_a_commit_is_called_from_its_comparisons(g, bb, direction, expected):
    verdict, reason = b.classify({"good": _state(g), "bad": _state(bb)}, direction)
    assert verdict == expected and (reason or expected is None)
    assert b.classify({"good": _state("worse"), "bad": _state("better")}, None) == (None, "")
