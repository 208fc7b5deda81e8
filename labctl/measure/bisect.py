"""``labctl bisect PROFILE --recipe NAME --good REV --bad REV --budget 30m``: which commit changed the number.

The commits are ``git rev-list --first-parent good..bad`` (oldest first, ``bad`` last): merges are one
step each, as ``git bisect --first-parent`` walks them. Every commit is a build made by the recipe
(:mod:`labctl.lab.recipes`: cached by commit, recipe and environment), and every measured step is a run
of the store measured like ``labctl sweep --until decided`` (:mod:`labctl.measure.until`,
:mod:`labctl.analysis.sequential`): blocks of the three builds (good, the step's commit, bad; A B C then
C B A), within-block paired differences, the error spent across the looks, the same verdicts. A step has
three comparisons: the commit against good, the commit against bad, and bad against good (which says
which way the change went: its *direction*, worse or better, fixed by the first step that decides it).

A step's commit is called (:func:`classify`):

- **bad** when it differs from good in the change's direction, or is equivalent to bad (within the
  threshold); also when it differs from both in the middle (a change that began there: *partial*);
- **good** when it is equivalent to good, or differs from bad against the change's direction;
- otherwise the step goes on, block by block, until its share of the budget is spent: then it is
  **cannot tell**, with the intervals it saw, never a guess. Such a commit is stepped around like a
  commit that did not build (``git bisect skip``): the search goes on with the commits next to it.

A step stops as soon as its commit is called, not when all three comparisons are decided (an
equivalence takes many more pairs than a 50% difference). The budget (a duration or a trial count,
measuring only: builds come on top) is shared among the steps still expected
(``ceil(log2(commits left + 1))``) and the final pair; each step gets at least its first round, and plans
its looks over at most ``--step-blocks`` blocks (:data:`STEP_BLOCKS`) within its share, so that a large
change stops at the first looks.

The end: the first bad commit is the bad one whose first parent was found good, and it is measured once
more against that parent (the *final pair*: its change and interval, from its own blocks). When only
skipped or undecided commits are left between the last good and the first bad one, the answer is the
range, as ``git bisect`` says "the first bad commit could be any of". Good against bad equivalent: no
change to look for. Good against bad undecided in the first step's share: cannot tell.

Every step is stored the moment it is decided (:mod:`labctl.results.bisects`); run again with the same
profile, recipe, range, metric and threshold, an unfinished bisect resumes: its steps are read back, no
commit is measured twice, and no build is rebuilt (the recipe cache; a commit that did not build is a
stored skip). A step killed while measuring is taken up in its own run: its course is replayed over the
trials that run holds (the same blocks in the same order, so the looks see what they saw), and only the
trials it lacks are measured.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from labctl import faults
from labctl.errors import BuildError
from labctl.events import OnEvent, notify
from labctl.lab import recipes
from labctl.measure.bisect_request import FIRST_BLOCKS, Request, expected_steps, label
from labctl.measure.labs import LabSession, check_measurable
from labctl.measure.session import base_data, open_session
from labctl.measure.until import Budget, Pairing, State, Until, metric_value, run_until
from labctl.profile.knobs import with_knobs
from labctl.profile.load import LoadedProfile, validate_data
from labctl.results import bisects as records
from labctl.results.metrics import default_metric, lower_is_better
from labctl.results.record import TrialRecord
from labctl.results.store import Store

#: the step's verdicts on its commit
GOOD, BAD, SKIP, UNDECIDED = "good", "bad", "skip", "cannot tell"
OPPOSITE = {"worse": "better", "better": "worse"}

TrialRunner = Callable[..., TrialRecord]  # (loaded, repeat_index, on_event, session=LabSession), as sweep's


def _default_runner(loaded: LoadedProfile, repeat_index: int, on_event: OnEvent | None,
                    session: LabSession | None = None) -> TrialRecord:
    from labctl.measure.trial import run_trial

    return run_trial(loaded, repeat_index=repeat_index, on_event=on_event, session=session)


# --- the search over the commits (pure) ---------------------------------------------------------------

@dataclass
class Course:
    """Where the search stands: each commit's verdict so far; ``commits`` oldest first, bad last (the
    good commit is position -1)."""

    commits: list[str]
    verdicts: dict[str, str] = field(default_factory=dict)

    def bounds(self) -> tuple[int, int]:
        """(the last position known good, the first known bad); -1 is the good commit itself."""
        low = max([i for i, c in enumerate(self.commits) if self.verdicts.get(c) == GOOD], default=-1)
        high = min([i for i, c in enumerate(self.commits) if self.verdicts.get(c) == BAD and i > low],
                   default=len(self.commits) - 1)
        return low, high

    def untested(self) -> list[int]:
        low, high = self.bounds()
        return [i for i in range(low + 1, high) if self.commits[i] not in self.verdicts]

    def next(self) -> str | None:
        """The untested commit nearest the middle of the open range (the earlier one of two), or None."""
        low, high = self.bounds()
        left = self.untested()
        if not left:
            return None
        middle = (low + high) / 2.0
        return self.commits[min(left, key=lambda i: (abs(i - middle), i))]

    def answer(self) -> tuple[str | None, str | None, list[str]]:
        """(first bad, its parent, []) when pinned; else (None, None, the commits it could be)."""
        low, high = self.bounds()
        between = self.commits[low + 1:high]
        parent = self.commits[low] if low >= 0 else None  # None: the good commit
        if not between:
            return self.commits[high], parent, []
        return None, None, [*between, self.commits[high]]


def classify(states: dict[str, State], direction: str | None) -> tuple[str | None, str]:
    """A step's verdict on its commit from its comparisons (``good``: commit vs good; ``bad``: commit vs
    bad) and the change's direction; (None, '') while it cannot be called yet (module docstring)."""
    if direction is None:
        return None, ""
    opposite = OPPOSITE[direction]
    g = _verdict(states.get("good"))
    b = _verdict(states.get("bad"))
    looks_bad = g == direction or b in ("equivalent", direction)
    looks_good = g in ("equivalent", opposite) or b == opposite
    if looks_bad and looks_good:
        if g == direction and b == opposite:
            return BAD, "partial: it differs from good and from bad, in between (the change began here)"
        return UNDECIDED, "equivalent to both good and bad: the change is too close to the threshold to place"
    if looks_bad:
        return BAD, "differs from good as bad does" if g == direction else "equivalent to bad"
    if looks_good:
        return GOOD, "equivalent to good" if g == "equivalent" else "differs from bad, on good's side"
    return None, ""


