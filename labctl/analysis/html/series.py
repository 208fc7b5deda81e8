"""The plots of the trend and bisect pages, drawn from their documents as inline SVG (the run page's way:
:mod:`labctl.analysis.html.figures`): a series' run medians with their 95% intervals in time order, each
jumpavg group's average as a segment over its runs, and a circle where a group starts, red for a
regression and green for a progression (as CSIT's trending graphs mark them); a bisect's commits in
first-parent order with each measured commit's median, coloured by its step's verdict, and the good and
bad builds' medians as reference lines."""

from __future__ import annotations

from typing import Any

from labctl.analysis.html.figures import _figure, _plt, _svg

MARK_COLOURS = {"regression": "#c0392b", "progression": "#1e8449"}
VERDICT_COLOURS = {"good": "#1e8449", "bad": "#c0392b", "cannot tell": "#7f8c8d", "skip": "#7f8c8d"}


def trend_series(series: dict[str, Any], metric: str) -> str | None:
    """One series of a trend (:meth:`labctl.analysis.trend.Trend.to_dict`'s ``series`` entry)."""
    rows = series["rows"]
    points = [(i, r) for i, r in enumerate(rows) if r["side"]["median"] is not None]
    if not points:
        return None
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt, height=4.0)
        xs = [i for i, _ in points]
        ys = [r["side"]["median"] for _, r in points]
        lo = [r["side"]["median"] - (r["side"]["ci_low"] if r["side"]["ci_low"] is not None else r["side"]["median"])
              for _, r in points]
        hi = [(r["side"]["ci_high"] if r["side"]["ci_high"] is not None else r["side"]["median"]) - r["side"]["median"]
              for _, r in points]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, linestyle="none", color="#2471a3",
                    label="run median (95% CI)")
        position = {r["run_id"]: i for i, r in enumerate(rows)}
        for n, group in enumerate(series["groups"]):
            first, last = position.get(group["first_run"], 0), position.get(group["last_run"], len(rows) - 1)
            ax.hlines(group["avg"], first - 0.3, last + 0.3, colors="#5d6d7e", linewidth=2,
                      label="group average (jumpavg)" if n == 0 else None)
        for mark in series["marks"]:
            x = position.get(mark["run_id"])
            if x is not None:
                ax.plot([x], [mark["after"]], marker="o", markersize=14, markerfacecolor="none", markeredgewidth=2.5,
                        color=MARK_COLOURS.get(mark["kind"], "black"), linestyle="none")
        ax.set_xticks(range(len(rows)), [str(r["run_id"]) for r in rows], fontsize=8)
        ax.set_xlim(-0.6, len(rows) - 0.4)
        return _finish(fig, ax, plt, "run, in the order measured (red circle: a regression starts; green: a "
                       "progression)", f"median {metric}")


def bisect_commits(doc: dict[str, Any]) -> str | None:
    """Each measured commit's median in its step, at its place among the commits (oldest left)."""
    commits = [c["sha"] for c in doc.get("commits") or []]
    measured = [s for s in doc.get("steps", []) if s["kind"] == "measure"]
    if not commits or not measured:
        return None
    plt = _plt()
    place = {sha: i + 1 for i, sha in enumerate(commits)}
    place[doc["good"]] = 0
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt, height=4.0)
        ends: dict[str, list[float]] = {"good": [], "bad": []}
        for step in measured:
            medians = step["detail"].get("medians") or {}
            value = medians.get(step["sha"][:12])
            for end in ("good", "bad"):
                if medians.get(doc[end][:12]) is not None:
                    ends[end].append(medians[doc[end][:12]])
            if value is not None:
                ax.plot([place.get(step["sha"], 0)], [value], marker="o", markersize=9, linestyle="none",
                        color=VERDICT_COLOURS.get(step["verdict"], "black"))
                ax.annotate(str(step["position"]), (place.get(step["sha"], 0), value), textcoords="offset points",
                            xytext=(6, 6), fontsize=8)
        for end, style in (("good", "--"), ("bad", ":")):
            if ends[end]:
                ax.axhline(sum(ends[end]) / len(ends[end]), color=VERDICT_COLOURS[end], linestyle=style, linewidth=1.2,
                           label=f"{end} {doc[end][:12]} (mean of its medians per step)")
        if doc.get("first_bad"):
            ax.axvline(place.get(doc["first_bad"], 0) - 0.5, color="#c0392b", linewidth=1, alpha=0.6)
        ax.set_xticks(range(len(commits) + 1), [doc["good"][:7]] + [c[:7] for c in commits], rotation=60, fontsize=7)
        return _finish(fig, ax, plt, "commits along the first parents (number: the step; green good, red bad, grey "
                       "cannot tell)", f"median {doc.get('metric') or 'rate'} in its step")


def _finish(fig, ax, plt, xlabel: str, ylabel: str) -> str:
    """Labels, a zero-based y axis, the grid and the legend; the figure as SVG."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return _svg(fig, plt)
