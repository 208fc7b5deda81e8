"""A metric across the runs of one profile: one row per run, oldest first, so that a slow drift shows.

A regression check compares two runs; a drift of -2% a release passes every such check and is -10% in
five. The trend lists, per configuration, every run of the profile in the store with the median, its
95% CI and n, the change against the series' first run with the verdict of
:func:`labctl.analysis.compare.judge` (the same rules and family-wise confidence as ``labctl compare``),
and the environment fields that changed since the previous row (a QEMU, DPDK or kernel upgrade), so a
step can be read against what changed.

Each series is also grouped by FD.io CSIT's ``jumpavg`` (:mod:`labctl.analysis.changes`: minimum
description length over the runs' trials): a row carries its group, and every group after the first is
marked a regression or a progression against the one before, with its size, the runs on both sides of the
boundary and what changed in their environments there (binaries with their versions and hashes, QEMU,
DPDK, the kernel). A drift of -2% a run that no comparison with the first run flags yet shows as a new,
lower group once the data support one. :func:`trend_failures` lists the regressions of each series'
newest group beyond the threshold: what ``labctl trend --junit`` fails on.

Trials belong to a profile by the profile name they recorded (the ``name`` knob), so imported runs
(a CI job's JSONL, another host's) join the trend whatever their run is called. A series never mixes
hosts, accelerators or labs: each such combination is its own series. Rows are in the order the runs
were measured (their first trial's start; the run's creation time for runs without one). The single
measurements of NDR/PDR searches are left out (their search's record stands for them), and ``ndr`` /
``pdr`` name ``ndr_mpps`` / ``pdr_mpps``, as in ``labctl compare``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from labctl.analysis.changes import Grouping, group_runs
from labctl.analysis.compare import (
    DEFAULT_THRESHOLD_PCT, EnvChange, Side, check_measured, delta_of, env_changes, family_confidence,
    judge, judged_trials, lower_is_better, metric_name, side_of,
)
from labctl.analysis.comparison_text import format_time
from labctl.analysis.grouping import ENV_DIMENSIONS, knob_value, sort_key, varying_knobs
from labctl.analysis.renderers import aligned
from labctl.errors import UserError
from labctl.profile.knobs import short_label
from labctl.results.metrics import default_metric
from labctl.results.record import TrialRecord


@dataclass
class TrendRow:
    run_id: int | None
    measured_at: float | None
    side: Side
    change: str = "-"  # against the series' first run, "-2.1% [-6.0, +1.9]"
    verdict: str | None = None
    reason: str | None = None
    env_changes: list[EnvChange] = field(default_factory=list)  # against the previous row
    group: int | None = None  # its jumpavg group (None: a run without a value of the metric)


@dataclass
class TrendGroup:
    """Consecutive runs with one average (``jumpavg``): the runs, their trials' mean and spread."""

    first_run: int | None
    last_run: int | None
    runs: int
    trials: int
    avg: float
    stdev: float


@dataclass
class TrendMark:
    """A change between two groups: ``kind`` regression or progression, its size (group averages), the
    last run before the boundary and the first after it, and what changed in their environments."""

    kind: str
    run_id: int | None  # the first run of the new group
    previous_run_id: int | None  # the last run of the group before
    measured_at: float | None
    before: float
    after: float
    change_pct: float
    beyond_threshold: bool
    group: int
    env_changes: list[EnvChange] = field(default_factory=list)

    def format(self, metric: str) -> str:
        size = f"{self.change_pct:+.1f}%"
        below = "" if self.beyond_threshold else " (within the threshold)"
        changed = "; ".join(c.format() for c in self.env_changes) or "nothing recorded"
        return (f"{self.kind} at run {self.run_id} (after run {self.previous_run_id}): {size}{below}, group "
                f"average {self.before:.3f} -> {self.after:.3f} {metric}; changed at the boundary: {changed}")


@dataclass
class TrendSeries:
    label: str
    knobs: dict[str, Any]
    env: dict[str, Any]  # host, accel, lab
    rows: list[TrendRow]
    groups: list[TrendGroup] = field(default_factory=list)
    marks: list[TrendMark] = field(default_factory=list)


