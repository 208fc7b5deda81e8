"""A :class:`~labctl.analysis.compare.Comparison` as the text `labctl compare` prints (and the JUnit
report carries): the runs, their environment changes, one row per configuration, the reason of every
verdict but "no change", the overall verdict with its exit code, and the notes."""

from __future__ import annotations

import time
from typing import Any

from labctl.analysis.compare import Comparison
from labctl.analysis.environments import ENV_FIELDS
from labctl.analysis.renderers import aligned

__all__ = ["render_comparison", "format_time"]


def format_time(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def _run_line(role: str, run: dict[str, Any]) -> str:
    parts = [p for p in (run.get("profile_name"), run.get("host") and f"host {run['host']}",
                         run.get("created_at") and format_time(run["created_at"]),
                         run.get("db") and str(run["db"])) if p]
    return f"{role} run {run.get('id')}" + (f" ({', '.join(parts)})" if parts else "")


def _heading(c: Comparison) -> list[str]:
    """The runs compared, or the run and the knob values compared inside it."""
    by = getattr(c, "by", "")
    if not by:
        return [_run_line("baseline: ", c.baseline), _run_line("candidate:", c.candidate)]
    name = by.split(".")[-1]
    values = ", ".join(str(v) for v in getattr(c, "candidate_values", []))
    return [_run_line("run:       ", c.baseline), f"baseline:   {by} = {getattr(c, 'baseline_value', None)}",
            f"candidates: {by} = {values} (each against {name}={getattr(c, 'baseline_value', None)}, "
            "configuration by configuration of the other knobs)"]


def render_comparison(comparison: Comparison) -> str:
    """The comparison as text: the runs, what changed in their environments, one row per configuration,
    the reason of every verdict but "no change", and notes (the posts' rows:
    :func:`labctl.analysis.post.render_post`)."""
    c = comparison
    lines = _heading(c)
    if c.env_changes:
        lines.append("environment changes:")
        lines += [f"  {change.format()}" for change in c.env_changes]
    else:
        lines.append("environment changes: none (" + ", ".join(ENV_FIELDS) + " are the same)")
    direction = "higher is worse" if c.lower_is_better else "higher is better"
    lines.append(f"metric {c.metric} ({direction}); a regression's whole interval lies beyond "
                 f"{'+' if c.lower_is_better else '-'}{c.threshold_pct:g}%")
    lines.append("")
    head = ["configuration", f"baseline {c.metric} [95% CI]", f"candidate {c.metric} [95% CI]",
            f"change [{100 * c.confidence:.4g}% CI]", "verdict", "notes"]
    body = [[item.label, item.baseline.format() if item.baseline else "-",
             item.candidate.format() if item.candidate else "-", item.change, item.verdict, "; ".join(item.notes)]
            for item in c.items]
    lines.append(aligned(head, body))
    why = [item for item in c.items if item.verdict != "no change"]
    if why:
        lines.append("")
        lines += [f"{item.label}: {item.verdict}: {item.reason}" for item in why]
    lines.append("")
    lines.append(f"verdict: {c.summary()} -> exit {c.exit_code}")
    lines += [f"note: {note}" for note in c.notes]
    return "\n".join(lines)
