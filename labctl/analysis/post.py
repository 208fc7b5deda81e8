"""A comparison in the shape performance posts and patch cover letters use (``labctl compare --format
post``): one line per configuration, ``256B: 4.69 vs 5.42 Mpps (+15.6% [+12.1, +19.0]) progression``,
under a heading per candidate, and under the rows what the numbers are to be read against: the host,
its CPU model, the accelerator (TCG numbers are functional, not performance), n per side, the threshold
and the confidence of each interval.

The row label is the configuration's varying knobs: a frame size as the posts write it (``256B``), any
other knob as ``name=value`` (its last path part, :func:`labctl.profile.knobs.short_label`); the unit
is the metric's, from the registry (:mod:`labctl.results.metrics`). Works for a comparison of two runs
and for one knob's values inside one run (:mod:`labctl.analysis.within`) alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from labctl.analysis.compare import Comparison, ConfigVerdict
from labctl.errors import UserError
from labctl.profile.knobs import short_label
from labctl.results.metrics import lookup

__all__ = ["FORMATS", "check_format", "row_label", "number", "render_post"]

#: how ``labctl compare`` shows a comparison
FORMATS = ("table", "json", "post")


def check_format(fmt: str) -> None:
    """``--format``: table, json or post, else one line naming them."""
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: a comparison is shown as {', '.join(FORMATS)} (allowed: "
                        f"{', '.join(FORMATS)})")

#: knobs the posts write as a value with a unit, not ``name=value``
_UNITS = {"workload.packet_size": "B"}


def row_label(knobs: dict[str, Any]) -> str:
    """``256B rx_queue_size=512``: the frame size as posted, other knobs by their last path part,
    host/accelerator/lab (``env.*``) by their name; ``all`` when nothing varies."""
    parts = []
    for knob, value in knobs.items():
        if knob in _UNITS:
            parts.append(f"{value}{_UNITS[knob]}")
        elif knob.startswith("env."):
            parts.append(f"{knob[4:]}={value}")
        else:
            parts.append(short_label([(knob, value)]))
    return " ".join(parts) or "all"


def _decimals(values: Sequence[float | None]) -> int:
    """Decimals that show three significant digits of the smallest value (``4.69``, ``0.0123``, ``1235``)."""
    shown = [abs(v) for v in values if v is not None and v != 0 and math.isfinite(v)]
    if not shown:
        return 2
    return max(0, 2 - math.floor(math.log10(min(shown))))


def number(value: float | None, decimals: int) -> str:
    return "-" if value is None else f"{value:.{decimals}f}"


def _verdict(item: ConfigVerdict) -> str:
    return f"cannot tell ({item.cause})" if item.verdict == "cannot tell" and item.cause else item.verdict


def _row(item: ConfigVerdict, unit: str, width: int) -> str:
    """``256B: 4.69 vs 5.42 Mpps (+15.6% [+12.1, +19.0]) progression``, the label padded to ``width``."""
    base = item.baseline.median if item.baseline else None
    cand = item.candidate.median if item.candidate else None
    decimals = _decimals([base, cand])
    figures = f"{number(base, decimals)} vs {number(cand, decimals)}" + (f" {unit}" if unit else "")
    change = f" ({item.change})" if item.change_pct is not None else ""
    return f"{(row_label(item.knobs) + ':').ljust(width)} {figures}{change} {_verdict(item)}"


def _sections(c: Comparison) -> list[tuple[str, list[ConfigVerdict]]]:
    """(heading, rows) per candidate: ``build: base vs slow`` within a run, ``run 1 vs run 2`` between runs."""
    by = getattr(c, "by", "")
    if not by:
        return [(f"run {c.baseline.get('id')} vs run {c.candidate.get('id')}", list(c.items))]
    base = getattr(c, "baseline_value", None)
    out: list[tuple[str, list[ConfigVerdict]]] = []
    for value in getattr(c, "candidate_values", []):
        rows = [i for i in c.items if repr(i.candidate_value) == repr(value)]
        out.append((f"{by.split('.')[-1]}: {base} vs {value}", rows))
    return out


def _sides(items: Sequence[ConfigVerdict], side: str) -> str:
    counts = sorted({getattr(i, side).n for i in items if getattr(i, side) is not None})
    if not counts:
        return "0"
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _footer(c: Comparison) -> list[str]:
    env = c.env
    host = env.get("host") or c.candidate.get("host") or c.baseline.get("host") or "unknown"
    cpu = env.get("cpu_model")
    accel = env.get("accel")
    run = ""
    if getattr(c, "by", "") and c.baseline.get("id") is not None:  # one run: say which (two runs are named in the heading)
        profile = c.baseline.get("profile_name")
        run = f"run {c.baseline.get('id')}" + (f" ({profile})" if profile else "") + ", "
    lines = [f"{run}host {host}" + (f", {cpu}" if cpu else "") + f", accelerator {accel or 'unknown'}"
             + {"tcg": " (TCG: the numbers are functional, not representative of KVM)",
                "none": " (the embedded lab: no VM)"}.get(accel or "", "")]
    metric = lookup(c.metric)
    direction = "lower is better" if c.lower_is_better else "higher is better"
    lines.append(f"{c.metric}" + (f" ({metric.label}; {direction})" if metric else f" ({direction})")
                 + f": medians of n = {_sides(c.items, 'baseline')} vs {_sides(c.items, 'candidate')} trials per row")
    lines.append(f"change: [{100 * c.confidence:.4g}% interval] of the bootstrap of medians "
                 f"({len([i for i in c.items if i.change_pct is not None])} rows, family-wise 95%); "
                 f"threshold ±{c.threshold_pct:g}%")
    return lines


def render_post(c: Comparison) -> str:
    """The comparison as the posts' rows (see the module docstring), the host, CPU model and accelerator
    from ``c.env`` (what the compared trials share)."""
    metric = lookup(c.metric)
    unit = metric.unit if metric else ""
    lines: list[str] = []
    width = max([len(row_label(i.knobs)) + 1 for i in c.items] or [0])
    for heading, items in _sections(c):
        if lines:
            lines.append("")
        lines.append(heading)
        lines += [_row(item, unit, width) for item in items] or ["(no configuration)"]
    lines.append("")
    lines += _footer(c)
    lines.append(f"verdict: {c.summary()} -> exit {c.exit_code}")
    return "\n".join(lines)