@dataclass
class Trend:
    profile: str
    metric: str
    threshold_pct: float
    confidence: float
    selection: dict[str, Any]
    series: list[TrendSeries]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The trend as JSON (``labctl trend --json``, the page's document): its series with their rows,
        groups and marks, plus ``marks_total`` and ``failures`` (what ``--junit`` fails on)."""
        out = asdict(self)
        out["marks_total"] = sum(len(s.marks) for s in self.series)
        out["failures"] = [{"series": s.label, "env": s.env, "run_id": m.run_id, "change_pct": m.change_pct}
                           for s, m in trend_failures(self)]
        return out


def _select(records: list[TrialRecord], profile: str, selection: dict[str, Any]) -> list[TrialRecord]:
    """The profile's trials with every ``knob=value`` of ``selection``; UserError names what is allowed."""
    knobs = [k for k in varying_knobs([r for r in records if r.status == "ok"]) if not k.startswith("env.")]
    for knob, value in selection.items():
        values = {knob_value(r, knob) for r in records} - {None}
        if not values:
            raise UserError(f"--config {knob}: not a knob of {profile}'s trials "
                            f"(allowed: {', '.join(knobs) or 'none: every trial has the same configuration'})")
        if value not in values:
            shown = ", ".join(str(v) for v in sorted(values, key=sort_key))
            raise UserError(f"--config {knob}={value}: no trial of {profile} has that value (allowed: {shown})")
        records = [r for r in records if knob_value(r, knob) == value]
    return records


def build_trend(records: Sequence[TrialRecord], profile: str, metric: str | None = None,
                selection: dict[str, Any] | None = None, run_times: dict[int, float] | None = None,
                threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Trend:
    """The trend of ``metric`` over the runs of ``profile`` among ``records`` (every trial of a store, any
    status). ``selection``: knob -> value the configurations must have; ``run_times``: run id -> its
    creation time, for runs whose trials have no start time. ``metric`` None: what the profile's trials
    measured (:func:`labctl.results.metrics.default_metric`: a tcp rate, ``mpps``, or ``ndr_mpps`` when
    only NDR/PDR searches were run)."""
    selection = selection or {}
    profiles = sorted({str(r.config.get("name")) for r in records if r.config.get("name") is not None})
    mine = [r for r in records if r.config.get("name") == profile]
    if not mine:
        raise UserError(f"--trend {profile}: no trials of that profile (allowed: {', '.join(profiles) or 'none'})")
    if metric is None:
        metric = default_metric(judged_trials(mine))
    check_measured(metric, [mine], f"the trials of {profile}")
    metric = metric_name(metric)  # ndr -> ndr_mpps
    mine = _select(judged_trials(mine), profile, selection)
    knobs = [k for k in varying_knobs([r for r in mine if r.status == "ok"]) if not k.startswith("env.")]
    groups: dict[tuple, dict[int | None, list[TrialRecord]]] = {}
    for record in mine:
        key = (record.config_key, *(getattr(record.env, d) for d in ENV_DIMENSIONS))
        groups.setdefault(key, {}).setdefault(record.run_id, []).append(record)

    def measured_at(run_id: int | None, trials: list[TrialRecord]) -> float | None:
        starts = [r.started_at for r in trials if r.started_at is not None]
        return min(starts) if starts else (run_times or {}).get(run_id)

    series: list[TrendSeries] = []
    pending: list[tuple[TrendRow, list[float], list[float]]] = []
    lower = lower_is_better(metric)
    for (key, *env), by_run in groups.items():
        example = next(iter(by_run.values()))[0]
        values = {k: knob_value(example, k) for k in knobs}
        ordered = sorted(by_run.items(), key=lambda item: (measured_at(*item) or 0.0, item[0] or 0))
        rows, first, previous, per_run = [], None, None, []
        for run_id, trials in ordered:
            side, vals = side_of(run_id, trials, metric)
            row = TrendRow(run_id, measured_at(run_id, trials), side)
            if previous is not None:
                row.env_changes = env_changes(previous, trials)
            if first is None and vals:
                first = vals
            elif vals and min(first) > 0:
                pending.append((row, first, vals))
            previous = trials
            rows.append(row)
            per_run.append(vals)
        one = TrendSeries(short_label(values.items(), " ") or short_label(selection.items(), " ") or profile, values,
                          dict(zip(ENV_DIMENSIONS, env)), rows)
        _mark(one, group_runs(per_run, lower), [trials for _run, trials in ordered], threshold_pct, metric)
        series.append(one)
    confidence = family_confidence(len(pending))
    for row, first, vals in pending:
        delta = delta_of(first, vals, metric, confidence)
        judgement = judge(delta, threshold_pct, lower_is_better(metric), (first, vals))
        row.change, row.verdict, row.reason = delta.format(), judgement.verdict, judgement.reason
    series.sort(key=lambda s: (tuple(sort_key(s.knobs[k]) for k in knobs), tuple(map(str, s.env.values()))))
    notes = [f"{len(pending)} changes against the first run judged together: each interval at "
             f"{100 * confidence:.4g}%"] if len(pending) > 1 else []
    return Trend(profile, metric, threshold_pct, confidence, selection, series, notes)


def _mark(series: TrendSeries, grouping: Grouping, trials: list[list[TrialRecord]], threshold_pct: float,
          metric: str) -> None:
    """The groups and marks of ``grouping`` on ``series``' rows (``trials``: each row's records)."""
    rows = series.rows
    for row, group in zip(rows, grouping.group_of):
        row.group = group
    for g in grouping.groups:
        members = [i for i in range(g.first, g.last + 1) if grouping.group_of[i] is not None]
        series.groups.append(TrendGroup(rows[g.first].run_id, rows[g.last].run_id, len(members), g.trials, g.avg,
                                        g.stdev))
    for m in grouping.marks:
        series.marks.append(TrendMark(
            m.kind, rows[m.index].run_id, rows[m.previous].run_id, rows[m.index].measured_at, m.before, m.after,
            m.change_pct, abs(m.change_pct) >= threshold_pct, m.group, env_changes(trials[m.previous], trials[m.index])))


def trend_failures(trend: Trend) -> list[tuple[TrendSeries, TrendMark]]:
    """The regressions that start a series' newest group and exceed the threshold: what a CI gate fails on
    (an older regression was followed by a group of its own; a change within the threshold is listed, not
    failed)."""
    out = []
    for s in trend.series:
        newest = len(s.groups) - 1
        out += [(s, m) for m in s.marks if m.group == newest and m.kind == "regression" and m.beyond_threshold]
    return out


def render_trend(trend: Trend) -> str:
    """The trend as text: a table per configuration (and host, accelerator, lab), a row per run."""
    direction = "higher is worse" if lower_is_better(trend.metric) else "higher is better"
    lines = [f"trend of {trend.profile}: {trend.metric} ({direction}) per run, oldest first; 'vs first': the "
             f"change against the series' first run ({100 * trend.confidence:.4g}% CI, threshold "
             f"{trend.threshold_pct:g}%); '*': the environment changed since the row above; 'group': jumpavg's "
             "(minimum description length), a mark where a new group starts"]
    for s in trend.series:
        env = ", ".join(f"{k} {v}" for k, v in s.env.items() if v is not None)
        lines += ["", f"{s.label}" + (f" ({env})" if env else "")]
        head = ["run", "measured", f"median {trend.metric}", "95% CI", "n", "vs first", "verdict", "group", "changes"]
        body = []
        starts = {m.run_id: m for m in s.marks}
        for row in s.rows:
            side = row.side
            ci = "-" if side.ci_low is None else f"[{side.ci_low:.3f}, {side.ci_high:.3f}]"
            changes = "; ".join(c.format() for c in row.env_changes)
            body.append([f"{'*' if row.env_changes else ' '}{row.run_id}", format_time(row.measured_at),
                         "-" if side.median is None else f"{side.median:.3f}", ci,
                         f"{side.n}" + (f" ({side.failed} failed)" if side.failed else ""),
                         row.change, row.verdict or "-", _group_cell(row, starts), changes or "-"])
        lines.append(aligned(head, body))
        lines += [f"  {m.format(trend.metric)}" for m in s.marks]
        if len(s.rows) > 1 and not s.marks:
            lines.append(f"  no change marked: one group over {s.groups[0].runs} runs" if s.groups
                         else "  no run has a value")
    lines += [f"note: {note}" for note in trend.notes]
    return "\n".join(lines)


def _group_cell(row: TrendRow, starts: dict[int | None, TrendMark]) -> str:
    if row.group is None:
        return "-"
    mark = starts.get(row.run_id)
    if mark is None or mark.group != row.group:
        return str(row.group + 1)
    return f"{row.group + 1} {'v' if mark.kind == 'regression' else '^'} {mark.change_pct:+.1f}%"


def mark_lines(trend: Trend, run_id: int | None = None, limit: int = 4) -> list[str]:
    """The trend's marks as short lines, newest first (at most ``limit``); the mark that starts at ``run_id``
    says so (the TUI's Results screen shows them under the run)."""
    marks = sorted(((s, m) for s in trend.series for m in s.marks), key=lambda sm: sm[1].measured_at or 0.0,
                   reverse=True)
    lines = []
    for s, m in marks[:limit]:
        here = " <- this run" if run_id is not None and m.run_id == run_id else ""
        within = "" if m.beyond_threshold else " (within the threshold)"
        lines.append(f"trend {trend.metric} {s.label}: {m.kind} {m.change_pct:+.1f}%{within} at run {m.run_id} "
                     f"(after run {m.previous_run_id}){here}")
    if len(marks) > limit:
        lines.append(f"trend: {len(marks) - limit} older marks (labctl trend {trend.profile})")
    return lines
