"""A pivot report in the shape of the posts engineers compare configurations with: one knob's values as
rows (sessions 1, 4, 8, ... 96), a column group per value of another knob (``--by``: one configuration
each), and per metric the median with its 95% interval and, against the first ``--by`` value (the
baseline configuration), the % change with its bootstrap interval and verdict.

    sessions | queues=1: Gbit/s, host SD us/KB | queues=2: Gbit/s, %, host SD us/KB, %

Trials that differ in any other knob (or in host, accelerator or lab) are never pooled: each combination
of the other varying knobs is a section of its own. ``build_pivot`` is the function;
``render_pivot`` writes it as a table, markdown, CSV or JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from labctl.analysis.grouping import knob_value, group_by, sort_key, varying_knobs
from labctl.analysis.statistics import compare, summarize
from labctl.errors import UserError
from labctl.results.codecs import SCALAR_METRICS
from labctl.results.metrics import SHORT_NAMES, default_metrics, lookup, lower_is_better, resolve
from labctl.results.record import TrialRecord

__all__ = ["build_pivot", "render_pivot", "default_metrics", "lower_is_better", "Pivot", "Section", "PivotRow",
           "Cell", "Change", "headers", "table_rows"]


@dataclass
class Cell:
    median: float
    ci: tuple[float | None, float | None]
    n: int
    trials: list[int]


@dataclass
class Change:
    """A cell against the baseline configuration's cell of the same row: ``+12.0% [+4.1, +20.3]``."""

    text: str
    change_pct: float
    verdict: str


@dataclass
class PivotRow:
    value: Any
    cells: dict[str, Cell] = field(default_factory=dict)  # "<by value>|<metric>" -> cell
    changes: dict[str, Change] = field(default_factory=dict)


@dataclass
class Section:
    """The rows of one combination of the other varying knobs (empty when nothing else varies)."""

    others: dict[str, Any]
    rows: list[PivotRow]


@dataclass
class Pivot:
    run_id: int | None
    rows_knob: str
    by: str
    by_values: list[Any]
    metrics: list[str]
    sections: list[Section]
    notes: list[str] = field(default_factory=list)

    @staticmethod
    def key(by_value: Any, metric: str) -> str:
        return f"{by_value}|{metric}"

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "rows": self.rows_knob, "by": self.by, "by_values": self.by_values,
                "metrics": self.metrics, "sections": [asdict(s) for s in self.sections], "notes": self.notes}


def build_pivot(records: list[TrialRecord], rows: str, by: str, metrics: list[str] | None = None,
                run_id: int | None = None) -> Pivot:
    """Rows = the values of knob ``rows``; a column group per value of knob ``by`` (its first value, in
    sort order, is the baseline); per metric the median, its 95% CI and n, and the % change against the
    baseline with its interval."""
    ok = [r for r in records if r.status == "ok"]
    metrics = [resolve(m, [n for n in SCALAR_METRICS if lookup(n).compared]) for m in metrics or default_metrics(ok)]
    ok = [r for r in ok if any(getattr(r.metrics, m, None) is not None for m in metrics)]
    if not ok:
        raise UserError(f"no successful trials{f' in run {run_id}' if run_id else ''} with {', '.join(metrics)}")
    knobs = varying_knobs(ok)
    for flag, knob in (("--rows", rows), ("--by", by)):
        if knob not in knobs:
            allowed = ", ".join(knobs) or "none (every trial has the same configuration)"
            raise UserError(f"{flag} {knob}: not a knob that varies in this run (allowed: {allowed})")
    if rows == by:
        raise UserError(f"--rows and --by are both {rows} (allowed: two different knobs)")
    others = [k for k in knobs if k not in (rows, by)]
    by_values = [key[0] for key in group_by(sorted(ok, key=lambda r: r.id or 0), [by])]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in by_values):
        by_values.sort()  # numbers ascending; other values in the order they were measured (the sweep's)
    sections = []
    strata = group_by(ok, others) if others else {(): ok}
    for stratum in sorted(strata, key=lambda key: tuple(sort_key(v) for v in key)):
        members = strata[stratum]
        by_row = group_by(members, [rows])
        section_rows = []
        for (value,) in sorted(by_row, key=lambda key: sort_key(key[0])):
            row = PivotRow(value)
            cells = group_by(by_row[(value,)], [by])
            for metric in metrics:
                base_values: list[float] | None = None
                for column, by_value in enumerate(by_values):
                    values = [getattr(r.metrics, metric) for r in cells.get((by_value,), [])
                              if getattr(r.metrics, metric) is not None]
                    if not values:
                        continue
                    summary = summarize(values)
                    trials = [r.id for r in cells[(by_value,)] if r.id is not None]
                    row.cells[Pivot.key(by_value, metric)] = Cell(summary.median, (summary.ci_low, summary.ci_high),
                                                                  summary.n, trials)
                    if column == 0:
                        base_values = values
                    elif base_values and min(base_values) > 0 and min(values) >= 0:
                        delta = compare(base_values, values, higher_is_better=not lower_is_better(metric))
                        row.changes[Pivot.key(by_value, metric)] = Change(delta.format(), delta.change_pct,
                                                                          delta.verdict)
            section_rows.append(row)
        sections.append(Section(dict(zip(others, stratum)), section_rows))
    notes = [f"% change: each {by} against {by} = {by_values[0]} in the same row (median ratio, 95% bootstrap "
             "interval; n < 3 per cell gives no verdict)"]
    if any(r.env.accel == "tcg" for r in ok):
        notes.append("TCG: these guests ran under software emulation; the figures are functional, not representative")
    shared = sorted({str(knob_value(r, by)) for r in ok if r.env.shared_cores})
    if shared:
        notes.append(f"shared cores: trials of {by} = {', '.join(shared)} ran with two busy pollers on one CPU or on "
                     "an oversubscribed host")
    backends = sorted({r.env.virtio_backend for r in ok if r.env.virtio_backend})
    if backends:
        notes.append(f"virtio-net backend: {', '.join(backends)}"
                     + (" (no /dev/vhost-net on the host: QEMU's userspace backend)" if "userspace" in backends else ""))
    if any(m.startswith("service_demand_host") for m in metrics):
        notes.append("host SD is system-wide (/proc/stat): everything else running on the host is in it")
    return Pivot(run_id, rows, by, by_values, metrics, sections, notes)


