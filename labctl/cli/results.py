"""Commands over the result store: report, plot, import, export."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.output import say
from labctl.errors import UserError

DB = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store")
RUN = typer.Option(None, "--run", help="run id (default: newest)")
HOST = typer.Option(None, "--host", help="only this host's trials (a fleet's merged store holds many)")


def report(db: Path = DB, run: Optional[int] = RUN,
           by: Optional[str] = typer.Option(None, "--by", help="knob whose values are compared"),
           fmt: str = typer.Option("table", "--format", help="table | md | csv | json"),
           metric: Optional[List[str]] = typer.Option(
               None, "--metric", help="metric to summarize (default: what the run measured: mpps, ndr_mpps for "
                                      "NDR runs, a tcp run's rate; ndr and pdr name ndr_mpps and pdr_mpps); "
                                      "with --rows, repeatable"),
           rows: Optional[str] = typer.Option(
               None, "--rows", help="knob whose values are the rows; a column group per --by value, % change"),
           plot: bool = typer.Option(True, "--plot/--no-plot", help="terminal bar chart under the table"),
           host: Optional[str] = HOST,
           trend: Optional[str] = typer.Option(None, "--trend", metavar="PROFILE",
                                               help="the metric across every run of PROFILE, a row per run"),
           config: Optional[List[str]] = typer.Option(None, "--config", metavar="KNOB=VALUE",
                                                      help="with --trend: only configurations with this value"),
           html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                               help="also write the run's page: one self-contained HTML file "
                                                    "(the --format json document rendered: answer, table, plots, "
                                                    "environment, steadiness, warnings, trials)")) -> None:
    """Tables of a run: median rate, 95% CI, n, loss per configuration; A/B deltas; notes.

    With --rows and --by: the posts' pivot (rows x configurations, each metric's median and % change).

    With --trend: a profile's runs in time order (median, CI, n, change against the first, environment changes).

    With --html FILE: the run's page, one self-contained HTML file (not with --rows or --trend); --format json prints the document it renders."""
    if html is not None:
        for option, value in (("--trend", trend), ("--rows", rows)):
            if value is not None:
                raise UserError(f"{option}: not with --html (allowed: --html FILE with --run, --by, --metric, --host)")
        if metric and len(metric) > 1:
            raise UserError("--metric: the page summarizes one metric (given several)")
        api.check_html_out(html)

    if trend is not None:
        for option, value in (("--run", run), ("--by", by), ("--rows", rows)):
            if value is not None:
                raise UserError(f"{option}: not with --trend (a trend reads every run)")
        if metric and len(metric) > 1:
            raise UserError("--metric: a trend follows one metric (given several)")
        api.check_view_format(fmt, "a trend")
        typer.echo(api.render_trend(api.trend(db, trend, metric[0] if metric else None, config, host), fmt))
        return
    if config:
        raise UserError("--config: only with --trend PROFILE (allowed: --trend PROFILE --config KNOB=VALUE)")
    api.check_report_format(fmt)
    if rows is not None:
        if by is None:
            raise UserError("--rows needs --by (the knob whose values are the column groups)")
        typer.echo(api.render_pivot(api.pivot(db, run, rows, by, metric or None, host), fmt), nl=False)
        return
    if metric and len(metric) > 1:
        raise UserError("several --metric need --rows (a pivot); a plain report summarizes one metric")
    if html is not None:
        say(f"wrote {api.report_html(html, db, run, by, metric[0] if metric else None, host)}")
        if fmt == "table":
            return
    if fmt == "json":
        typer.echo(json.dumps(api.report_document(db, run, by, metric[0] if metric else None, host), indent=2,
                              default=str))
        return
    typer.echo(api.render_report(api.report(db, run, by, metric[0] if metric else None, host), fmt,
                                 terminal_plot=plot))
    if fmt == "table":
        for line in api.run_verdicts(db, run):  # a sweep --until decided: its within-block verdicts, to read first
            typer.echo(line)


def plot(by: Optional[str] = typer.Option(None, "--by",
                                          help="knob on the x axis; none (or left out): no grouping, a point per "
                                               "configuration (a run with one varying knob plots against it)"),
         out: Path = typer.Option(..., "--out", help="PNG file to write"),
         db: Path = DB, run: Optional[int] = typer.Option(None, "--run", help="run id (default: newest)"),
         metric: Optional[str] = typer.Option(None, "--metric",
                                              help="default: what the run measured (ndr, pdr: ndr_mpps, pdr_mpps)"),
         host: Optional[str] = HOST) -> None:
    """Plot medians with 95% intervals against one knob, one series per combination of the others.

    Without --by (or with --by none), a point per configuration."""
    typer.echo(f"wrote {api.plot(by, out, db, run, metric, host)}")


def import_trials(file: Path = typer.Argument(..., help="trials as JSON lines (what labctl export writes)"), db: Path = DB,
                  name: Optional[str] = typer.Option(None, "--name", help="name for the imported run")) -> None:
    """Load trials from JSON lines (other hosts, other labs) into the store, all or nothing."""
    run_id, count = api.import_trials(file, db, name)
    typer.echo(f"imported {count} trials as run {run_id} into {db}")


def export_trials(db: Path = DB, run: Optional[str] = typer.Option(None, "--run", metavar="RUN",
                                                                   help="one run, by id or name (default: every run)"),
                  fmt: str = typer.Option("jsonl", "--format", help="jsonl | csv"),
                  out: Optional[Path] = typer.Option(None, "--out", help="file (default: standard output)")) -> None:
    """Write trials as JSON lines (the import format) or CSV."""
    count = api.export_trials(db, out if out is not None else sys.stdout, fmt, run)
    if out is not None:
        say(f"wrote {count} trials to {out}")


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command("plot")(plot)
    app.command("import")(import_trials)
    app.command("export")(export_trials)
