"""Reports engineers post, as data: knob values as rows; median rate, 95% CI, n, loss; A/B deltas; notes.

:mod:`labctl.analysis.renderers` turns a :class:`Report` into a table, markdown, CSV, JSON or a terminal plot.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from labctl.errors import UserError
from labctl.analysis.grouping import group_by, sort_key, varying_knobs
from labctl.analysis.loss import loss_summary
from labctl.analysis.statistics import compare, summarize
from labctl.results.metrics import default_metric, lower_is_better
from labctl.results.record import TrialRecord
from labctl.host.steadiness import unsteady_warning


@dataclass
class Row:
    knobs: dict[str, Any]
    n: int
    median: float
    ci: tuple[float | None, float | None]
    loss: float | None
    trials: list[int]
    delta: str | None = None  # vs the baseline row of the same group, "+16.2% [+12.0, +20.1]"
    verdict: str | None = None
    notes: list[str] = field(default_factory=list)
    extras: dict[str, float] = field(default_factory=dict)  # medians of EXTRA_METRICS measured beside


#: Headline figures shown beside a report's metric wherever its trials measured them.
EXTRA_METRICS = ("ndr_mpps", "pdr_mpps", "latency_p99_us")


@dataclass
class Report:
    run_id: int | None
    knobs: list[str]
    by: str | None
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    metric: str = "mpps"

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "knobs": self.knobs, "by": self.by, "metric": self.metric,
                "rows": [asdict(r) for r in self.rows], "notes": self.notes}


def _row_notes(records: list[TrialRecord], summary) -> list[str]:
    notes = []
    if summary.bands is not None:
        notes.append(summary.bands.format())
    elif summary.high_variance and summary.cv is not None:
        notes.append(f"high variance (cv {summary.cv:.0%})")
    if summary.n < 3:
        notes.append(f"n={summary.n}: too few repeats for a CI")
    if any(r.env.accel == "tcg" for r in records):
        notes.append("TCG")
    if any(r.env.shared_cores for r in records):
        notes.append("shared cores")
    return notes


def boots_note(info: dict[str, Any] | None) -> str | None:
    """The run's guest boots and their share of its time, from the run's info (libvirt guests)."""
    if not info or not info.get("boots"):
        return None
    boots, boot_s, run_s = info["boots"], info.get("boot_s", 0.0), info.get("run_s") or 0.0
    share = f", {boot_s / run_s:.0%} of the run's {run_s:.0f} s" if run_s else ""
    swaps = ""
    if info.get("swaps") or info.get("swap_fallbacks"):
        swaps = f"; NIC swaps: {info.get('swaps', 0)} ({info.get('swap_s', 0.0):.0f} s)"
        if info.get("swap_fallbacks"):
            swaps += f", {info['swap_fallbacks']} booted instead (see the trials' warnings)"
    return (f"guest boots: {boots} ({boot_s:.0f} s{share}){swaps}; workload-only changes restarted the forwarder in "
            "the running guest")


def build_report(records: list[TrialRecord], by: str | None = None, run_id: int | None = None,
                 metric: str = "mpps", run_info: dict[str, Any] | None = None) -> Report:
    records = [r for r in records if r.status == "ok" and getattr(r.metrics, metric) is not None
               and r.metrics.valid is not False]  # a trial the generator could not pace measured the generator
    if not records:
        raise UserError(f"no successful trials{f' in run {run_id}' if run_id else ''} to report")
    knobs = varying_knobs(records)
    if by is not None and by not in knobs:
        allowed = ", ".join(knobs) or "none (every trial has the same configuration)"
        raise UserError(f"--by {by}: not a knob that varies in this run (allowed: {allowed})")
    if by is None and len(knobs) == 1:
        by = knobs[0]
    others = [k for k in knobs if k != by]
    ordered = others + ([by] if by else [])
    groups = group_by(records, ordered)
    keys = sorted(groups, key=lambda key: tuple(sort_key(v) for v in key))
    rows: list[Row] = []
    baseline: dict[tuple, list[float]] = {}
    for key in keys:
        members = groups[key]
        values = [getattr(r.metrics, metric) for r in members]
        summary = summarize(values)
        losses = [r.metrics.loss_ratio for r in members if r.metrics.loss_ratio is not None]
        row = Row(dict(zip(ordered, key)), summary.n, summary.median, (summary.ci_low, summary.ci_high),
                  loss_summary(losses).median if losses else None, [r.id for r in members if r.id is not None],
                  notes=_row_notes(members, summary))
        for extra in EXTRA_METRICS:
            got = [getattr(r.metrics, extra) for r in members if getattr(r.metrics, extra) is not None]
            if got and extra != metric:
                row.extras[extra] = float(summarize(got).median)
        stratum = key[:-1] if by else ()
        if stratum not in baseline:
            baseline[stratum] = values
        elif min(baseline[stratum]) > 0 and min(values) > 0:
            delta = compare(baseline[stratum], values, higher_is_better=not lower_is_better(metric))
            row.delta, row.verdict = delta.format(), delta.verdict
        rows.append(row)
    notes = []
    if any(r.env.accel == "tcg" for r in records):
        notes.append("figures marked TCG come from software emulation: functional, not representative")
    if any(r.env.shared_cores for r in records):
        notes.append("figures marked 'shared cores' ran with two busy pollers on one CPU or on an oversubscribed host")
    warned = [w for w in (unsteady_warning(r.warnings) for r in records) if w]
    host = list(dict.fromkeys(warned))
    if host:
        unsteady = len(warned)
        figures = "; ".join(w.split(": ", 1)[-1].removesuffix(" (labctl doctor --steadiness)") for w in host[:3])
        more = f"; and {len(host) - 3} more probes" if len(host) > 3 else ""
        notes.append(f"{unsteady} of {len(records)} trials ran on a host measured unsteady before their sweep "
                     f"({figures}{more}): read every delta against that")
    labs = sorted({r.env.lab for r in records if r.env.lab})
    if len(labs) > 1:
        notes.append(f"trials come from {len(labs)} labs ({', '.join(labs)}): rows never pool them, compare within a lab")
    boots = boots_note(run_info)
    if boots:
        notes.append(boots)
    if by:
        notes.append(f"deltas compare each {by} with its first value in the same row group")
    return Report(run_id, knobs, by, rows, notes, metric)


def build_reports(records: list[TrialRecord], by: str | None, run_id: int | None, metrics: list[str],
                  run_info: dict[str, Any] | None = None) -> dict[str, Report]:
    """One report per metric of ``metrics`` that the trials carry, the one the run measured first
    (:func:`labctl.results.metrics.default_metric`: ``ndr_mpps`` for a run of NDR/PDR searches, a tcp run's
    rate, else ``mpps``): what a face shows of a run (rates, loss, NDR/PDR, latency, ...) per configuration."""
    present = [m for m in metrics if any(getattr(r.metrics, m, None) is not None for r in records)]
    main = default_metric(records)
    if main in present:
        present.remove(main)
        present.insert(0, main)
    if not present:
        raise UserError(f"no successful trials in run {run_id} to report")
    return {m: build_report(records, by, run_id, m, run_info=run_info) for m in present}
