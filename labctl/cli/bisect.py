"""``labctl bisect PROFILE --recipe NAME --good REV --bad REV``: which commit changed the number; and
``labctl bisect-show``: a stored bisect again (text, JSON, its page)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api

DB = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store (the steps' runs and the bisect itself)")


def _printer(event: api.Event) -> None:
    """The bisect's notes and one line per trial, on standard error (standard output stays for the answer)."""
    if event.kind == "note":
        typer.echo(event.message, err=True)
    elif event.kind == "trial" and event.record is not None and event.done is not None:
        record = event.record
        rate = record.metrics.mpps
        shown = f"{rate:.3f} Mpps" if rate is not None and record.status == "ok" else record.status
        typer.echo(f"  run {event.run_id} trial {event.done}/{event.total or '?'}: build "
                   f"{record.config.get('build')}: {shown}", err=True)


def bisect(profile: Path = typer.Argument(..., help="the lab profile: its recipes: name the one to build with"),
           recipe: Optional[str] = typer.Option(None, "--recipe", help="the recipe that builds each commit"),
           good: Optional[str] = typer.Option(None, "--good", metavar="REV", help="a commit, tag or branch with the old number"),
           bad: Optional[str] = typer.Option(None, "--bad", metavar="REV", help="a later commit with the new number"),
           budget: Optional[str] = typer.Option(None, "--budget", help="measuring time (30m, 2h) or trials (120) of the "
                                                "whole bisect, shared among its steps; builds come on top (default 30m)"),
           db: Path = DB,
           threshold: Optional[float] = typer.Option(None, "--threshold", metavar="PCT",
                                                     help="smallest change that counts, in per cent (default "
                                                          f"{api.DEFAULT_THRESHOLD_PCT:g}); within it: equivalent"),
           metric: Optional[str] = typer.Option(None, "--metric", help="what is judged (default: the run's own rate)"),
           step_blocks: Optional[int] = typer.Option(None, "--step-blocks", metavar="N",
                                                     help="the most blocks a step plans its looks over, within its share "
                                                          "of the budget (default 8; more for a noisier host)"),
           set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE, repeatable"),
           as_json: bool = typer.Option(False, "--json", help="print the answer as JSON (first_bad: the full sha)"),
           html: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                               help="also write the bisect's page (steps, verdicts, the final pair)"),
           no_wait: bool = typer.Option(False, "--no-wait", help="fail at once when another trial measures on this "
                                        "trial's CPUs")) -> None:
    """Which commit changed the number: a binary search over `git rev-list --first-parent GOOD..BAD`, each commit built by the recipe (cached) and measured against the good and bad builds until decided (blocks, within-block pairs, the verdicts of sweep --until decided).

    A commit that does not build is skipped; a step its share of the budget cannot decide is reported, never guessed. It ends with the first bad commit, its subject and its interval against its parent, or the range it narrowed to. Run it again to resume a killed one.

    Exit 0 when the first bad commit was found, 1 when it was not pinned (a range, no change, cannot tell) or a build of good or bad failed, 2 on bad input (before any build)."""
    if html is not None:
        api.check_html_out(html)
    loaded = api.load(profile, api.parse_overrides(set_))
    for warning in loaded.warnings:
        typer.echo(warning.render(str(profile)), err=True)
    request = api.check_bisect(loaded, recipe, good, bad, budget, threshold, metric, db, step_blocks)
    result = api.bisect(request, on_event=_printer, wait=not no_wait)
    doc = result.to_dict()
    typer.echo(api.render_bisect(doc, "json" if as_json else "table"))
    if html is not None:
        typer.echo(f"wrote {api.bisect_html(doc, html)}", err=True)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def bisect_show(db: Path = DB, bisect_id: Optional[int] = typer.Option(None, "--id", help="the bisect (default: the newest)"),
                as_json: bool = typer.Option(False, "--json", help="print it as JSON"),
                html: Optional[Path] = typer.Option(None, "--html", metavar="FILE", help="also write its page")) -> None:
    """A stored bisect: its steps, verdicts, final pair and answer (or how far an unfinished one got)."""
    if html is not None:
        api.check_html_out(html)
    doc = api.bisect_document(db, bisect_id)
    typer.echo(api.render_bisect(doc, "json" if as_json else "table"))
    if html is not None:
        typer.echo(f"wrote {api.bisect_html(doc, html)}", err=True)


def register(app: typer.Typer) -> None:
    app.command()(bisect)
    app.command("bisect-show")(bisect_show)