def _verdict(state: State | None) -> str:
    return state.decision.verdict if state is not None and state.decision is not None else "open"


# --- one step's measuring -----------------------------------------------------------------------------

@dataclass
class StepCourse(Until):
    """An until-decided course over one step's builds with the step's own comparisons (``comparisons``,
    by name) and its own end: it stops when ``settled`` says so, not when every comparison is decided."""

    comparisons: dict[str, Pairing] = field(default_factory=dict)
    settled: Callable[["StepCourse"], bool] | None = None
    horizon: int | None = None  # the most blocks its looks are planned over (its share may allow more)

    def _plan_blocks(self, max_blocks: int) -> None:
        super()._plan_blocks(max_blocks if self.horizon is None else min(max_blocks, self.horizon))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.states = [State(p) for p in self.comparisons.values()]

    def by_name(self) -> dict[str, State]:
        return dict(zip(self.comparisons, self.states))

    def _done(self) -> bool:
        return self.settled is not None and self.settled(self)

    @property
    def open(self) -> list[State]:
        return [] if self._done() else super().open

    @property
    def measuring(self) -> list[State]:
        return [] if self._done() else super().measuring


@dataclass
class Measured:
    run_id: int
    course: StepCourse
    summary: dict[str, Any]
    medians: dict[str, float | None]
    trials: int
    measure_s: float
    replayed: int = 0  # trials a killed run of the step had measured, taken again


