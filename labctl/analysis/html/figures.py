"""The page's plots, drawn from the document (never from records) with matplotlib's SVG backend and
returned as inline ``<svg>`` text: medians with their 95% intervals per knob value (a series per
combination of the other knobs), an NDR/PDR search's loss against load with its bounds, latency
percentiles at shares of the PDR, and a comparison's changes with their intervals and the threshold.

Text stays text (``svg.fonttype: none``: the browser's own fonts, nothing embedded) and is escaped by
matplotlib's SVG writer; ``text.parse_math`` is off so a ``$`` in a name is only a character."""

from __future__ import annotations

import io
import itertools
import re
from typing import Any

from labctl.analysis.grouping import sort_key

_counter = itertools.count()

#: Most series drawn in one NDR plot (a run may hold many searches; the table lists them all).
MAX_SEARCHES = 8


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(knobs: dict[str, Any], keys: list[str]) -> str:
    return ", ".join(f"{k.split('.')[-1]}={knobs.get(k)}" for k in keys)


def _svg(fig, plt) -> str:
    """The figure as an ``<svg>`` element: no XML declaration, DOCTYPE or metadata; ids unique per page."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"labctl-{next(_counter)}",
                                "text.parse_math": False}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return re.sub(r'\s(width|height)="[0-9.]+pt"', "", text, count=2)  # scales with the page (viewBox kept)


def _figure(plt, width: float = 9.0, height: float = 4.6):
    with plt.rc_context({"text.parse_math": False}):
        return plt.subplots(figsize=(width, height), dpi=100)


def medians(doc: dict[str, Any]) -> str | None:
    """Median with its 95% interval per value of the report's ``by`` knob, one series per combination
    of the other knobs; without ``by`` one point per configuration. None for fewer than two
    configurations: one dot compares nothing (the table holds its figures)."""
    rows, by, knobs, metric = doc["rows"], doc["by"], doc["knobs"], doc["metric"]
    if len(rows) < 2:
        return None
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt)
        if by:
            others = [k for k in knobs if k != by]
            xs_all = sorted({row["knobs"][by] for row in rows}, key=sort_key)
            position = {str(x): i for i, x in enumerate(xs_all)}
            series: dict[tuple, list] = {}
            for row in rows:
                series.setdefault(tuple(str(row["knobs"].get(k)) for k in others), []).append(row)
            width = 0.25 / max(len(series), 1)
            for index, (key, members) in enumerate(series.items()):
                dodge = (index - (len(series) - 1) / 2) * width
                members = sorted(members, key=lambda r: sort_key(r["knobs"][by]))
                _errorbar(ax, [position[str(r["knobs"][by])] + dodge for r in members], members,
                          _label(members[0]["knobs"], others) or metric)
            ax.set_xticks(range(len(xs_all)), [str(x) for x in xs_all])
            ax.set_xlim(-0.5, len(xs_all) - 0.5)
            ax.set_xlabel(by)
            if len(series) > 1:
                ax.legend(fontsize=8, title=", ".join(k.split(".")[-1] for k in others))
        else:
            _errorbar(ax, list(range(len(rows))), rows, metric, line=False)
            ax.set_xticks(range(len(rows)), [_label(r["knobs"], knobs).replace(", ", "\n") or "all trials"
                                              for r in rows], fontsize=8)
            ax.set_xlim(-0.5, len(rows) - 0.5)
            ax.set_xlabel("configuration")
        ax.set_ylabel(f"median {metric} (95% CI)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        return _svg(fig, plt)


def _errorbar(ax, xs: list[float], rows: list[dict[str, Any]], label: str, line: bool = True) -> None:
    ys = [r["median"] for r in rows]
    lo = [r["median"] - r["ci"][0] if r["ci"][0] is not None else 0 for r in rows]
    hi = [r["ci"][1] - r["median"] if r["ci"][1] is not None else 0 for r in rows]
    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=label, linestyle="-" if line else "none")


#: The view of the loss plot: this factor below the lowest NDR and above the highest PDR found.
VIEW_MARGIN = 4.0


def load_view(searches: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The offered-load range the loss plot shows: around the searches' bounds (lowest NDR / VIEW_MARGIN to
    highest PDR x VIEW_MARGIN), clipped to what was measured; None when no search found a bound.

    A search starts at the generator's maximum (20 Mpps and more here) and walks down to an NDR that may be
    forty times lower: on a linear axis up to the maximum its trials near the bounds crowd into the left
    edge. The axis is logarithmic and the view is where the search decided."""
    bounds = [s[name] for s in searches for name in ("ndr_mpps", "pdr_mpps") if s.get(name)]
    loads = [p["offered_mpps"] for s in searches for p in s["measurements"] if p.get("offered_mpps")]
    if not bounds or not loads:
        return None
    low = max(min(bounds) / VIEW_MARGIN, min(loads) * 0.9)
    high = min(max(bounds) * VIEW_MARGIN, max(loads) * 1.1)
    return (low, high) if high > low else None


