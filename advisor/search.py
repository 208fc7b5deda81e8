"""Adaptive search over a sweep space: find the fastest configuration in a fraction of the grid's trials.

``tune(space, evaluate, budget, seed)`` serves both faces of ``labctl tune``:

- live: ``evaluate(config)`` runs one real trial of the profile with ``config`` applied and returns
  its Mpps (or the :class:`~labctl.results.record.TrialRecord`; ``None`` or a failed record for a failed trial);
- replay: :class:`ReplayEvaluator` answers from recorded trials, each call drawing one of the recorded
  repeats of the chosen configuration, so a search can be judged offline against the full grid.

Method (two phases, one budget counted in trials):

1. Explore, ~70 % of the budget: Bayesian optimisation with Optuna's TPE sampler (multivariate, seeded)
   over the knobs as categorical parameters. Its first third (:data:`STARTUP_SHARE`) is a balanced
   design (every value of every knob equally often, :func:`_balanced_design`) enqueued in the study
   instead of TPE's random start, so a short start still sees every value; a grid smaller than the
   budget is measured whole, once each, first. TPE then models "good" and "bad" configurations per
   knob, which suits sweep spaces whose knobs act mostly independently, and re-proposes promising
   configurations, which repeats them. Failed trials are told to the sampler as the worst outcome.
2. Confirm, the rest: successive halving among at most :data:`RACE_SIZE` contenders: the best
   configurations measured so far (by median) interleaved with the best ones a main-effects model of
   log Mpps predicts from every trial so far (:func:`_main_effects`, ridge least squares; it may
   nominate a configuration not yet measured). Each round measures every survivor once more, then
   keeps the better half. One lucky trial of a mediocre configuration cannot win: the answer is the
   survivor with the best median of repeated trials; when even the finalists have fewer than
   :data:`labctl.analysis.statistics.MIN_TRIALS` trials (tiny budgets), the main-effects model, which pools every
   trial of each knob value, ranks the measured configurations instead.

Stopping: when the budget is spent; when the race is decided (one survivor with
:data:`labctl.analysis.statistics.MIN_TRIALS` trials); or early, when the best is clear: the leader has
:data:`labctl.analysis.statistics.MIN_TRIALS` trials or more and :func:`labctl.analysis.statistics.compare` calls it
"better" than every other contender with as many trials; or when exploration has converged (the
sampler proposed only configurations already measured :data:`CONVERGED_REPEATS` times, for
:data:`PATIENCE` steps in a row).

Determinism: the sampler, the replay draws and every tie-break depend only on ``seed``.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labctl.errors import UserError
from labctl.results.record import TrialRecord

from labctl.analysis import statistics
from advisor.knobs import knob_groups

__all__ = ["Evaluate", "Step", "SearchResult", "ReplayEvaluator", "tune", "replay", "space_from_profile",
           "CONFIRM_SHARE", "STARTUP_SHARE", "RACE_SIZE", "PATIENCE", "CONVERGED_REPEATS"]

Evaluate = Callable[[dict[str, Any]], "float | None | TrialRecord"]

#: Largest grid the main-effects model scores exhaustively to nominate race entrants.
MAX_MODEL_GRID = 100_000

#: Share of the exploration trials given to the balanced start before TPE models (its startup trials).
STARTUP_SHARE = 1 / 3

#: A grid of at most this many times the balanced start (and smaller than the budget) is measured
#: whole first: TPE would have next to nothing left to model.
COVER_FACTOR = 3

#: Share of the budget kept for the confirmation race (at least MIN_RESERVE trials from a budget of 4).
CONFIRM_SHARE = 0.3
MIN_RESERVE = 2

#: Contenders entering the confirmation race.
RACE_SIZE = 6

#: Exploration stops after this many proposals in a row of configurations measured CONVERGED_REPEATS times.
PATIENCE = 4
CONVERGED_REPEATS = 3


def _key(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


@dataclass
class Step:
    step: int
    config: dict[str, Any]
    mpps: float | None
    phase: str  # explore | confirm

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "config": self.config, "mpps": self.mpps}


@dataclass
class SearchResult:
    best_config: dict[str, Any]
    trials_used: int
    history: list[Step]
    stop_reason: str
    best_median: float | None = None
    best_n: int = 0
    records: list[TrialRecord] = field(default_factory=list)  # live trials, when evaluate returned records

    def to_dict(self) -> dict[str, Any]:
        """``{"best_config": {...}, "trials_used": N, "history": [{"step", "config", "mpps"}, ...]}``."""
        return {"best_config": self.best_config, "trials_used": self.trials_used,
                "history": [s.to_dict() for s in self.history]}


class _Observations:
    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}
        self.failed: dict[str, int] = {}
        self.configs: dict[str, dict[str, Any]] = {}
        self.first_seen: dict[str, int] = {}

    def add(self, config: dict[str, Any], value: float | None) -> None:
        key = _key(config)
        self.configs.setdefault(key, config)
        self.first_seen.setdefault(key, len(self.first_seen))
        if value is None:
            self.failed[key] = self.failed.get(key, 0) + 1
        else:
            self.values.setdefault(key, []).append(value)

    def n(self, key: str) -> int:
        return len(self.values.get(key, []))

    def median(self, key: str) -> float:
        v = self.values.get(key)
        return float(np.median(v)) if v else -math.inf

    def ranked(self) -> list[str]:
        """Measured configurations, best median first (ties: more trials, then first measured)."""
        return sorted(self.values, key=lambda k: (-self.median(k), -self.n(k), self.first_seen[k]))


def _value(result: Any, records: list[TrialRecord]) -> float | None:
    if isinstance(result, TrialRecord):
        records.append(result)
        mpps = result.metrics.mpps
        return float(mpps) if result.status == "ok" and mpps is not None and mpps > 0 else None
    if result is None:
        return None
    value = float(result)
    return value if math.isfinite(value) and value > 0 else None


def _clear_leader(obs: _Observations, contenders: list[str]) -> bool:
    """The leader has MIN_TRIALS trials and is "better" than every other contender with as many."""
    if len(contenders) < 2:
        return False
    leader = max(contenders, key=lambda k: (obs.median(k), obs.n(k)))
    if obs.n(leader) < statistics.MIN_TRIALS:
        return False
    for other in contenders:
        if other == leader:
            continue
        if obs.n(other) < statistics.MIN_TRIALS:
            return False
        delta = statistics.compare(obs.values[other], obs.values[leader], n_resamples=1000)
        if delta.verdict != "better":
            return False
    return True


def tune(
    space: dict[str, list[Any]],
    evaluate: Evaluate,
    budget: int,
    seed: int = 0,
    *,
    confirm_share: float | None = None,
    stop_when_clear: bool = True,
    on_step: Callable[[Step], None] | None = None,
) -> SearchResult:
    """Search ``space`` (knob -> list of values) for the configuration with the best median Mpps,
    spending at most ``budget`` trials of ``evaluate``. See the module docstring for the method."""
    import optuna

    if budget < 1:
        raise UserError(f"budget {budget}: a search needs at least 1 trial")
    if not space or any(not values for values in space.values()):
        raise UserError("nothing to search: the sweep space is empty (give the profile a sweep)")
    names = list(space)
    steps: list[Step] = []
    records: list[TrialRecord] = []
    obs = _Observations()

    def run(config: dict[str, Any], phase: str) -> float | None:
        value = _value(evaluate(dict(config)), records)
        obs.add(config, value)
        step = Step(len(steps) + 1, dict(config), value, phase)
        steps.append(step)
        if on_step is not None:
            on_step(step)
        return value

    grid = math.prod(len(v) for v in space.values())
    share = CONFIRM_SHARE if confirm_share is None else confirm_share
    reserve = min(budget - 1, max(MIN_RESERVE, round(share * budget))) if budget >= 4 else 0
    explore = budget - reserve
    stop_reason = "budget spent"

    optuna.logging.set_verbosity(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
        startup = max(2, min(round(STARTUP_SHARE * explore), grid))
        if explore < grid < budget and grid <= COVER_FACTOR * startup:
            # a grid barely bigger than the balanced start: measure it whole first, race with the rest
            startup = explore = grid
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, n_startup_trials=startup)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    dists = {name: optuna.distributions.CategoricalDistribution(list(range(len(space[name])))) for name in names}
    for point in _balanced_design([len(space[n]) for n in names], min(startup, explore), seed):
        study.enqueue_trial(dict(zip(names, point)))
    converged = 0
    while len(steps) < explore:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=optuna.exceptions.ExperimentalWarning)
            trial = study.ask(dists)
        config = {name: space[name][trial.params[name]] for name in names}
        seen = obs.n(_key(config))
        value = run(config, "explore")
        study.tell(trial, value if value is not None else 0.0)
        converged = converged + 1 if seen >= CONVERGED_REPEATS else 0
        if converged >= PATIENCE:
            stop_reason = "exploration converged"
            break
        if stop_when_clear and _clear_leader(obs, obs.ranked()[:RACE_SIZE]):
            stop_reason = "best is clear"
            break

    # confirmation race: successive halving among the best seen so far and the model's nominees
    contenders = _contenders(space, obs)
    if stop_reason != "best is clear":
        while len(steps) < budget and contenders:
            for key in sorted(contenders, key=lambda k: (obs.n(k), -obs.median(k))):
                if len(steps) >= budget:
                    break
                run(obs.configs[key], "confirm")
            if len(steps) >= budget:
                break
            if stop_when_clear and _clear_leader(obs, contenders):
                stop_reason = "best is clear"
                break
            if len(contenders) == 1:
                if obs.n(contenders[0]) >= statistics.MIN_TRIALS:
                    stop_reason = "race decided"
                    break
                continue
            keep = max(1, math.ceil(len(contenders) / 2))
            contenders = sorted(contenders, key=lambda k: (-obs.median(k), -obs.n(k), obs.first_seen[k]))[:keep]
        if len(steps) >= budget and stop_reason not in ("best is clear", "race decided"):
            stop_reason = "budget spent"

    if not obs.values:
        best_key = next(iter(obs.configs))
        return SearchResult(obs.configs[best_key], len(steps), steps, "every trial failed", None, 0, records)
    pool = [k for k in (contenders or obs.ranked()) if obs.n(k)] or obs.ranked()
    most = max(obs.n(k) for k in pool)
    finalists = [k for k in pool if obs.n(k) >= min(most, statistics.MIN_TRIALS)]
    model = _main_effects(space, obs) if most < statistics.MIN_TRIALS else None
    if model is not None:
        # too few repeats for medians to rank: rank every measured configuration by the main-effects
        # model, which pools all trials of each knob value
        best_key = max(obs.ranked(), key=lambda k: (model(obs.configs[k]), obs.median(k)))
    else:
        best_key = max(finalists, key=lambda k: (obs.median(k), obs.n(k), -obs.first_seen[k]))
    return SearchResult(obs.configs[best_key], len(steps), steps, stop_reason, obs.median(best_key),
                        obs.n(best_key), records)


def _balanced_design(sizes: list[int], m: int, seed: int) -> list[tuple[int, ...]]:
    """``m`` distinct points of the grid ``sizes`` (value indices) whose every knob takes its values
    equally often (a Latin-hypercube design for categorical knobs): the sampler's random start, made
    balanced so that a short start still sees every value of every knob. The whole grid, shuffled,
    when ``m`` reaches its size."""
    rng = np.random.default_rng([seed, 1])
    total = math.prod(sizes)
    if m >= total:
        points = list(itertools.product(*(range(n) for n in sizes)))
        return [points[i] for i in rng.permutation(total)]
    out: list[tuple[int, ...]] = []
    seen: set[tuple[int, ...]] = set()
    columns = [np.concatenate([rng.permutation(n) for _ in range(-(-m // n) + 1)]) for n in sizes]
    for i in range(m):
        point = tuple(int(c[i]) for c in columns)
        tries = 0
        while point in seen and tries < 50:  # a repeat: pair the values differently
            j = int(rng.integers(0, len(sizes)))
            point = point[:j] + (int(rng.integers(0, sizes[j])),) + point[j + 1:]
            tries += 1
        if point not in seen:
            seen.add(point)
            out.append(point)
    return out


def _main_effects(space: dict[str, list[Any]], obs: _Observations) -> Callable[[dict[str, Any]], float] | None:
    """A main-effects model of log Mpps (one term per knob value, ridge-regularised least squares)
    fitted to every successful trial so far; None with too few trials to fit."""
    names = list(space)
    columns = {(name, i): c for c, (name, i) in enumerate((n, i) for n in names for i in range(len(space[n])))}
    index = {name: {_key({"v": v}): i for i, v in enumerate(space[name])} for name in names}
    rows, ys = [], []
    for key, values in obs.values.items():
        config = obs.configs[key]
        row = np.zeros(len(columns))
        for name in names:
            row[columns[(name, index[name][_key({"v": config[name]})])]] = 1.0
        for v in values:
            rows.append(row)
            ys.append(math.log(v))
    if len(ys) < len(names) + 2:
        return None
    x, y = np.array(rows), np.array(ys)
    mean = float(y.mean())
    ridge = 0.5  # shrinks rarely seen values toward the mean
    coef = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ (y - mean))

    def predict(config: dict[str, Any]) -> float:
        return mean + sum(coef[columns[(n, index[n][_key({"v": config[n]})])]] for n in names)

    return predict


def _contenders(space: dict[str, list[Any]], obs: _Observations) -> list[str]:
    """Race entrants: the best measured configurations by median, and the best configurations the
    main-effects model predicts (measured or not), at most RACE_SIZE, interleaved."""
    measured = obs.ranked()
    model = _main_effects(space, obs)
    grid = math.prod(len(v) for v in space.values())
    nominated: list[str] = []
    if model is not None and grid <= MAX_MODEL_GRID:
        names = list(space)
        configs = [dict(zip(names, values)) for values in itertools.product(*(space[n] for n in names))]
        scored = sorted(configs, key=lambda c: -model(c))
        for config in scored[:RACE_SIZE]:
            key = _key(config)
            obs.configs.setdefault(key, config)
            obs.first_seen.setdefault(key, len(obs.first_seen))
            nominated.append(key)
    out: list[str] = []
    for pair in itertools.zip_longest(measured[:RACE_SIZE], nominated):
        for key in pair:
            if key is not None and key not in out and len(out) < RACE_SIZE:
                out.append(key)
    return out


# --------------------------------------------------------------------------------------------------
# replay


class ReplayEvaluator:
    """Answers ``evaluate(config)`` from recorded trials: each call draws one recorded repeat of the
    configuration (a shuffled deck per configuration, reshuffled when used up, seeded), returning its
    Mpps, or None for a failed repeat or a configuration that was never recorded.

    ``space`` is the recorded sweep space (:func:`advisor.knobs.knob_space`): tuning knob ->
    values; NIC fields set alike on every NIC appear as ``guest.nics.*.FIELD`` and pinning layouts as
    ``guest.pinning`` dicts. Trials that differ in a condition (packet size, ...) or environment (host)
    cannot be replayed as one grid: UserError."""

    def __init__(self, records: Iterable[TrialRecord], seed: int = 0):
        self.records = list(records)
        if not self.records:
            raise UserError("no recorded trials to replay")
        dims = knob_groups(self.records)
        mixed = [d.name for d in dims if not d.tunable]
        if mixed:
            raise UserError(f"the recorded trials differ in {', '.join(mixed)}: replay one value at a time "
                            "(a search compares tuning knobs under one workload on one host)")
        self.knobs = [d for d in dims if d.tunable]
        self.space: dict[str, list[Any]] = {}
        self._by_key: dict[str, list[TrialRecord]] = {}
        for r in self.records:
            config = self.point(r)
            for knob in self.knobs:
                values = self.space.setdefault(knob.name, [])
                if config[knob.name] not in values:
                    values.append(config[knob.name])
            self._by_key.setdefault(_key(config), []).append(r)
        if not self.space:
            raise UserError("the recorded trials all have one configuration: there is nothing to search")
        self._rng = np.random.default_rng(seed)
        self._decks: dict[str, list[int]] = {}
        self.calls = 0

    def point(self, record: TrialRecord) -> dict[str, Any]:
        """The search configuration (knob -> value) of one recorded trial."""
        return {k.name: k.json_value(k.value_of(record.config, record.env)) for k in self.knobs}

    def __call__(self, config: dict[str, Any]) -> float | None:
        self.calls += 1
        key = _key(config)
        trials = self._by_key.get(key)
        if not trials:
            return None
        deck = self._decks.get(key)
        if not deck:
            deck = list(self._rng.permutation(len(trials)))
            self._decks[key] = deck
        record = trials[int(deck.pop())]
        mpps = record.metrics.mpps
        if record.status != "ok" or mpps is None or mpps <= 0:
            return None
        return float(mpps)

    @property
    def grid_trials(self) -> int:
        """Trials in the recorded grid (every status)."""
        return len(self.records)

    def grid_medians(self) -> dict[str, float]:
        """Median Mpps of the successful trials of every recorded configuration (key: JSON of the config)."""
        out = {}
        for key, trials in self._by_key.items():
            values = [t.metrics.mpps for t in trials if t.status == "ok" and t.metrics.mpps]
            if values:
                out[key] = float(np.median(values))
        return out

    def true_median(self, config: dict[str, Any]) -> float | None:
        return self.grid_medians().get(_key(config))

    def best(self) -> tuple[dict[str, Any], float]:
        medians = self.grid_medians()
        key = max(medians, key=lambda k: medians[k])
        return json.loads(key), medians[key]


def replay(records: Iterable[TrialRecord] | str | Path, budget: int, seed: int = 0, **kwargs: Any) -> SearchResult:
    """``labctl tune --replay FILE.jsonl --budget N --seed S``: the search of :func:`tune` against recorded
    trials (records, or a JSONL export path read with :func:`labctl.results.interchange.read_jsonl`)."""
    if isinstance(records, (str, Path)):
        from labctl.results.interchange import read_jsonl

        records = read_jsonl(records)
    evaluator = ReplayEvaluator(records, seed)
    return tune(evaluator.space, evaluator, budget, seed, **kwargs)


def space_from_profile(profile: Any) -> dict[str, list[Any]]:
    """The live search space of a profile: its sweep matrix (knob path -> values)."""
    sweep = dict(profile.sweep)
    if not sweep:
        raise UserError(f"{profile.name}: the profile has no sweep: nothing to tune")
    return sweep
