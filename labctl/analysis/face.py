"""What :mod:`labctl.api` says about stored runs, read-only: the runs and trials of a store, reports
(one metric, or every one for the TUI), the posts' pivots, plots, imports and exports, a run against a
baseline (``compare``) and a metric's trend (its JUnit report, page and marks), a stored bisect's
answer (text, JSON, page), two selections of trials compared, a comparison's page and
the verdicts of a ``sweep --until decided`` run. Every argument is checked before any work, each error a
:class:`~labctl.errors.UserError` naming its option and the allowed values.

The api re-exports every name here (faces import only :mod:`labctl.api`), as it does
:mod:`labctl.domain_edit.face`'s.

Imports marked ``lazy:`` stay inside their function: the module they name loads scipy and numpy (every
summary's statistics), which would add about 1 s to every start of the CLI, ``labctl --help`` included
(``import scipy.stats`` after ``import labctl.cli``: 1.0 s on a 2-core Debian 12 host; the api's docstring
has the whole figure).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Iterable

from labctl.analysis.course import BLOCKED, course_lines
from labctl.analysis.html.page import render_comparison as render_comparison_page, write as write_page
from labctl.errors import UserError
from labctl.paths import can_create
from labctl.profile.knobs import parse_selection as parse_knobs
from labctl.results.access import DEFAULT_DB, only_host, open_store, resolve_run, run_trials
from labctl.results.interchange import export_csv, export_jsonl, import_files as import_runs
from labctl.results.metrics import default_metric, resolve
from labctl.results.record import Metrics, TrialRecord
from labctl.results.store import Store

__all__ = [
    "check_writable", "runs", "trials", "report_metrics", "check_metric", "report", "reports", "pivot", "render_pivot",
    "check_report_format", "render_report", "trial_summary", "NO_GROUPING", "plot", "import_trials", "check_store",
    "EXPORT_FORMATS", "export_trials", "check_threshold", "compare", "check_view_format", "render_comparison",
    "parse_selection", "trend", "render_trend", "compare_trials", "check_html_out", "compare_html", "run_verdicts",
    "trend_junit", "trend_html", "trend_marks", "bisect_document", "render_bisect", "bisect_html",
]


def check_writable(out: Path, option: str = "--out") -> None:
    """``out`` must name a file in an existing, writable directory (checked before any work)."""
    if not can_create(out):
        raise UserError(f"{option} {out}: cannot write there (allowed: a file in an existing writable directory)")


def runs(db: str | Path) -> list[dict[str, Any]]:
    """Every run of the store, oldest first, with its trial counts."""
    with open_store(db) as store:
        return store.runs()


def trials(db: str | Path, run: int | None = None, status: str | None = "ok",
           host: str | None = None, measurements: bool = False) -> tuple[int, list[TrialRecord]]:
    """(run id, its trials of ``status``; None: every status) for ``run``, or the newest run; ``host``:
    only the trials of that host (a fleet's merged store holds many). The single measurements an
    NDR/PDR search made are left out unless ``measurements`` (their search's record stands for them)."""
    run_id, records, _info = run_trials(db, run, status, host, measurements)
    return run_id, records


def report_metrics() -> list[str]:
    """The scalar metrics a report or plot can summarise."""
    return [k for k, f in Metrics.model_fields.items() if f.annotation in (float | None, int | None)]


def check_metric(metric: str) -> str:
    """The scalar metric ``metric`` names (an alias resolved: ``ndr`` -> ``ndr_mpps``); UserError naming
    the allowed ones otherwise."""
    return resolve(metric, report_metrics(), what="a scalar metric")


def report(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None, metric: str | None = None,
           host: str | None = None):
    """A run's report: per configuration the median, its 95% CI, n, loss, A/B deltas and notes (trials of
    different hosts, accelerators or labs are never pooled; ``host`` keeps one host's). ``metric``
    defaults to the trials' own rate (:func:`default_metric`); NDR, PDR and p99 latency are shown beside
    the metric wherever they were measured."""
    from labctl.analysis.report import build_report  # lazy: scipy

    if metric is not None:
        metric = check_metric(metric)
    run_id, records, info = run_trials(db, run, host=host)
    metric = metric or default_metric(records)
    return build_report(records, by, run_id, metric, run_info=info)


def pivot(db: str | Path = DEFAULT_DB, run: int | None = None, rows: str = "", by: str = "",
          metrics: list[str] | None = None, host: str | None = None):
    """A run as the posts' tables: ``rows`` knob values as rows, a column group per ``by`` value, per metric
    the median with its interval and the % change against the first ``by`` value (see
    :mod:`labctl.analysis.pivot`; default metrics: bandwidth or transactions and service demand)."""
    from labctl.analysis.pivot import build_pivot  # lazy: scipy

    metrics = [check_metric(metric) for metric in metrics or []] or None
    run_id, records = trials(db, run, host=host)
    return build_pivot(records, rows, by, metrics, run_id)


def render_pivot(result, fmt: str = "table") -> str:
    from labctl.analysis.pivot import render_pivot as render_as  # lazy: scipy

    check_report_format(fmt)
    return render_as(result, fmt)


def check_report_format(fmt: str) -> None:
    """A report or a pivot is shown as ``table``, ``md``, ``csv`` or ``json`` (checked before any work)."""
    from labctl.analysis.renderers import check_format  # lazy: scipy

    check_format(fmt)


def render_report(result, fmt: str = "table", terminal_plot: bool = False) -> str:
    """A report as ``table``, ``md``, ``csv`` or ``json``; with ``terminal_plot`` a bar chart under a table."""
    from labctl.analysis.renderers import render as render_as, render_terminal_plot  # lazy: scipy

    text = render_as(result, fmt)
    if fmt == "table" and terminal_plot and len(result.rows) > 1:
        text += "\n" + render_terminal_plot(result)
    return text


def trial_summary(record: TrialRecord) -> str:
    """One trial as ``labctl run`` prints it: rate, pacing, loss, latency, CPU, the NICs, the environment."""
    from labctl.analysis.renderers import trial_summary as summary  # lazy: scipy

    return summary(record)


#: What ``labctl plot --by`` takes for "no grouping" (besides leaving it out).
NO_GROUPING = ("", "none")


def plot(by: str | None, out: str | Path, db: str | Path = DEFAULT_DB, run: int | None = None,
         metric: str | None = None, host: str | None = None) -> Path:
    """A PNG of medians with 95% intervals against one knob, one series per combination of the others.
    ``by`` None, empty or ``none``: no grouping, a point per configuration (a run with one varying knob
    is still plotted against it: that is the same plot with the knob's name on the axis)."""
    from labctl.analysis.plot import plot_report  # lazy: scipy (matplotlib inside plot_report)
    from labctl.analysis.report import build_report  # lazy: scipy

    out = Path(out)
    if out.suffix.lower() != ".png":
        raise UserError(f"--out {out}: the plot is written as PNG (allowed: a path ending in .png)")
    check_writable(out)
    if metric is not None:
        metric = check_metric(metric)
    if by is not None and by.strip().lower() in NO_GROUPING:
        by = None
    run_id, records = trials(db, run, host=host)
    return plot_report(build_report(records, by, run_id, metric or default_metric(records)), out)


def import_trials(file: str | Path, db: str | Path = DEFAULT_DB, name: str | None = None) -> tuple[int, int]:
    """Load trials from JSON lines into the store as one run, all or nothing: (run id, count)."""
    return import_runs([(file, name)], db)[0]


def check_store(db: str | Path, option: str = "--db") -> None:
    """``db`` is a result store (``NotAStoreError``, exit 2, when it is another file), or a file that can
    be created: checked before any work."""
    if Path(db).exists():
        Store(db).close()
    else:
        check_writable(Path(db), option)


EXPORT_FORMATS = ("jsonl", "csv")


def export_trials(db: str | Path, out: str | Path | IO[str], fmt: str = "jsonl", run: int | str | None = None) -> int:
    """Write trials as JSON lines (the import format) or CSV; returns how many. ``run``: an id or a name
    (:func:`resolve_run`); None: every run."""
    if fmt not in EXPORT_FORMATS:
        raise UserError(f"--format {fmt}: not an export format (allowed: {', '.join(EXPORT_FORMATS)})")
    if isinstance(out, (str, Path)):
        check_writable(Path(out))
    run = resolve_run(db, run)
    writer = export_jsonl if fmt == "jsonl" else export_csv
    with open_store(db) as store:
        if run is not None:
            store.run(run)
        return writer(store, out, run)


def check_threshold(threshold_pct: float) -> None:
    """A regression threshold in per cent of the baseline median: 0 <= PCT < 100."""
    from labctl.analysis.compare import check_threshold as check  # lazy: scipy

    check(threshold_pct)


def compare(db: str | Path = DEFAULT_DB, baseline: int | str | None = None, candidate: Any = None,
            metric: str | None = None, threshold_pct: float | str | None = None, junit: str | Path | None = None,
            baseline_db: str | Path | None = None, run: int | str | None = None, by: str | None = None):
    """A candidate run against a baseline run, per configuration: the change of ``metric`` with its interval
    and a verdict, the environment changes, ``exit_code`` 1 on a regression (:mod:`labctl.analysis.compare`).
    ``candidate``: a run of ``db`` (default: the newest); ``baseline``: a run of ``baseline_db`` (default
    ``db``, then required), each an id or a name (:func:`resolve_run`). With ``by`` (a knob), one ``run``
    (default: the newest) is compared inside: ``by``'s value ``baseline`` against each ``candidate`` value
    (one, a list, or None: every other), per configuration of the other knobs (:mod:`labctl.analysis.within`).
    ``metric``: default the candidate's own rate; ``threshold_pct``: :data:`DEFAULT_THRESHOLD_PCT`;
    ``junit``: also a JUnit XML report. Every argument is checked before any work; two runs with no
    configuration in common are refused (:func:`labctl.analysis.requests.compare_request`)."""
    from labctl.analysis.requests import compare_request  # lazy: scipy

    if junit is not None:
        check_writable(Path(junit), "--junit")
    return compare_request(db, baseline, candidate, metric, threshold_pct, junit, baseline_db, run, by)


def check_view_format(fmt: str, what: str = "a comparison") -> None:
    """Comparisons are shown as ``table``, ``json`` or ``post``; trends as ``table`` or ``json``."""
    from labctl.analysis.post import check_format  # lazy: scipy
    from labctl.analysis.renderers import check_view_format as check  # lazy: scipy

    check_format(fmt) if what == "a comparison" else check(fmt, what)


def render_comparison(result, fmt: str = "table") -> str:
    """A comparison as text (``table``), the rows as engineers post them (``post``) or ``json``."""
    from labctl.analysis.comparison_text import render_comparison as text  # lazy: scipy
    from labctl.analysis.post import render_post  # lazy: scipy
    from labctl.analysis.renderers import text_or_json  # lazy: scipy

    return render_post(result) if fmt == "post" else text_or_json(result, fmt, "a comparison", text)


def parse_selection(assignments: Iterable[str] | None) -> dict[str, Any]:
    """``["workload.burst=32", ...]`` (``--config``) as knob -> value."""
    return parse_knobs(assignments, "--config")


def trend(db: str | Path = DEFAULT_DB, profile: str = "", metric: str | None = None,
          configs: Iterable[str] | None = None, host: str | None = None, threshold_pct: float | None = None):
    """``metric`` (default: ``mpps``, or a tcp profile's own rate) across every run of ``profile`` in the
    store, one row per run in the order they were measured, per configuration (``configs``: ``KNOB=VALUE``
    it must have) and host/accelerator/lab: the median, its 95% CI, n, the change against the first run with its verdict, and the environment
    changes against the previous row, each series grouped by jumpavg with its changes marked
    (:mod:`labctl.analysis.trend`). ``host`` keeps one host's trials; ``threshold_pct`` (default
    :data:`~labctl.results.metrics.DEFAULT_THRESHOLD_PCT`): the smallest change the verdicts and the marks' gate count."""
    from labctl.analysis.trend import build_trend  # lazy: scipy
    from labctl.results.metrics import DEFAULT_THRESHOLD_PCT

    if threshold_pct is not None:
        check_threshold(threshold_pct)
    selection = parse_selection(configs)
    with open_store(db) as store:
        records = store.trials(None, status=None)
        created = {r["id"]: r["created_at"] for r in store.runs()}
    return build_trend(only_host(records, host, str(db)), profile, metric, selection, created,
                       DEFAULT_THRESHOLD_PCT if threshold_pct is None else threshold_pct)


def render_trend(result, fmt: str = "table") -> str:
    """A trend as text (``table``) or ``json``."""
    from labctl.analysis.renderers import text_or_json  # lazy: scipy
    from labctl.analysis.trend import render_trend as text  # lazy: scipy

    return text_or_json(result, fmt, "a trend", text)


def reports(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
            host: str | None = None) -> dict[str, Any]:
    """One report (as :func:`report`) per scalar metric the run's successful trials carry, the one the run
    measured (:func:`default_metric`) first: a face shows every measured metric (rates, loss, NDR/PDR, latency, ...) per configuration.
    The trials are read once."""
    from labctl.analysis.report import build_reports  # lazy: scipy

    run_id, records, info = run_trials(db, run, host=host)
    return build_reports(records, by, run_id, report_metrics(), run_info=info)


def compare_trials(db: str | Path, baseline: Iterable[int], candidate: Iterable[int], metric: str = "mpps",
                   run: int | None = None):
    """Two selections of one run's trials (ids) compared on ``metric``: the change of the candidate's
    median against the baseline's with its bootstrap 95% interval and a verdict
    (:func:`labctl.analysis.statistics.compare`; for loss, drops, latency and cycles lower is better)."""
    from labctl.analysis.compare import compare_selections  # lazy: scipy

    metric = check_metric(metric)
    run_id, records = trials(db, run)
    return compare_selections(records, baseline, candidate, metric, run_id)


def check_html_out(out: str | Path, option: str = "--html") -> Path:
    """``out``: a file ending in .html or .htm in an existing writable directory (before any work)."""
    if Path(out).suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{option} {out}: the page is written as HTML (allowed: a path ending in .html or .htm)")
    check_writable(Path(out), option)
    return Path(out)


def compare_html(result, out: str | Path) -> Path:
    """Write a comparison's page (:func:`compare`'s result, rendered from its JSON) to ``out``."""
    return write_page(render_comparison_page(result.to_dict()), check_html_out(out))


def run_verdicts(db: str | Path = DEFAULT_DB, run: int | str | None = None, knob: str | None = None) -> list[str]:
    """The verdicts a ``sweep --until decided`` run reached, one line per comparison (of ``knob`` only, when
    given): verdict, change and interval, the trials it took and the confidence actually achieved (the
    error spent at the deciding look), or what an open one would need. Empty for any other run."""
    run_id = resolve_run(db, run) if isinstance(run, str) else run
    run_id, _records, info = run_trials(db, run_id)
    return course_lines(info.get("until") or {}, run_id, knob, note=BLOCKED)


# --- when did it change, and which commit did it: a trend's reports and marks, a stored bisect --------

def trend_junit(result, out: str | Path) -> Path:
    """Write a trend's JUnit report (:mod:`labctl.analysis.trend_junit`: a testcase per series, a failure
    where the newest group starts with a regression beyond the threshold)."""
    from labctl.analysis.trend_junit import write_trend_junit

    check_writable(Path(out), "--junit")
    return write_trend_junit(result, out)


def trend_html(result, out: str | Path) -> Path:
    """Write a trend's page (its series, groups and marks; :func:`labctl.analysis.html.page.render_trend`)."""
    from labctl.analysis.html.page import render_trend, write

    return write(render_trend(result.to_dict()), check_html_out(out))


def trend_marks(db: str | Path = DEFAULT_DB, run: int | None = None, limit: int = 4) -> list[str]:
    """The jumpavg marks of the trend of ``run``'s profile (its own metric), newest first, at most ``limit``
    lines, the run's own mark flagged; empty when its profile has no marks (or one run)."""
    from labctl.analysis.trend import build_trend, mark_lines  # lazy: scipy
    from labctl.results.access import open_store

    run_id, records, _info = run_trials(db, run)
    names = {str(r.config.get("name")) for r in records if r.config.get("name") is not None}
    if len(names) != 1:
        return []
    with open_store(db) as store:
        every = store.trials(None, status=None)
        created = {r["id"]: r["created_at"] for r in store.runs()}
    try:
        return mark_lines(build_trend(every, names.pop(), run_times=created), run_id, limit)
    except UserError:
        return []


def bisect_document(db: str | Path = DEFAULT_DB, bisect_id: int | None = None) -> dict[str, Any]:
    """A stored bisect (default: the newest) as the document of its answer and steps."""
    from labctl.analysis.bisect_report import stored_document
    from labctl.results.access import open_store
    from labctl.results.bisects import bisect as stored

    with open_store(db) as store:
        return stored_document(stored(store, bisect_id))


def render_bisect(doc: dict[str, Any], fmt: str = "table") -> str:
    """A bisect's document as text (``table``) or ``json``."""
    import json

    from labctl.analysis.bisect_report import render_bisect as text
    from labctl.analysis.renderers import check_view_format as check

    check(fmt, "a bisect")
    return text(doc) if fmt == "table" else json.dumps(doc, indent=2, default=str)


def bisect_html(doc: dict[str, Any], out: str | Path) -> Path:
    """Write a bisect's page (steps, verdicts, the final pair; :func:`labctl.analysis.html.page.render_bisect`)."""
    from labctl.analysis.html.page import render_bisect as page, write

    return write(page(doc), check_html_out(out))
