"""A bisect's request: ``labctl bisect``'s arguments checked, in the order the command line gives them, before
anything is built or measured (:func:`check_request`: a bad one is a one-line UserError, exit 2), and what the
search is planned with: the commits along bad's first parents, the budget's least trials, the blocks of a
step. :mod:`labctl.measure.bisect` runs the search the request describes."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labctl.errors import KnobError, UserError
from labctl.gitrepo import commit_of, first_parent_range, is_ancestor, subjects
from labctl.lab import recipes
from labctl.measure.session import base_data
from labctl.measure.until import Budget, parse_budget
from labctl.profile.load import LoadedProfile
from labctl.results.metrics import DEFAULT_THRESHOLD_PCT, resolve
from labctl.results.store import Store

DEFAULT_BUDGET = "30m"
#: blocks of a step's first round (the fewest pairs a look judges: :data:`labctl.analysis.sequential.MIN_PAIRS`)
FIRST_BLOCKS = 3
#: the most blocks a step plans its looks over (``--step-blocks``), within its share of the budget: the error
#: is spent over the information fraction, so a horizon far beyond what a large change needs makes the first
#: looks too strict to stop early (a DPDK bisect here with 30-blocks horizons took 24-64 trials a step for a
#: change of about -45% that three pairs show with a paired spread of 0.06-0.15)
STEP_BLOCKS = 8
MAX_STEP_BLOCKS = 100


def label(sha: str) -> str:
    """A commit's build name in the step runs (the ``build`` knob): its first 12 hex digits."""
    return sha[:12]


# --- the request, checked before any build ------------------------------------------------------------

@dataclass
class Request:
    loaded: LoadedProfile
    recipe: str
    spec: recipes.RecipeBuild
    good_rev: str
    bad_rev: str
    good: str
    bad: str
    commits: list[str]  # good..bad along bad's first parents, oldest first; bad is the last
    subjects: dict[str, str]
    budget: Budget
    budget_text: str
    threshold_pct: float
    metric: str | None
    db: Path
    key: str
    notes: list[str] = field(default_factory=list)
    step_blocks: int = STEP_BLOCKS


def check_request(loaded: LoadedProfile, recipe: str | None, good: str | None, bad: str | None,
                  budget: str | None = None, threshold_pct: float | None = None, metric: str | None = None,
                  db: str | Path = "labctl.db", step_blocks: int | None = None) -> Request:
    """Every argument checked, in the order the command line gives them, before anything is built or
    measured: a bad one is a one-line :class:`UserError` (exit 2) naming it and what is allowed."""
    profile = loaded.profile
    if not recipe:
        raise UserError(f"--recipe: required (allowed: {', '.join(profile.recipes) or 'none: add recipes: to the profile'})")
    if recipe not in profile.recipes:
        raise UserError(f"--recipe {recipe}: not a recipe of {profile.name} (allowed: "
                        f"{', '.join(profile.recipes) or 'none: add recipes: to the profile'})")
    spec = recipes.RecipeBuild.of(recipe, profile.recipes[recipe], "HEAD")
    shas = {}
    for option, rev in (("--good", good), ("--bad", bad)):
        if not rev:
            raise UserError(f"{option}: required (allowed: a commit, tag or branch of {spec.repo})")
        found = commit_of(spec.repo, rev)
        if found is None:
            raise UserError(f"{option} {rev[:80]}: not a revision of {spec.repo} (allowed: a commit, tag or branch "
                            "that git rev-parse resolves)")
        shas[option] = found
    if shas["--good"] == shas["--bad"]:
        raise UserError(f"--bad {bad}: the same commit as --good {good} (allowed: a later commit, where the number "
                        "had changed)")
    if not is_ancestor(spec.repo, shas["--good"], shas["--bad"]):
        raise UserError(f"--good {good}: not an ancestor of --bad {bad} (allowed: an older commit of bad's history)")
    commits = first_parent_range(spec.repo, shas["--good"], shas["--bad"])
    if not commits or commits[-1] != shas["--bad"]:
        raise UserError(f"--good {good}: no first-parent path from it to --bad {bad} (allowed: an older commit of "
                        "bad's history)")
    budget_text = budget or DEFAULT_BUDGET
    limit = parse_budget(budget_text)
    least = _least_trials(len(commits))
    if limit.trials is not None and limit.trials < least:
        raise KnobError(f"--budget {budget_text}: less than the {least} trials the first rounds of this bisect's "
                        f"steps need ({len(commits)} commits; allowed: {least} or more, or a duration such as 30m)")
    budget_text = f"{budget_text} trials" if limit.trials is not None else budget_text
    threshold = DEFAULT_THRESHOLD_PCT if threshold_pct is None else float(threshold_pct)
    if not 0 < threshold < 100:
        raise KnobError(f"--threshold {threshold:g}: out of range (allowed: above 0 and below 100 per cent)")
    if metric is not None:
        metric = resolve(metric, option="--metric")
    step_blocks = STEP_BLOCKS if step_blocks is None else step_blocks
    if not FIRST_BLOCKS <= step_blocks <= MAX_STEP_BLOCKS:
        raise KnobError(f"--step-blocks {step_blocks}: out of range (allowed: {FIRST_BLOCKS}..{MAX_STEP_BLOCKS} blocks)")
    Store.check_usable(db)
    notes = []
    if profile.sweep:
        notes.append(f"the profile's sweep ({', '.join(profile.sweep)}) is left out: a bisect measures its one "
                     "configuration")
    data = base_data(loaded)
    data.pop("builds", None)
    data.pop("build", None)
    what = {"profile": data, "recipe": asdict(spec) | {"rev": None}, "good": shas["--good"], "bad": shas["--bad"],
            "metric": metric, "threshold_pct": threshold}
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return Request(loaded, recipe, spec, good or "", bad or "", shas["--good"], shas["--bad"], commits,
                   subjects(spec.repo, [shas["--good"], *commits]), limit, budget_text, threshold, metric, Path(db),
                   key, notes, step_blocks)


def expected_steps(commits_left: int) -> int:
    """Measured steps a binary search over ``commits_left`` untested commits takes (at most)."""
    return math.ceil(math.log2(commits_left + 1)) if commits_left > 0 else 0


def _least_trials(commits: int) -> int:
    """The trials the first rounds of every expected step and the final pair take."""
    return expected_steps(max(commits - 1, 0)) * FIRST_BLOCKS * 3 + FIRST_BLOCKS * 2