def ndr_loss(doc: dict[str, Any]) -> str | None:
    """Each search's measurements: loss ratio against offered load (a log axis, viewed around the bounds:
    :func:`load_view`; how many trials lie beyond the view is said in the title), the NDR and PDR as
    vertical lines."""
    searches = [s for s in doc.get("searches", []) if s["measurements"]][:MAX_SEARCHES]
    if not searches:
        return None
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt)
        keys = list(doc["knobs"])
        for s in searches:
            pts = [p for p in s["measurements"] if p["loss_ratio"] is not None]
            label = f"trial {s['trial']}" + (f": {_label(s['knobs'], keys)}" if keys else "")
            line, = ax.plot([p["offered_mpps"] for p in pts], [max(p["loss_ratio"], 0) * 100 for p in pts],
                            marker="o", linestyle="none", label=label, alpha=0.8)
            for name, style in (("ndr_mpps", "--"), ("pdr_mpps", ":")):
                if s[name] is not None:
                    ax.axvline(s[name], color=line.get_color(), linestyle=style, linewidth=1.2)
        ax.axhline(searches[0]["pdr_loss_ratio"] * 100, color="grey", linewidth=0.8, alpha=0.7)
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        title = "loss against load; dashed: NDR, dotted: PDR, grey: the PDR's loss limit"
        view = load_view(searches)
        # minor ticks named too: every one within a view narrower than a decade, else 2 and 5 of each decade
        narrow = view is not None and view[1] / view[0] < 10
        ax.xaxis.set_minor_formatter(FuncFormatter(
            lambda v, _pos: f"{v:g}" if narrow or f"{v:.0e}"[0] in "25" else ""))
        if view is not None:
            ax.set_xlim(*view)
            beyond = sum(not view[0] <= p["offered_mpps"] <= view[1] for s in searches for p in s["measurements"]
                         if p["loss_ratio"] is not None)
            if beyond:
                title += f"\n{beyond} trial{'s' if beyond != 1 else ''} beyond this view (log axis, around the bounds)"
        ax.set_xlabel("offered load (Mpps, log scale)")
        ax.set_ylabel("loss (%)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        return _svg(fig, plt)


def latency(doc: dict[str, Any]) -> str | None:
    """Latency percentiles (p50, p90, p99) at the shares of the PDR each search measured them at."""
    searches = [s for s in doc.get("searches", []) if s["latency"]][:MAX_SEARCHES]
    if not searches:
        return None
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt, height=4.0)
        for s, pct in itertools.product(searches, ("p50_us", "p90_us", "p99_us")):
            pts = [p for p in s["latency"] if p.get(pct) is not None]
            ax.plot([p["load_pct"] for p in pts], [p[pct] for p in pts], marker="o",
                    label=f"trial {s['trial']} {pct.removesuffix('_us')}")
        ax.set_xlabel("load (% of PDR)")
        ax.set_xticks([10, 50, 90])
        ax.set_ylabel("latency (us)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, ncols=3)
        fig.tight_layout()
        return _svg(fig, plt)


VERDICT_COLOURS = {"regression": "#c0392b", "progression": "#1e8449", "no change": "#2471a3",
                   "cannot tell": "#7f8c8d"}


def changes(doc: dict[str, Any]) -> str | None:
    """A comparison's change per configuration with its interval, the threshold's band shaded."""
    items = [v for v in doc["verdicts"] if v.get("change_pct") is not None]
    if not items:
        return None
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, ax = _figure(plt, height=max(2.5, 0.45 * len(items) + 1.4))
        t = doc["threshold_pct"]
        ax.axvspan(-t, t, color="#d6eaf8", alpha=0.6, label=f"±{t:g}% threshold")
        ax.axvline(0, color="black", linewidth=0.8)
        for y, v in enumerate(items):
            lo = v["change_pct"] - v["ci_low_pct"] if v.get("ci_low_pct") is not None else 0
            hi = v["ci_high_pct"] - v["change_pct"] if v.get("ci_high_pct") is not None else 0
            ax.errorbar([v["change_pct"]], [y], xerr=[[lo], [hi]], marker="o", capsize=4,
                        color=VERDICT_COLOURS.get(v["verdict"], "black"))
        ax.set_yticks(range(len(items)), [_item_label(v) for v in items], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"change of {doc['metric']} (%), {doc['confidence']:.1%} interval")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        return _svg(fig, plt)


def _item_label(v: dict[str, Any]) -> str:
    label = v.get("label") or "all"
    if "candidate_value" in v:
        label = f"{v['candidate_value']}: {label}"
    return label[:60]


#: Most reconf or soak trials drawn (a run holds one; the list under the plots names them all).
MAX_LIVE = 4
OUTAGE_COLOUR, STALL_COLOUR, CHANGE_COLOUR = "#c0392b", "#7f8c8d", "#2471a3"


def _per_s(counts: list[int], bin_s: float) -> list[float]:
    return [c / bin_s / 1e6 for c in counts]


def _latency_axis(ax, xs: list[float], series: dict[str, Any]) -> None:
    """p50, p99 and max latency per bin on a log axis labelled in plain numbers (mathtext is off)."""
    from matplotlib.ticker import FuncFormatter

    drawn = False
    for key, style in (("p50_us", "-"), ("p99_us", "-"), ("max_us", ":")):
        ys = [v if v else float("nan") for v in series.get(key, [])]
        if any(v == v for v in ys):
            ax.plot(xs[:len(ys)], ys, style, linewidth=0.9, label=key.removesuffix("_us"))
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "latency not measured", transform=ax.transAxes, ha="center", va="center", fontsize=8)
        ax.set_yticks([])
        return
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
    ax.set_ylabel("latency (us)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper right", ncols=3)


