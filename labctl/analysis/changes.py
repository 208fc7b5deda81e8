"""Where a series of runs changed: FD.io CSIT's trend grouping (``jumpavg``) and the marks between its groups.

A series is one metric's runs in the order they were measured (:mod:`labctl.analysis.trend`). ``jumpavg``
(PyPI, kept by FD.io CSIT; CSIT's trending and its successor CSIT-DASH use it) models the series as a
concatenation of groups, the samples of each group drawn from one normal distribution, and picks the
partition whose description is shortest (minimum description length): a new group costs bits for its
average, so it is only started where the saving on the samples pays for it. Noise alone rarely does;
a step does. Every group after the first is marked against the group before it: lower average, a
*regression*; higher, a *progression* (CSIT's rule, ``jumpavg.classify``; for a metric where lower is
better the names swap).

Each run goes in as the list of its trials' values (``jumpavg`` keeps such a list together, as one
indivisible run, and codes its average and spread: ``AvgStdevStats``), not as one number: a run of five
trials spread over two bands is then known to be noisy, while its median alone would look like a jump.
Measured by ``benchmarks/trend_marks.py`` on this host's own spread (series of ten runs of five trials, each
trial's noise a log residual of the stored embedded-lab trials, sd 0.20, heavy-tailed): no flat series of
300 was marked; a halving from run 6 on was marked there, and only there, in all 300, a 30% drop in 61%,
a 20% drop in 10%, a 10% drop never; grouped by their run medians alone, 15% of the flat series were marked
and 55% of the halvings marked exactly.

A mark's size is the change of the group averages, in per cent of the earlier group's. ``jumpavg`` marks
what the data support, however small; a caller that gates on marks compares the size with its threshold
(:func:`labctl.analysis.trend.trend_failures`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

MarkKind = Literal["regression", "progression"]


@dataclass(frozen=True)
class Group:
    """Consecutive runs ``first`` .. ``last`` (indexes into the series) with one average."""

    first: int
    last: int
    avg: float
    stdev: float
    trials: int


@dataclass(frozen=True)
class Mark:
    """The start of group ``group`` (its first run: ``index``) against the group before it."""

    group: int
    index: int  # the first run of the new group
    previous: int  # the last run of the group before
    kind: MarkKind
    before: float  # the earlier group's average
    after: float  # this group's average

    @property
    def change_pct(self) -> float:
        return (self.after / self.before - 1.0) * 100.0 if self.before else math.inf


@dataclass(frozen=True)
class Grouping:
    """The groups of a series (their indexes are the series' positions) and the marks between them."""

    groups: list[Group]
    marks: list[Mark]
    group_of: list[int | None]  # per run of the series: its group, None for a run without values


def group_runs(runs: Sequence[Sequence[float]], lower_is_better: bool = False) -> Grouping:
    """Group a series (per run, its trials' values; a run without values is left out and has no group)
    with ``jumpavg.classify`` and mark every change between consecutive groups."""
    import jumpavg

    kept = [i for i, values in enumerate(runs) if any(_finite(v) for v in values)]
    samples = [[float(v) for v in runs[i] if _finite(v)] for i in kept]
    group_of: list[int | None] = [None] * len(runs)
    if not samples:
        return Grouping([], [], group_of)
    if max(max(s) for s in samples) <= 0.0 or min(min(s) for s in samples) < 0.0:
        # jumpavg codes values from 0 to their maximum: an all-zero series (no loss ever) is one group
        # and negative values (none of labctl's metrics has them) are not its input
        group = Group(kept[0], kept[-1], _mean(sum(samples, [])), 0.0, sum(len(s) for s in samples))
        for i in kept:
            group_of[i] = 0
        return Grouping([group], [], group_of)
    classified = jumpavg.classify(samples)
    groups: list[Group] = []
    marks: list[Mark] = []
    position = 0
    for number, found in enumerate(classified):
        members = kept[position:position + len(found)]
        position += len(found)
        for i in members:
            group_of[i] = number
        groups.append(Group(members[0], members[-1], float(found.stats.avg), float(found.stats.stdev),
                            int(found.stats.size)))
        if number and found.comment in ("regression", "progression"):
            kind: MarkKind = found.comment
            if lower_is_better:
                kind = "progression" if kind == "regression" else "regression"
            previous = groups[-2]
            marks.append(Mark(number, members[0], previous.last, kind, previous.avg, groups[-1].avg))
    return Grouping(groups, marks, group_of)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0
