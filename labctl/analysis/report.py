"""Reports engineers post: knob values as rows; median rate, 95% CI, n, loss; A/B deltas; notes."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from labctl.errors import UserError
from labctl.analysis.grouping import group_by, sort_key, varying_knobs
from labctl.results.record import TrialRecord
from labctl.profile.knobs import short_label
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


def build_report(records: list[TrialRecord], by: str | None = None, run_id: int | None = None,
                 metric: str = "mpps") -> Report:
    from labctl.analysis.statistics import compare, loss_summary, summarize

    records = [r for r in records if r.status == "ok" and getattr(r.metrics, metric) is not None]
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
        stratum = key[:-1] if by else ()
        if stratum not in baseline:
            baseline[stratum] = values
        elif min(baseline[stratum]) > 0 and min(values) > 0:
            delta = compare(baseline[stratum], values)
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
    if by:
        notes.append(f"deltas compare each {by} with its first value in the same row group")
    return Report(run_id, knobs, by, rows, notes, metric)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cells(report: Report, row: Row) -> list[str]:
    ci = "-" if row.ci[0] is None else f"[{row.ci[0]:.3f}, {row.ci[1]:.3f}]"
    loss = "-" if row.loss is None else f"{row.loss:.4%}"
    delta = "" if row.delta is None else f"{row.delta} {row.verdict}"
    return [_fmt(row.knobs.get(k)) for k in _columns(report)] + [
        _fmt(row.median), ci, str(row.n), loss, delta, "; ".join(row.notes)]


def _columns(report: Report) -> list[str]:
    return [k for k in report.knobs if k != report.by] + ([report.by] if report.by else [])


def headers(report: Report) -> list[str]:
    return _columns(report) + [f"median {report.metric}", "95% CI", "n", "loss", "vs baseline", "notes"]


def render_table(report: Report) -> str:
    head = headers(report)
    body = [_cells(report, row) for row in report.rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in body]
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    head = headers(report)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(report, row)) + " |" for row in report.rows]
    lines += ["", *(f"*{note}*" for note in report.notes)]
    return "\n".join(lines)


def render_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(_columns(report) + [f"median_{report.metric}", "ci_low", "ci_high", "n", "loss_ratio",
                                        "delta", "verdict", "notes", "trials"])
    for row in report.rows:
        writer.writerow([row.knobs.get(k) for k in _columns(report)] +
                        [row.median, row.ci[0], row.ci[1], row.n, row.loss, row.delta, row.verdict,
                         "; ".join(row.notes), " ".join(map(str, row.trials))])
    return out.getvalue()


def render_terminal_plot(report: Report, width: int = 80) -> str:
    """A small bar chart of the medians (plotext), for the table format."""
    import plotext as plt

    labels = [short_label(row.knobs.items()) or "all" for row in report.rows]
    plt.clear_figure()
    plt.simple_bar(labels, [row.median for row in report.rows], width=width,
                   title=f"median {report.metric}")
    return plt.build()


def render(report: Report, fmt: str) -> str:
    if fmt == "table":
        return render_table(report)
    if fmt == "md":
        return render_markdown(report)
    if fmt == "csv":
        return render_csv(report)
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, default=str)
    raise UserError(f"--format {fmt}: not a report format (allowed: table, md, csv, json)")


def trial_summary(record: TrialRecord) -> str:
    m = record.metrics
    lines = []
    if record.status != "ok":
        lines.append(f"trial {record.status}: {record.error}")
    if m.mpps is not None:
        lines.append(f"rate:      {m.mpps:.3f} Mpps, {m.gbps:.3f} Gbit/s (offered {m.offered_mpps:.3f} Mpps, "
                     f"window {m.window_s:.1f} s)")
        if m.mpps_0to1 is not None:
            lines.append(f"per dir:   0->1 {m.mpps_0to1:.3f} Mpps, 1->0 {m.mpps_1to0:.3f} Mpps")
        if m.loss_ratio is not None:
            lines.append(f"loss:      {m.loss_ratio:.4%} (drops: " +
                         ", ".join(f"{k} {v}" for k, v in m.drops.items() if v) + ")")
        if m.queue_shares:
            lines.append("queues:    " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(m.queue_shares.items())))
        if m.cpu:
            lines.append("cpu:       " + ", ".join(f"{k} {v:.0f}%" for k, v in sorted(m.cpu.items())))
        if m.cycles_per_packet:
            lines.append(f"cycles/pkt: {m.cycles_per_packet:.0f} (guest forwarding cores)")
    env = record.env
    if env.lab:
        lines.append(f"env:       {env.lab} lab, accel {env.accel}, DPDK {env.dpdk}, pins {env.pins}, "
                     f"hugepages {env.hugepages}" + (", SHARED CORES" if env.shared_cores else ""))
    for warning in record.warnings:
        lines.append(f"warning:   {warning}")
    return "\n".join(lines)
