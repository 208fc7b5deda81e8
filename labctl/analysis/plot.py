"""PNG plots of a run: median rate with its 95% CI against one knob, one series per other knobs; or, with
no knob to group by, one point per configuration."""

from __future__ import annotations

from pathlib import Path

from labctl.analysis.grouping import sort_key
from labctl.profile.knobs import short_label
from labctl.analysis.report import Report


def plot_report(report: Report, out: Path, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if report.by is None:
        return _plot_ungrouped(report, out, title, plt)
    series: dict[tuple, list] = {}
    others = [k for k in report.knobs if k != report.by]
    for row in report.rows:
        series.setdefault(tuple(row.knobs.get(k) for k in others), []).append(row)
    xs_all = sorted({row.knobs[report.by] for row in report.rows}, key=sort_key)
    position = {x: i for i, x in enumerate(xs_all)}  # categorical axis: ring sizes, queue counts, modes
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    width = 0.25 / max(len(series), 1)
    for index, (key, rows) in enumerate(series.items()):
        rows = sorted(rows, key=lambda r: sort_key(r.knobs[report.by]))
        dodge = (index - (len(series) - 1) / 2) * width  # keep overlapping intervals apart
        xs = [position[r.knobs[report.by]] + dodge for r in rows]
        ys = [r.median for r in rows]
        lo = [r.median - r.ci[0] if r.ci[0] is not None else 0 for r in rows]
        hi = [r.ci[1] - r.median if r.ci[1] is not None else 0 for r in rows]
        label = short_label(zip(others, key)) or report.metric
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=label)
        for x, y, r in zip(xs, ys, rows):
            if r.notes:
                ax.annotate("*", (x, y), textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.set_xlabel(report.by)
    ax.set_xticks(range(len(xs_all)), [str(x) for x in xs_all])
    ax.set_xlim(-0.5, len(xs_all) - 0.5)
    ax.set_ylabel(f"median {report.metric} (95% CI)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(title=", ".join(k.split(".")[-1] for k in others) or None, fontsize=8)
    ax.set_title(title or f"run {report.run_id}: {report.metric} by {report.by}")
    return _finish(report, fig, out, plt)


def _plot_ungrouped(report: Report, out: Path, title: str | None, plt) -> Path:
    """No knob on the x axis: one point per configuration (its knob values as the tick label), in the
    report's order; a run of one configuration is one point."""
    rows = report.rows
    labels = [short_label(((k, row.knobs.get(k)) for k in report.knobs), "\n") or "all trials" for row in rows]
    fig, ax = plt.subplots(figsize=(max(8, 1.2 * len(rows)), 5), dpi=110)
    xs = list(range(len(rows)))
    lo = [r.median - r.ci[0] if r.ci[0] is not None else 0 for r in rows]
    hi = [r.ci[1] - r.median if r.ci[1] is not None else 0 for r in rows]
    ax.errorbar(xs, [r.median for r in rows], yerr=[lo, hi], marker="o", capsize=4, linestyle="none")
    for x, r in zip(xs, rows):
        if r.notes:
            ax.annotate("*", (x, r.median), textcoords="offset points", xytext=(6, 6), fontsize=9)
    ax.set_xticks(xs, labels, fontsize=8)
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.set_xlabel("configuration")
    ax.set_ylabel(f"median {report.metric} (95% CI)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(title or f"run {report.run_id}: {report.metric} per configuration")
    return _finish(report, fig, out, plt)


def _finish(report: Report, fig, out: Path, plt) -> Path:
    footer = "; ".join(n for n in report.notes if "TCG" in n or "shared" in n)
    if any(row.notes for row in report.rows):
        footer = ("* has notes (bands, variance, n, TCG, shared cores): see labctl report. " + footer).strip()
    if footer:
        fig.text(0.01, 0.01, footer, fontsize=7, alpha=0.8, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(out)
    plt.close(fig)
    return out
