"""``labctl trend PROFILE``: a metric across every run of a profile, grouped by jumpavg, every change marked."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api


def trend(profile: str = typer.Argument(..., help="the profile's name (as its trials recorded it)"),
          db: Path = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store (imports and CI jobs join their series)"),
          metric: Optional[str] = typer.Option(None, "--metric", help="metric to follow (default: what the runs "
                                               "measured: mpps, ndr_mpps, a tcp rate)"),
          config: Optional[List[str]] = typer.Option(None, "--config", metavar="KNOB=VALUE",
                                                     help="only configurations with this value, repeatable"),
          host: Optional[str] = typer.Option(None, "--host", help="only this host's trials"),
          threshold: Optional[float] = typer.Option(None, "--threshold", metavar="PCT",
                                                    help="smallest change that counts, in per cent (default "
                                                         f"{api.DEFAULT_THRESHOLD_PCT:g}): a mark within it is listed, "
                                                         "not failed"),
          as_json: bool = typer.Option(False, "--json", help="print the trend as JSON (series, rows, groups, marks)"),
          junit: Optional[Path] = typer.Option(None, "--junit", metavar="FILE",
                                               help="also write a JUnit XML report: a testcase per series, a failure "
                                                    "where the newest group is a regression"),
          html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                              help="also write the trend's page: one self-contained HTML file")) -> None:
    """When did it change: every run of PROFILE in time order, per configuration and host, grouped by FD.io CSIT's jumpavg (minimum description length); each new group is marked a regression or a progression, with its size, the runs on both sides and what changed in their environments there.

    Exit 1 when a series' newest group starts with a regression beyond the threshold, 0 otherwise, 2 on bad input."""
    if html is not None:
        api.check_html_out(html)
    if junit is not None:
        api.check_writable(junit, "--junit")
    result = api.trend(db, profile, metric, config, host, threshold)
    typer.echo(api.render_trend(result, "json" if as_json else "table"))
    if junit is not None:
        typer.echo(f"wrote {api.trend_junit(result, junit)}", err=True)
    if html is not None:
        typer.echo(f"wrote {api.trend_html(result, html)}", err=True)
    if result.to_dict()["failures"]:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(trend)