def _step_data(req: Request, shas: list[str]) -> dict[str, Any]:
    """The profile a step's trials start from: the builds of ``shas`` made by the recipe, no sweep."""
    data = base_data(req.loaded)
    data["builds"] = {label(sha): {"recipe": req.recipe, "rev": sha} for sha in shas}
    data["build"] = None
    return data


def _kept_trials(db: Path, run_id: int) -> dict[tuple[int, str], TrialRecord]:
    """A killed step's finished trials, by (block, build): what its course replays instead of measuring."""
    kept: dict[tuple[int, str], TrialRecord] = {}
    with Store(db) as store:
        for record in store.trials(run_id, status=None):
            block = record.details.get("block")
            if record.status in ("ok", "failed") and isinstance(block, int):
                kept.setdefault((block, str(record.config.get("build"))), record)
    return kept


def measure_builds(req: Request, shas: list[str], comparisons: dict[str, Pairing], budget: Budget,
                   settled: Callable[[StepCourse], bool] | None, runner: TrialRunner, on_event: OnEvent | None,
                   wait: bool, info: dict[str, Any], resume_run: int | None = None,
                   on_run: Callable[[int], None] | None = None) -> Measured:
    """One step's run: blocks of the builds of ``shas`` until ``settled`` (or the comparisons decided, or
    ``budget`` spent), every trial stored in a new run of the store (its info: ``bisect``, ``until``), whose
    id ``on_run`` is told. ``resume_run``: the run of the same step that was killed; it is reopened and its
    course replayed: a trial it holds (same block, same build) is taken as measured (its time counted
    against the budget), only the rest is measured, and plan entries it already has are not added again."""
    profile = req.loaded.profile
    kept = _kept_trials(req.db, resume_run) if resume_run is not None else {}
    replayed = {"s": 0.0, "trials": 0}
    base = _step_data(req, shas)
    configs = [{"build": label(sha)} for sha in shas]
    course = StepCourse({"build": [c["build"] for c in configs]}, configs, budget, req.threshold_pct, req.metric,
                        order="interleaved", first_blocks=FIRST_BLOCKS, comparisons=comparisons, settled=settled,
                        horizon=req.step_blocks)
    if req.metric is not None:
        course.lower_is_better = lower_is_better(req.metric)
    collected: list[TrialRecord] = []
    started = time.monotonic()
    with open_session(req.db, profile.name, base, [], on_event=on_event, run=resume_run) as session, \
            LabSession(profile.name, profile.libvirt_uri, on_event, wait) as labs:
        session.store.update_run_info(session.run_id, order="interleaved", blocked=True, bisect=info)
        if on_run is not None:
            on_run(session.run_id)
        planned = {entry["seq"] for entry in session.store.plan(session.run_id)}

        def measure(entry: dict[str, Any]) -> TrialRecord:
            record = kept.pop((entry["block"], entry["config"]["build"]), None)
            if record is not None:  # measured before the step was killed
                if record.started_at is not None and record.finished_at is not None:
                    replayed["s"] += record.finished_at - record.started_at
                replayed["trials"] += 1
                collected.append(record)
                return record
            trial_profile = validate_data(with_knobs(copy.deepcopy(base), entry["config"]), req.loaded.source)
            with session.trial(entry["seq"]):
                record = runner(trial_profile, entry["repeat_index"], on_event, session=labs)
            record.details.update(block=entry["block"], block_position=entry["position"])
            session.add(record, entry["seq"], entry)
            collected.append(record)
            return record

        def extend(entries: list[dict[str, Any]]) -> None:
            new = [e for e in entries if e["seq"] not in planned]
            if new:
                session.store.extend_plan(session.run_id, new)
                planned.update(e["seq"] for e in new)
                session.total += len(new)

        summary = run_until(course, measure, extend, [], default_metric, lower_is_better, on_event, profile.name,
                            clock=lambda: time.monotonic() + replayed["s"])
        session.store.update_run_info(session.run_id, until=summary)
        run_id = session.run_id
    metric = course.metric or "mpps"
    medians = {}
    for config in configs:
        values = [v for r in collected if r.config.get("build") == config["build"]
                  for v in [metric_value(r, metric)] if v is not None]
        medians[config["build"]] = statistics.median(values) if values else None
    return Measured(run_id, course, summary, medians, len(collected),
                    round(time.monotonic() - started + replayed["s"], 1), replayed["trials"])


