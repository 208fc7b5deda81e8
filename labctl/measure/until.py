"""``labctl sweep --until decided --budget DURATION|TRIALS``: measure until every comparison is decided.

The first round runs every configuration :data:`FIRST_BLOCKS` times, in blocks (one repeat of every
configuration), consecutive blocks in opposite orders (A B, then B A) or shuffled with a recorded seed
(``--order random``). Then, round by round, it adds blocks of only the configurations that an open
comparison needs, looks again (:mod:`labctl.analysis.sequential`: the error spent across a bounded number
of looks), and stops when no comparison is open or the budget is spent. A comparison is a knob's value
against its baseline (the sweep's first value), pooled over the other knobs through within-block pairs.

The budget: a trial count (``40``) or a duration (``90s``, ``12m``, ``1h``). A duration's most blocks are
derived once, after the first round, from the mean wall time per trial seen there (restarts included),
and fix the looks and the information fractions; a later block starts only when the time left holds it.

Everything here but :func:`run_until` is pure (plans, pairs, looks), for the unit tests and
``benchmarks/verdict.py``; :func:`run_until` drives a ``measure(entry) -> TrialRecord`` it is handed.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labctl.analysis import sequential as seq
from labctl.analysis.grouping import knob_value
from labctl.analysis.statistics import two_band
from labctl.errors import KnobError
from labctl.events import OnEvent, notify
from labctl.results.metrics import lookup
from labctl.results.record import TrialRecord

UNTIL = ("decided",)
#: a comparison whose predictive chance of a verdict by the budget's last look falls below this is given up
#: (non-binding futility: it cannot add a false verdict; Jennison & Turnbull 2000, ch. 10)
FUTILITY = 0.10
#: blocks of the first round: the fewest pairs a look judges (:data:`sequential.MIN_PAIRS`)
FIRST_BLOCKS = seq.MIN_PAIRS
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
MAX_BUDGET_S = 7 * 24 * 3600.0
MAX_BUDGET_TRIALS = 100_000


@dataclass(frozen=True)
class Budget:
    trials: int | None = None
    seconds: float | None = None

    def __str__(self) -> str:
        return f"{self.trials} trials" if self.trials is not None else f"{self.seconds:g} s"


def parse_budget(text: str | None) -> Budget:
    """``--budget``: a trial count (``40``) or a duration (``90s``, ``12m``, ``1.5h``)."""
    value = (text or "").strip().lower()
    allowed = "(allowed: a trial count such as 40, or a duration such as 90s, 12m, 1h)"
    if value.isdigit():
        trials = int(value)
        if not 1 <= trials <= MAX_BUDGET_TRIALS:
            raise KnobError(f"--budget {text}: out of range {allowed[:-1]}; 1..{MAX_BUDGET_TRIALS} trials)")
        return Budget(trials=trials)
    match = _DURATION.match(value)
    if not match:
        raise KnobError(f"--budget {text}: not a trial count or a duration {allowed}")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if not 0 < seconds <= MAX_BUDGET_S:
        raise KnobError(f"--budget {text}: out of range {allowed[:-1]}; at most 7 days)")
    return Budget(seconds=seconds)


def check_until(until: str | None, budget: str | None) -> Budget | None:
    """``--until`` and ``--budget`` checked together (before anything starts)."""
    if until is None:
        if budget is not None:
            raise KnobError(f"--budget {budget}: only with --until decided (allowed: --until decided --budget ...)")
        return None
    if until not in UNTIL:
        raise KnobError(f"--until {until}: not a stopping rule (allowed: {', '.join(UNTIL)})")
    if budget is None:
        raise KnobError("--budget: required with --until decided (allowed: a trial count such as 40, or a "
                        "duration such as 12m)")
    return parse_budget(budget)


def check_futility(pct: float | None) -> float:
    """``--futility PCT``: the chance (in %) of a verdict by the budget's end below which a comparison is
    given up; None: :data:`FUTILITY`. Returns it as a probability."""
    if pct is None:
        return FUTILITY
    if not (math.isfinite(pct) and 0.0 <= pct < 100.0):
        raise KnobError(f"--futility {pct:g}: out of range (allowed: 0 <= PCT < 100, per cent; 0 never gives up)")
    return pct / 100.0


@dataclass(frozen=True)
class Pairing:
    """One comparison: ``knob``'s ``candidate`` value against its ``baseline`` value."""

    knob: str
    baseline: Any
    candidate: Any

    @property
    def name(self) -> str:
        return f"{self.knob}: {self.candidate} vs {self.baseline}"