def _rates(ax, xs: list[float], offered: list[int], received: list[int], bin_s: float) -> None:
    """Received against offered rate per bin, and the frames lost in each bin as red bars: a dip of both lines
    is the generator's own pause (on a shared host), red is loss."""
    ax.plot(xs, _per_s(received, bin_s), color="#1e8449", linewidth=1.0, label="received")
    ax.plot(xs, _per_s(offered, bin_s), color="#34495e", linewidth=0.8, linestyle="--", label="offered")
    lost = [max(o - r, 0) / bin_s / 1e6 for o, r in zip(offered, received)]
    if any(lost):
        ax.bar(xs, lost, width=bin_s, align="edge", color=OUTAGE_COLOUR, alpha=0.8, label="lost (rate)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)


def reconf_timeline(trial: dict[str, Any]) -> str | None:
    """A reconf trial around its change: received against offered rate per 10 ms bin and latency per bin,
    over the whole trial (left) and close around the change (right); the change's start at 0 (its duration
    shaded blue) and every outage shaded red."""
    series = trial.get("series") or {}
    if not series.get("offered"):
        return None
    bin_s, t0 = series["bin_s"], series["t0_s"]
    xs = [t0 + i * bin_s for i in range(len(series["offered"]))]
    after = [o for o in trial.get("outages", []) if o.get("window") in ("after", "across")]
    zoom_end = max([o["end_s"] for o in after] + [trial.get("change_took_s", 0)]) + 0.25
    zoom = (-0.25, max(zoom_end, 0.5))
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, axes = plt.subplots(2, 2, figsize=(9.4, 5.8), dpi=100, sharex="col",
                                 gridspec_kw={"width_ratios": [3, 2]})
        for col, span in enumerate((None, zoom)):
            top, bottom = axes[0][col], axes[1][col]
            _rates(top, xs, series["offered"], series["received"], bin_s)
            _latency_axis(bottom, xs, series)
            for ax in (top, bottom):
                ax.axvspan(0, max(trial.get("change_took_s", 0), bin_s / 4), color=CHANGE_COLOUR, alpha=0.25)
                ax.axvline(0, color=CHANGE_COLOUR, linewidth=1.0)
                for o in trial.get("outages", []):
                    ax.axvspan(o["start_s"], max(o["end_s"], o["start_s"] + bin_s / 4), color=OUTAGE_COLOUR,
                               alpha=0.35, linewidth=0)
                if span is not None:
                    ax.set_xlim(*span)
            top.set_ylabel(f"Mpps per {round(bin_s * 1000, 1):g} ms bin" if col == 0 else "")
            top.set_title("the whole trial" if span is None else "around the change", fontsize=9)
            bottom.set_xlabel("seconds from the change's start")
        axes[0][0].legend(fontsize=7, loc="lower left")
        fig.suptitle(f"trial {trial['trial']}: {trial.get('change', '')} (blue: the change; red: outages and the "
                     "frames lost per bin)", fontsize=9)
        fig.tight_layout()
        return _svg(fig, plt)


def _event_rug(ax, events: list[dict[str, Any]]) -> None:
    """Each loss event a red tick along the top of ``ax`` at its start, those at a host stall on a lower row:
    a soak can hold hundreds of events, which full-height lines would paint over the series."""
    for row, at_stall in ((0.97, False), (0.91, True)):
        starts = [e["start_s"] for e in events if bool(e.get("host_stall")) == at_stall]
        if starts:
            ax.scatter(starts, [row] * len(starts), marker="|", s=60, linewidths=0.8, color=OUTAGE_COLOUR,
                       alpha=0.9 if not at_stall else 0.6, transform=ax.get_xaxis_transform(), clip_on=False,
                       label="loss event at a host stall" if at_stall else "loss event")


def soak_timeline(trial: dict[str, Any]) -> str | None:
    """A soak second by second: received against offered rate and the packets lost in each second, latency
    percentiles; loss events as red ticks along the top (a lower row where they fell at a host stall), host stalls
    shaded grey."""
    points = trial.get("series") or []
    if not points:
        return None
    bin_s = trial.get("bin_s") or 1.0
    xs = [p["t_s"] for p in points]
    plt = _plt()
    with plt.rc_context({"text.parse_math": False}):
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(9.4, 5.8), dpi=100, sharex=True)
        top.plot(xs, _per_s([p["received"] for p in points], bin_s), color="#1e8449", linewidth=1.0,
                 label="received")
        top.plot(xs, _per_s([p["offered"] for p in points], bin_s), color="#34495e", linewidth=0.8, linestyle="--",
                 label="offered")
        top.set_ylim(bottom=0)
        top.set_ylabel("Mpps")
        lost = top.twinx()
        lost.bar(xs, [p["lost"] for p in points], width=bin_s, align="edge", color=OUTAGE_COLOUR, alpha=0.6,
                 label="lost in the second")
        lost.set_ylabel("packets lost", color=OUTAGE_COLOUR)
        lost.set_ylim(bottom=0, top=max([p["lost"] for p in points] + [1]) * 1.15)
        series = {k: [p.get(k) for p in points] for k in ("p50_us", "p99_us", "max_us")}
        _latency_axis(bottom, xs, series)
        for h in trial.get("host", []):
            if h.get("stall"):
                for ax in (top, bottom):
                    ax.axvspan(h["t_s"], h["t_s"] + 1.0, color=STALL_COLOUR, alpha=0.3, linewidth=0)
        _event_rug(top, trial.get("events", []))
        top.grid(True, alpha=0.3)
        top.legend(fontsize=7, loc="lower left")
        bottom.set_xlabel("seconds from the soak's start")
        fig.suptitle(f"trial {trial['trial']}: {len(points)} points (red ticks along the top: loss events, the "
                     "lower row at a host stall; grey: host stalls)", fontsize=9)
        fig.tight_layout()
        return _svg(fig, plt)


def live(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The reconf and soak trials' time plots, with their captions."""
    out = []
    for trial in doc.get("live", [])[:MAX_LIVE]:
        if trial["kind"] == "reconf":
            svg = reconf_timeline(trial)
            caption = f"reconf trial {trial['trial']}: rate and latency around the change"
        else:
            svg = soak_timeline(trial)
            caption = f"soak trial {trial['trial']}: second by second, loss events and host stalls marked"
        if svg:
            out.append((caption, svg))
    return out