# --- the bisect ---------------------------------------------------------------------------------------

@dataclass
class BisectResult:
    bisect_id: int
    status: str  # found, narrowed, no change, cannot tell, budget
    message: str
    profile: str
    recipe: str
    repo: str
    good: str
    bad: str
    good_rev: str
    bad_rev: str
    metric: str | None
    threshold_pct: float
    budget: str
    direction: str | None
    commits: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    first_bad: str | None = None
    first_bad_subject: str | None = None
    parent: str | None = None
    final: dict[str, Any] | None = None
    candidates: list[str] = field(default_factory=list)
    resumed: bool = False
    wall_s: float = 0.0
    build_s: float = 0.0
    measure_s: float = 0.0
    trials: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0: the first bad commit was found; 1: it was not pinned (a range, no change, cannot tell)."""
        return 0 if self.status == "found" else 1

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "exit_code": self.exit_code}


class Bisect:
    """One bisect's course over the store: builds, steps, the answer."""

    def __init__(self, req: Request, store: Store, bisect_id: int, runner: TrialRunner, on_event: OnEvent | None,
                 wait: bool):
        self.req, self.store, self.id = req, store, bisect_id
        self.runner, self.on_event, self.wait = runner, on_event, wait
        self.course = Course(req.commits)
        self.steps = records.steps(store, bisect_id)
        info = records.bisect(store, bisect_id)["info"]
        self.direction: str | None = info.get("direction")
        self.metric: str | None = req.metric or info.get("metric")
        self.build_s = float(info.get("build_s", 0.0))
        self.in_flight: dict[str, Any] | None = info.get("in_flight")  # the step measuring when it was killed
        for step in self.steps:
            if step.kind in ("measure", "skip"):
                self.course.verdicts[step.sha] = step.verdict
        self.status = ""
        self.message = ""

    # progress and records

    def note(self, message: str) -> None:
        notify(self.on_event, "note", lab=self.req.loaded.profile.name, message=f"bisect: {message}")

    def spent(self) -> tuple[float, int]:
        """(seconds, trials) the stored steps measured."""
        return (sum(float(s.detail.get("measure_s", 0.0)) for s in self.steps),
                sum(int(s.detail.get("trials", 0)) for s in self.steps))

    def add_step(self, sha: str, kind: str, verdict: str, run_id: int | None, detail: dict[str, Any]) -> None:
        step = records.add_step(self.store, self.id, sha, kind, verdict, run_id, detail)
        self.steps.append(step)
        if self.in_flight is not None:
            self.in_flight = None
            records.update_info(self.store, self.id, in_flight=None)
        faults.point("bisect.step")

    def started(self, sha: str, kind: str) -> Callable[[int], None]:
        """What a step tells the bisect once its run exists: the run in flight, for a resume to take up."""
        def note_run(run_id: int) -> None:
            self.in_flight = {"run": run_id, "commit": sha, "kind": kind}
            records.update_info(self.store, self.id, in_flight=self.in_flight)
        return note_run

    def killed_run(self, sha: str, kind: str) -> int | None:
        """The run of this step that a killed bisect left (its finished trials are taken again), or None."""
        flight = self.in_flight
        if not flight or flight.get("commit") != sha or flight.get("kind") != kind:
            return None
        run = next((r for r in self.store.runs() if r["id"] == flight.get("run")), None)
        if run is None:
            return None
        self.note(f"step on {sha[:12]}: taking up run {run['id']}, which it was measuring when it was stopped "
                  f"({run['ok'] + run['failed']} trials done)")
        return int(run["id"])

    def build(self, sha: str) -> recipes.Built:
        built = recipes.build(replace(self.req.spec, rev=sha), sha, progress=self.note)
        if built.built_now:
            self.build_s += float(built.manifest.get("build_s", 0.0))
            records.update_info(self.store, self.id, build_s=round(self.build_s, 1))
        return built

    # the budget

    def share(self, steps_left: int) -> Budget | None:
        """One step's share of what is left of the budget (None: nothing is left)."""
        seconds, trials = self.spent()
        budget = self.req.budget
        if budget.trials is not None:
            left = budget.trials - trials
            least = FIRST_BLOCKS * 3
            return Budget(trials=max(left // max(steps_left, 1), least)) if left >= least else None
        left_s = (budget.seconds or 0.0) - seconds
        return Budget(seconds=left_s / max(steps_left, 1)) if left_s > 0 else None

    # the steps

    def run(self) -> None:
        req = self.req
        for sha in (req.good, req.bad):
            self.build(sha)  # a good or bad commit that does not build is the bisect's end: BuildError
        ends = _step_data(req, [req.good, req.bad])
        ends.update(build=label(req.good), sweep={"build": [label(req.good), label(req.bad)]})
        check_measurable(validate_data(ends, req.loaded.source).profile)  # e.g. a guest's appliance carries them
        while not self.status:
            sha = self.course.next()
            if sha is None:
                break
            low, high = self.course.bounds()
            try:
                built = self.build(sha)
            except BuildError as exc:
                self.note(f"{sha[:12]} does not build: skipped ({exc})")
                self.course.verdicts[sha] = SKIP
                self.add_step(sha, "skip", SKIP, None, {"log": exc.log, "error": str(exc),
                                                        "subject": req.subjects.get(sha, "")})
                continue
            share = self.share(expected_steps(len(self.course.untested())) + 1)
            if share is None:
                self.status = "budget"
                break
            self.measure_step(sha, built, low, high, share)

    def measure_step(self, sha: str, built: recipes.Built, low: int, high: int, share: Budget) -> None:
        req = self.req
        good, bad = label(req.good), label(req.bad)
        comparisons = {"good": Pairing("build", good, label(sha)), "bad": Pairing("build", bad, label(sha)),
                       "change": Pairing("build", good, bad)}
        number = sum(1 for s in self.steps if s.kind == "measure") + 1
        left = len(self.course.untested())
        shown = f"{share.trials} trials" if share.trials is not None else f"{share.seconds or 0:.0f} s"
        self.note(f"step {number}: {sha[:12]} {req.subjects.get(sha, '')!r} against good {good} and bad {bad} "
                  f"({left} untested commits left; share {shown})")

        def settled(course: StepCourse) -> bool:
            states = course.by_name()
            change = _verdict(states["change"])
            if self.direction is None and change in ("equivalent", "refused"):
                return True
            return classify(states, self.direction or (change if change in OPPOSITE else None))[0] is not None

        measured = measure_builds(req, [req.good, sha, req.bad], comparisons, share, settled, self.runner,
                                  self.on_event, self.wait, {"bisect": self.id, "step": number, "commit": sha},
                                  self.killed_run(sha, "measure"), self.started(sha, "measure"))
        if self.metric is None:
            self.metric = measured.course.metric
            records.update_info(self.store, self.id, metric=self.metric)
        states = measured.course.by_name()
        change = _verdict(states["change"])
        if self.direction is None and change in OPPOSITE:
            self.direction = change
            records.update_info(self.store, self.id, direction=change)
        verdict, reason = classify(states, self.direction)
        verdict = verdict or UNDECIDED
        bounds = (req.commits[low] if low >= 0 else req.good, req.commits[high])
        if verdict == UNDECIDED and not reason:
            reason = "undecided within its share of the budget"
        detail = {"number": number, "commit": sha, "subject": req.subjects.get(sha, ""), "between": list(bounds),
                  "reason": reason, "comparisons": {k: s.to_dict() for k, s in states.items()},
                  "medians": measured.medians, "stop": measured.summary.get("stop"), "looks": measured.course.look,
                  "trials": measured.trials, "measure_s": measured.measure_s, "share": shown,
                  "replayed": measured.replayed,
                  "built_now": built.built_now, "build_s": built.manifest.get("build_s") if built.built_now else 0.0}
        self.course.verdicts[sha] = verdict
        self.add_step(sha, "measure", verdict, measured.run_id, detail)
        self.note(describe_step(detail, verdict))
        if self.direction is None:
            if change == "equivalent":
                self.status = "no change"
                self.message = (f"good {req.good[:12]} and bad {req.bad[:12]} are equivalent within "
                                f"±{req.threshold_pct:g}%: no change to look for ({interval(states['change'].to_dict())})")
            else:
                self.status = "cannot tell"
                self.message = (f"good {req.good[:12]} against bad {req.bad[:12]}: cannot tell within the first step's "
                                f"share of the budget ({interval(states['change'].to_dict())})")

    def final_pair(self, first_bad: str, parent: str) -> dict[str, Any]:
        """The first bad commit measured once more against its parent: its change and interval."""
        done = next((s for s in self.steps if s.kind == "final" and s.sha == first_bad), None)
        if done is not None:
            return done.detail
        seconds, trials = self.spent()
        budget = self.req.budget
        share = Budget(trials=max(budget.trials - trials, FIRST_BLOCKS * 2)) if budget.trials is not None else \
            Budget(seconds=max((budget.seconds or 0.0) - seconds, 1.0))
        self.note(f"final pair: {first_bad[:12]} against its parent {parent[:12]}")
        comparisons = {"pair": Pairing("build", label(parent), label(first_bad))}
        measured = measure_builds(self.req, [parent, first_bad], comparisons, share, None, self.runner, self.on_event,
                                  self.wait, {"bisect": self.id, "final": first_bad}, self.killed_run(first_bad, "final"),
                                  self.started(first_bad, "final"))
        state = measured.course.by_name()["pair"].to_dict()
        detail = {"commit": first_bad, "parent": parent, "comparison": state, "medians": measured.medians,
                  "trials": measured.trials, "measure_s": measured.measure_s, "stop": measured.summary.get("stop")}
        self.add_step(first_bad, "final", state["verdict"], measured.run_id, detail)
        return detail

    def result(self, resumed: bool, started: float) -> BisectResult:
        req = self.req
        first_bad, parent, candidates = self.course.answer()
        final = None
        status, message = self.status, self.message
        if not status and first_bad is not None:
            parent = parent or req.good
            final = self.final_pair(first_bad, parent)
            status = "found"
            message = (f"first bad commit: {first_bad} {req.subjects.get(first_bad, '')!r}; against its parent "
                       f"{parent[:12]}: {final_text(final)}")
        elif not status or status == "budget":
            low, high = self.course.bounds()
            lo = req.commits[low] if low >= 0 else req.good
            status = status or "narrowed"
            rest = candidates or req.commits[low + 1:high + 1]
            why = "the budget is spent" if status == "budget" else "only skipped or undecided commits are left"
            message = (f"the first bad commit is one of {len(rest)} after {lo[:12]}: {', '.join(c[:12] for c in rest)} "
                       f"({why})")
            candidates = rest
        seconds, trials = self.spent()
        commits = [{"sha": c, "subject": req.subjects.get(c, ""), "verdict": self.course.verdicts.get(c)}
                   for c in req.commits]
        return BisectResult(
            self.id, status, message, req.loaded.profile.name, req.recipe, req.spec.repo, req.good, req.bad,
            req.good_rev, req.bad_rev, self.metric, req.threshold_pct, req.budget_text, self.direction, commits,
            [s.to_dict() for s in records.steps(self.store, self.id)], first_bad if status == "found" else None,
            req.subjects.get(first_bad or "") if status == "found" else None, parent if status == "found" else None,
            final, candidates, resumed, round(time.monotonic() - started, 1), round(self.build_s, 1), round(seconds, 1),
            trials, list(req.notes))


def run_bisect(req: Request, runner: TrialRunner = _default_runner, on_event: OnEvent | None = None,
               wait: bool = True) -> BisectResult:
    """Run (or resume) the bisect ``req`` describes; returns its answer (also stored with the bisect)."""
    started = time.monotonic()
    with Store(req.db) as store:
        found = records.resumable(store, req.key)
        resumed = found is not None
        if found is None:
            bisect_id = records.create(store, req.loaded.profile.name, req.recipe, req.spec.repo, req.good, req.bad,
                                       req.key, {"good_rev": req.good_rev, "bad_rev": req.bad_rev,
                                                 "budget": req.budget_text, "metric": req.metric,
                                                 "threshold_pct": req.threshold_pct, "commits": len(req.commits)})
        else:
            bisect_id = found[0]
        course = Bisect(req, store, bisect_id, runner, on_event, wait)
        for text in req.notes:
            course.note(text)
        if resumed:
            course.note(f"resuming bisect {bisect_id}: {len(course.steps)} steps stored "
                        f"({', '.join(f'{s.sha[:12]} {s.verdict}' for s in course.steps) or 'none'})")
        try:
            course.run()
            result = course.result(resumed, started)
        except BaseException:
            records.finish(store, bisect_id, "aborted")
            raise
        records.update_info(store, bisect_id, result={k: v for k, v in result.to_dict().items() if k != "steps"})
        records.finish(store, bisect_id, "finished")
    return result


# --- words --------------------------------------------------------------------------------------------

def interval(state: dict[str, Any]) -> str:
    """A comparison's change and interval as text: ``-48.2% [-51.0, -45.3]`` (or what is missing)."""
    if state.get("change_pct") is None:
        return f"{state.get('verdict', 'open')}, no interval yet ({state.get('reason') or 'too few pairs'})"
    return f"{state['change_pct']:+.1f}% [{state['low_pct']:+.1f}, {state['high_pct']:+.1f}]"


def final_text(final: dict[str, Any]) -> str:
    state = final["comparison"]
    confidence = f", confidence {state['confidence'] * 100:.2f}%" if state.get("confidence") is not None and \
        state["verdict"] in ("better", "worse", "equivalent") else ""
    return f"{state['verdict']} {interval(state)} after {state['trials']} trials{confidence}"


def describe_step(detail: dict[str, Any], verdict: str) -> str:
    """One line per measured step: ``step 2: 1a2b3c4d5e6f good (vs good +0.4% [...], vs bad +95.1% [...])``."""
    comparisons = detail["comparisons"]
    seen = f"vs good {interval(comparisons['good'])}, vs bad {interval(comparisons['bad'])}"
    if verdict == UNDECIDED:
        low, high = detail["between"]
        return (f"step {detail['number']}: {detail['commit'][:12]} between {low[:12]} and {high[:12]}: cannot tell "
                f"({seen}; {detail['reason']}) after {detail['trials']} trials")
    return (f"step {detail['number']}: {detail['commit'][:12]} {verdict} ({detail['reason']}; {seen}) after "
            f"{detail['trials']} trials, {detail['measure_s']:.0f} s")