# --- rendering ------------------------------------------------------------------------------------


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3f}"


def _cell(cell: Cell | None) -> str:
    if cell is None:
        return "-"
    if cell.ci[0] is None or cell.n < 2:
        return _num(cell.median) + (f" (n={cell.n})" if cell.n > 1 else "")
    return f"{_num(cell.median)} [{_num(cell.ci[0])}, {_num(cell.ci[1])}] n={cell.n}"


def _change(change: Change | None) -> str:
    if change is None:
        return "-"
    return change.text + ("" if change.verdict == "inconclusive" else f" {change.verdict}")


def _short(knob: str) -> str:
    return knob.split(".")[-1]


def headers(pivot: Pivot) -> list[str]:
    head = [_short(pivot.rows_knob)]
    for column, by_value in enumerate(pivot.by_values):
        for metric in pivot.metrics:
            name = f"{_short(pivot.by)}={by_value} {SHORT_NAMES.get(metric, metric)}"
            head.append(name)
            if column:
                head.append(f"{name} %")
    return head


def table_rows(pivot: Pivot, section: Section) -> list[list[str]]:
    out = []
    for row in section.rows:
        cells = [str(row.value)]
        for column, by_value in enumerate(pivot.by_values):
            for metric in pivot.metrics:
                key = Pivot.key(by_value, metric)
                cells.append(_cell(row.cells.get(key)))
                if column:
                    cells.append(_change(row.changes.get(key)))
        out.append(cells)
    return out


def _title(section: Section) -> str | None:
    if not section.others:
        return None
    return ", ".join(f"{k}={v}" for k, v in section.others.items())


def render_pivot(pivot: Pivot, fmt: str = "table") -> str:
    import csv
    import io
    import json

    if fmt == "json":
        return json.dumps(pivot.to_dict(), indent=2, default=str)
    head = headers(pivot)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        others = list(pivot.sections[0].others) if pivot.sections else []
        writer.writerow(others + head)
        for section in pivot.sections:
            for cells in table_rows(pivot, section):
                writer.writerow([section.others[k] for k in others] + cells)
        return out.getvalue()
    lines: list[str] = []
    for section in pivot.sections:
        body = table_rows(pivot, section)
        title = _title(section)
        if fmt == "md":
            if title:
                lines += [f"**{title}**", ""]
            lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in body]
            lines.append("")
            continue
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
        if title:
            lines.append(f"[{title}]")
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in body]
        lines.append("")
    lines += [f"*{n}*" if fmt == "md" else f"note: {n}" for n in pivot.notes]
    return "\n".join(lines).rstrip() + "\n"
