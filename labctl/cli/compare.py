"""The regression check: compare (a candidate run against a baseline run, or one knob's values inside one
run: a verdict per configuration)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.output import say


def compare(db: Path = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store of the candidate run"),
            baseline: Optional[str] = typer.Option(None, "--baseline", metavar="RUN|VALUE",
                                                   help="baseline run: an id or a name (default with --baseline-db: "
                                                        "its newest); with --by: the baseline value of KNOB"),
            candidate: Optional[List[str]] = typer.Option(None, "--candidate", metavar="RUN|VALUE",
                                                          help="candidate run: an id or a name (default: the newest "
                                                               "of --db); with --by: a value of KNOB, repeatable "
                                                               "(default: every other value)"),
            baseline_db: Optional[Path] = typer.Option(None, "--baseline-db",
                                                       help="store of the baseline run (default: --db)"),
            run: Optional[str] = typer.Option(None, "--run", metavar="RUN",
                                              help="with --by: the run compared inside, an id or a name "
                                                   "(default: the newest of --db)"),
            by: Optional[str] = typer.Option(None, "--by", metavar="KNOB",
                                             help="compare KNOB's values inside one run (build, "
                                                  "workload.packet_size, guest.nics.*.rx_queue_size, ...), "
                                                  "per configuration of the other knobs"),
            metric: Optional[str] = typer.Option(None, "--metric",
                                                 help="metric to compare (mpps, ndr (= ndr_mpps), pdr, gbps, loss_ratio, "
                                                      "latency_p99_us, bandwidth_gbps, ...; default: the "
                                                      "candidate's own rate)"),
            threshold: Optional[str] = typer.Option(None, "--threshold", metavar="PCT",
                                                      help="smallest change that counts, in per cent "
                                                           f"(default {api.DEFAULT_THRESHOLD_PCT:g})"),
            fmt: str = typer.Option("table", "--format",
                                    help="table, json, or post (one line per configuration as patch posts "
                                         "write it: '256B: 4.69 vs 5.42 Mpps (+15.6% [...]) progression')"),
            as_json: bool = typer.Option(False, "--json", help="print the verdicts as JSON (= --format json)"),
            junit: Optional[Path] = typer.Option(None, "--junit", metavar="FILE",
                                                 help="also write a JUnit XML report (one testcase per configuration)"),
            html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                                help="also write the comparison's page: one self-contained HTML "
                                                     "file (the --json document rendered)")
            ) -> None:
    """Compare a candidate run with a baseline run, or (--by) one knob's values inside one run: per configuration the change, its interval, a verdict.

    Exit 1 when any configuration regressed beyond the threshold, 0 otherwise, 2 on bad input.

    A run is an id or a name: a profile's name or `labctl import --name`, the newest run of that name.

    Runs, values and the threshold are checked by the api: a bad one is one line naming the allowed values."""
    fmt = "json" if as_json else fmt
    api.check_view_format(fmt)
    if html is not None:
        api.check_html_out(html)
    result = api.compare(db, baseline, candidate or None, metric, threshold, junit, baseline_db, run=run, by=by)
    typer.echo(api.render_comparison(result, fmt))
    if fmt == "table" and run is not None and by is not None:
        for line in api.run_verdicts(db, run, by):  # a sweep --until decided: the blocked verdict and its confidence
            typer.echo(line)
    if junit is not None:
        say(f"wrote {junit}")
    if html is not None:
        say(f"wrote {api.compare_html(result, html)}")
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def register(app: typer.Typer) -> None:
    app.command()(compare)