def pairings(sweep: dict[str, list[Any]]) -> list[Pairing]:
    """Every comparison of a sweep: each knob's later values against its first."""
    return [Pairing(k, values[0], v) for k, values in sweep.items() for v in values[1:]]


def needed_configs(configs: Sequence[dict[str, Any]], open_: Sequence[Pairing]) -> list[dict[str, Any]]:
    """The configurations (in ``configs``' order) an open comparison needs: its knob at either value."""
    return [c for c in configs if any(repr(c[p.knob]) in (repr(p.baseline), repr(p.candidate)) for p in open_)]


def block_entries(configs: Sequence[dict[str, Any]], block: int, seq_start: int, order: str,
                  rng: random.Random | None) -> list[dict[str, Any]]:
    """One block's plan entries: every configuration once; odd blocks reversed (A B, then B A), or shuffled
    with ``rng`` for ``--order random``."""
    cycle = list(configs) if block % 2 == 0 else list(reversed(configs))
    if order == "random" and rng is not None:
        rng.shuffle(cycle)
    return [{"seq": seq_start + i, "config": c, "repeat_index": block, "block": block, "position": i}
            for i, c in enumerate(cycle)]


def block_of(record: TrialRecord) -> int | None:
    block = record.details.get("block")
    return block if isinstance(block, int) else None


