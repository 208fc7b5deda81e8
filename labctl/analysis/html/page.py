"""One self-contained HTML page from a run's or a comparison's JSON document (Jinja2 over
``templates/``, autoescaped: every name, note and path from a profile, a record or an import is text;
plots are :mod:`.figures`' inline SVG; the CSS is inline and names system fonts only; no script, font,
image or stylesheet is fetched: a Content-Security-Policy of ``default-src 'none'`` says so to the
browser too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from markupsafe import Markup

from labctl.analysis.html import figures

TEMPLATES = Path(__file__).with_name("templates")


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["pct"] = lambda v, digits=4: "-" if v is None else f"{v:.{digits}%}"
    env.filters["signed"] = lambda v: "-" if v is None else f"{v:+.1f}"
    env.filters["short"] = lambda k: str(k).split(".")[-1]
    env.filters["label"] = lambda knobs: ", ".join(f"{str(k).split('.')[-1]}={v}" for k, v in knobs.items())
    env.filters["when"] = _when
    env.filters["tojson_text"] = lambda v: json.dumps(v, sort_keys=True, default=str)
    return env


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _when(value: Any) -> str:
    """A store's timestamp (seconds since the epoch, or text) as UTC date and time."""
    import datetime

    if isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(value)


def _inline(svg: str | None) -> Markup | None:
    """matplotlib's SVG (its text escaped by matplotlib's writer) marked safe for the template."""
    return None if svg is None else Markup(svg)


def render_run(doc: dict[str, Any]) -> str:
    """The page of a run (:func:`labctl.analysis.html.document.run_document`)."""
    single = doc.get("live") and len(doc["rows"]) == 1 and doc["rows"][0].get("n") == 1  # one reconf or soak
    plots = [(f"median {doc['metric']} with its 95% interval" + (f" by {doc['by']}" if doc["by"] else ""),
              None if single else _inline(figures.medians(doc))),
             ("NDR/PDR searches: loss against offered load", _inline(figures.ndr_loss(doc))),
             ("latency at 10, 50 and 90% of the PDR", _inline(figures.latency(doc)))]
    plots += [(caption, _inline(svg)) for caption, svg in figures.live(doc)]
    return _env().get_template("run.html.j2").render(kind="run", doc=doc, plots=[(t, svg) for t, svg in plots if svg])


def render_comparison(doc: dict[str, Any]) -> str:
    """The page of a comparison (:meth:`labctl.analysis.compare.Comparison.to_dict`, run against run or
    a knob's values inside a run)."""
    svg = _inline(figures.changes(doc))
    return _env().get_template("comparison.html.j2").render(kind="comparison", doc=doc, plots=[("change per configuration", svg)]
                                                            if svg else [])


def write(text: str, out: Path) -> Path:
    """Write the page through :func:`labctl.safefs.write_atomic` (a half-written page is never left)."""
    from labctl.safefs import write_atomic

    write_atomic(Path(out), text, perm=0o644)
    return Path(out)


def render_trend(doc: dict[str, Any]) -> str:
    """The page of a trend (:meth:`labctl.analysis.trend.Trend.to_dict`, with ``failures`` and ``marks_total``):
    per series its plot (runs, group averages, marks: :func:`labctl.analysis.html.series.trend_series`) and rows."""
    from labctl.analysis.html.series import trend_series

    plots = [(s, _inline(trend_series(s, doc["metric"]))) for s in doc["series"]]
    return _env().get_template("trend.html.j2").render(kind="trend", doc=doc, series_plots=plots)


def render_bisect(doc: dict[str, Any]) -> str:
    """The page of a bisect (:func:`labctl.analysis.bisect_report.stored_document`, or a result's ``to_dict``)."""
    from labctl.analysis.html.series import bisect_commits

    svg = _inline(bisect_commits(doc))
    return _env().get_template("bisect.html.j2").render(kind="bisect", doc=doc, plots=[
        ("each measured commit's median in its step", svg)] if svg else [])