def metric_value(record: TrialRecord, metric: str) -> float | None:
    """A trial's value of ``metric`` for a verdict; None for a failed trial, and for a paced trial the
    generator could not keep to its schedule (``valid`` False: it measured the generator, not the lab; its
    unsent frames count as lost), which ``labctl report`` and ``labctl advise`` leave out too."""
    if record.status != "ok" or record.metrics.valid is False:
        return None
    value = getattr(record.metrics, metric, None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def scale_of(metric: str) -> str:
    entry = lookup(metric)
    return "diff" if entry is not None and entry.kind == "loss" else "log"


def paired(records: Sequence[TrialRecord], pairing: Pairing, metric: str,
           others: Sequence[str] = ()) -> tuple[list[float], str]:
    """The within-block differences of one comparison (candidate against baseline, same block, same values
    of the ``others`` knobs) and a refusal reason ('' when none)."""
    scale = scale_of(metric)
    cells: dict[tuple, dict[str, float | None]] = {}
    for r in records:
        block = block_of(r)
        if block is None:
            continue
        value = repr(knob_value(r, pairing.knob))
        side = "b" if value == repr(pairing.baseline) else "c" if value == repr(pairing.candidate) else None
        if side is not None:
            rest = tuple(repr(knob_value(r, k)) for k in others)
            cells.setdefault((block, rest), {})[side] = metric_value(r, metric)
    diffs, zero = [], 0
    for cell in cells.values():
        if "b" in cell and "c" in cell:
            d = seq.paired_difference(cell["c"], cell["b"], scale)
            if d is None:
                zero += cell["b"] is not None and cell["c"] is not None
            else:
                diffs.append(d)
    reason = ""
    if zero and zero >= len(diffs):
        reason = f"zero rates: {zero} of {zero + len(diffs)} pairs have a zero {metric} (a ratio has no meaning)"
    elif scale == "log" and len(diffs) >= 8:
        bands = two_band([math.exp(d) for d in diffs])
        if bands is not None:
            reason = (f"two bands that do not mix: the pairs' ratios fall in two bands ({bands.format()}); the host "
                      "changed speed inside blocks")
    return diffs, reason


@dataclass
class State:
    """One comparison's course over the looks."""

    pairing: Pairing
    decision: seq.Decision | None = None
    looks: int = 0
    trials: int = 0  # trials of its two values measured
    needed_pairs: int | None = None
    needed_trials: int | None = None
    needed_s: float | None = None
    chance: float | None = None  # of a verdict by the budget's last look (predictive), while open
    out_of_reach: bool = False  # given up: its chance fell below the futility level

    @property
    def open(self) -> bool:
        return self.decision is None or not self.decision.decided

    @property
    def measuring(self) -> bool:
        """Open and still worth blocks."""
        return self.open and not self.out_of_reach

    def to_dict(self) -> dict[str, Any]:
        d = self.decision
        out = {"knob": self.pairing.knob, "baseline": self.pairing.baseline, "candidate": self.pairing.candidate,
               "verdict": d.verdict if d else "open", "trials": self.trials, "looks": self.looks}
        if d is not None:
            out.update({k: v for k, v in d.to_dict().items() if k != "verdict"})
        if self.open:
            out.update(needed_pairs=self.needed_pairs, needed_trials=self.needed_trials, needed_s=self.needed_s,
                       chance=None if self.chance is None else round(self.chance, 4), out_of_reach=self.out_of_reach)
        return out


@dataclass
class Look:
    """What one look saw: the note a face shows (``Event.data`` of the note)."""

    look: int
    looks: int
    blocks: int
    trials: int
    open: list[str]
    decided: dict[str, str]
    out_of_reach: list[str] = field(default_factory=list)

    def message(self) -> str:
        shown = ", ".join(self.open) if self.open else "none"
        given_up = f"; {len(self.out_of_reach)} out of reach of the budget" if self.out_of_reach else ""
        return (f"look {self.look}/{self.looks} after {self.blocks} blocks ({self.trials} trials): "
                f"{len(self.open)} open ({shown}); {len(self.decided)} decided{given_up}")


@dataclass
class Until:
    """The course of an ``--until decided`` sweep, pure: the caller measures, this decides."""

    sweep: dict[str, list[Any]]
    configs: list[dict[str, Any]]
    budget: Budget
    threshold_pct: float
    metric: str | None = None
    lower_is_better: bool = False
    order: str = "interleaved"
    seed: int | None = None
    spending: str = "pocock"
    alpha: float = seq.ALPHA
    most_looks: int = seq.MAX_LOOKS  # the looks the budget is spread over (each spends a share of alpha)
    first_blocks: int = FIRST_BLOCKS  # blocks of the first round (the first look)
    futility: float = FUTILITY  # give a comparison up when its chance of a verdict falls below this (0: never)
    fractions: list[float] = field(default_factory=list)  # information fraction of each look so far
    states: list[State] = field(default_factory=list)
    blocks: int = 0
    max_blocks: int | None = None
    step: int = 1
    looks_planned: int = 1
    look: int = 0
    stop: str = ""
    trial_s: float | None = None

    def __post_init__(self) -> None:
        self.states = [State(p) for p in pairings(self.sweep)]
        self.rng = random.Random(self.seed) if self.order == "random" else None
        if self.budget.trials is not None:
            first = self.first_blocks * len(self.configs)
            if self.budget.trials < first:
                raise KnobError(f"--budget {self.budget.trials}: less than the first round's {first} trials "
                                f"({self.first_blocks} blocks of {len(self.configs)} configurations; allowed: {first} or more)")
            self._plan_blocks(self.budget.trials // len(self.configs))

    def _plan_blocks(self, max_blocks: int) -> None:
        self.max_blocks = max(max_blocks, self.first_blocks)
        spare = self.max_blocks - self.first_blocks
        self.step = max(1, math.ceil(spare / max(self.most_looks - 1, 1))) if spare else 1
        self.looks_planned = seq.max_looks(self.first_blocks, self.max_blocks, self.step, self.most_looks)

    def plan_from_time(self, elapsed_s: float, trials_done: int) -> None:
        """A duration budget: the most blocks, from the first round's mean time per trial."""
        self.trial_s = elapsed_s / max(trials_done, 1)
        if self.budget.seconds is not None:
            left = max(self.budget.seconds - elapsed_s, 0.0)
            self._plan_blocks(self.blocks + int(left // (self.trial_s * len(self.configs))))

    def others(self, pairing: Pairing) -> list[str]:
        return [k for k in self.sweep if k != pairing.knob]

    @property
    def open(self) -> list[State]:
        return [s for s in self.states if s.open]

    @property
    def measuring(self) -> list[State]:
        """The open comparisons still worth blocks (not out of reach of the budget)."""
        return [s for s in self.states if s.measuring]

    def next_round(self, seq_start: int) -> list[dict[str, Any]]:
        """The next round's plan entries: the first round, or ``step`` blocks of what the open comparisons
        need (none: the sweep is over)."""
        if self.blocks == 0:
            count, configs = self.first_blocks, self.configs
        else:
            if not self.measuring or self.max_blocks is None or self.blocks >= self.max_blocks:
                return []
            count = min(self.step, self.max_blocks - self.blocks)
            configs = needed_configs(self.configs, [s.pairing for s in self.measuring])
        entries: list[dict[str, Any]] = []
        for b in range(self.blocks, self.blocks + count):
            entries += block_entries(configs, b, seq_start + len(entries), self.order, self.rng)
        return entries

    def take_look(self, records: Sequence[TrialRecord]) -> Look:
        """Judge every open comparison on ``records`` (all the run's trials so far)."""
        self.look += 1
        assert self.metric is not None
        self.fractions.append(min(self.blocks / (self.max_blocks or self.blocks), 1.0))
        alpha_k, alpha_eq = seq.look_levels(self.fractions, self.alpha, self.spending)
        scale = scale_of(self.metric)
        for state in self.states:
            if not state.measuring:  # its trials stay those it was decided (or given up) on
                continue
            state.trials = sum(1 for r in records if block_of(r) is not None and
                               repr(knob_value(r, state.pairing.knob)) in (repr(state.pairing.baseline),
                                                                          repr(state.pairing.candidate)))
            diffs, refusal = paired(records, state.pairing, self.metric, self.others(state.pairing))
            state.looks += 1
            state.decision = seq.decide(diffs, alpha_k, self.threshold_pct, self.lower_is_better, scale, refusal,
                                        alpha_eq)
            if state.open:
                self._needed(state, diffs, scale)
                self._reach(state, diffs, scale)
        return Look(self.look, self.looks_planned, self.blocks, sum(1 for r in records if block_of(r) is not None),
                    [s.pairing.name for s in self.measuring],
                    {s.pairing.name: s.decision.verdict for s in self.states if not s.open and s.decision},
                    [s.pairing.name for s in self.states if s.open and s.out_of_reach])

    def _per_block(self, diffs: list[float]) -> int:
        """The pairs one block adds to a comparison (one per value of the other knobs)."""
        return max(len(diffs) // max(self.blocks, 1), 1)

    def _reach(self, state: State, diffs: list[float], scale: str) -> None:
        """After the first look, give up a comparison the budget's last look would decide with a chance
        below :attr:`futility` (:func:`sequential.verdict_chance`)."""
        if self.max_blocks is None or self.blocks >= self.max_blocks:
            state.chance = None  # the budget's last look was this one
            return
        per_block = self._per_block(diffs)
        state.chance = seq.verdict_chance(diffs, per_block * self.max_blocks,
                                          seq.final_levels(self.fractions, self.alpha, self.spending),
                                          self.threshold_pct, scale)
        if self.look > 1 and state.chance is not None and state.chance < self.futility:
            state.out_of_reach = True

    def _needed(self, state: State, diffs: list[float], scale: str) -> None:
        level = seq.final_levels(self.fractions, self.alpha, self.spending)[0]
        pairs = seq.needed_pairs(diffs, level, self.threshold_pct, scale)
        state.needed_pairs = pairs
        per_block = self._per_block(diffs)
        if pairs is None:
            state.needed_trials = state.needed_s = None
            return
        blocks = max(math.ceil(pairs / per_block) - self.blocks, 0)
        state.needed_trials = blocks * 2 * per_block
        state.needed_s = round(state.needed_trials * self.trial_s, 1) if self.trial_s else None

    def summary(self) -> dict[str, Any]:
        return {"budget": str(self.budget), "threshold_pct": self.threshold_pct, "metric": self.metric,
                "alpha": self.alpha, "spending": self.spending, "boundaries": "exact", "futility": self.futility,
                "looks": self.look, "looks_planned": self.looks_planned,
                "blocks": self.blocks, "max_blocks": self.max_blocks, "stop": self.stop,
                "trial_s": round(self.trial_s, 2) if self.trial_s else None,
                "comparisons": [s.to_dict() for s in self.states]}


def whole_blocks(entries: list[dict[str, Any]], room: int) -> list[dict[str, Any]]:
    """The leading whole blocks of ``entries`` that fit in ``room`` trials."""
    out: list[dict[str, Any]] = []
    for block in sorted({e["block"] for e in entries}):
        part = [e for e in entries if e["block"] == block]
        if len(out) + len(part) > room:
            break
        out += part
    return out


Measure = Callable[[dict[str, Any]], "TrialRecord | None"]


def run_until(until: Until, measure: Measure, extend: Callable[[list[dict[str, Any]]], None],
              records: list[TrialRecord], default_metric: Callable[[list[TrialRecord]], str],
              lower: Callable[[str], bool], on_event: OnEvent | None = None, lab: str | None = None,
              clock: Callable[[], float] = time.monotonic) -> dict[str, Any]:
    """Drive the rounds: ``extend`` adds a round's entries to the run's plan, ``measure`` runs one entry
    (its record carries the block), ``records`` collects them. Returns :meth:`Until.summary`."""
    started = clock()
    seq_next = 0
    measured = 0
    while True:
        entries = until.next_round(seq_next)
        if not entries:
            break
        if until.blocks > 0:
            room = until.budget.trials - measured if until.budget.trials is not None else \
                int((until.budget.seconds - (clock() - started)) // until.trial_s) if until.trial_s else len(entries)
            entries = whole_blocks(entries, room)
            if not entries:
                until.stop = "budget"
                break
        extend(entries)
        before = len(records)
        for entry in entries:
            record = measure(entry)
            measured += 1
            if record is not None:
                records.append(record)
        seq_next += len(entries)
        if not any(r.status == "ok" for r in records[before:]):  # nothing measured: more rounds would fail alike
            until.blocks = max(e["block"] for e in entries) + 1
            until.stop = "failed"
            break
        until.blocks = max(e["block"] for e in entries) + 1
        if until.metric is None:
            until.metric = default_metric(records)
            until.lower_is_better = lower(until.metric)
        if until.look == 0:
            until.plan_from_time(clock() - started, len(records))
        look = until.take_look(records)
        notify(on_event, "note", lab=lab, message=look.message(), data=look)
        if not until.open:
            until.stop = "decided"
            break
        if not until.measuring:
            until.stop = "out of reach"
            break
    if not until.stop:
        until.stop = "decided" if not until.open else "budget"
    if until.open:  # what each open comparison would take, from the noise seen
        scale = scale_of(until.metric or "mpps")
        for state in until.open:
            diffs, _ = paired(records, state.pairing, until.metric or "mpps", until.others(state.pairing))
            until._needed(state, diffs, scale)
    return until.summary()
