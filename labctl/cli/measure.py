"""Commands that measure: run (one trial), sweep, tune."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.output import SweepProgress, phase_printer, print_json, say
from labctl.errors import UserError
from labctl.events import Event
from labctl.profile.knobs import short_label

SET = typer.Option(None, "--set", help="KNOB=VALUE, repeatable")
DB = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store")


def run(file: Path, set_: Optional[List[str]] = SET,
        as_json: bool = typer.Option(False, "--json", help="print the trial record as JSON")) -> None:
    """Run one trial of an embedded profile: warm-up, measurement window, teardown."""
    from labctl.analysis.renderers import trial_summary

    record = api.run(api.load(file, api.parse_overrides(set_)), None if as_json else phase_printer)
    typer.echo(record.model_dump_json(indent=2) if as_json else trial_summary(record))
    if record.status != "ok":
        raise typer.Exit(1)


def sweep(file: Path, db: Path = DB,
          repeat: Optional[int] = typer.Option(None, help="repeats per configuration (default: the profile's)"),
          resume: bool = typer.Option(False, "--resume", help="finish the newest unfinished run of this profile"),
          set_: Optional[List[str]] = SET,
          steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                     help="first probe how steady the host's speed is (1-600 s); "
                                                          "if unsteady, every trial carries the warning"),
          as_json: bool = typer.Option(False, "--json", help="print the run summary as JSON")) -> None:
    """Cross the profile's sweep matrix, repeats interleaved; every trial is stored as it finishes."""
    from labctl.host.steadiness import check_arguments
    from labctl.measure.sweep import check_repeat

    check_repeat(repeat)
    if steadiness is not None:
        check_arguments(steadiness)  # before the profile is read: a bad value fails first
    loaded = api.load(file, api.parse_overrides(set_))
    for warning in loaded.warnings:
        say(warning.render(str(file)))
    if as_json:
        result = api.sweep(loaded, db, repeat, resume, steadiness)
    else:
        with SweepProgress() as progress:
            result = api.sweep(loaded, db, repeat, resume, steadiness, on_event=progress)
    summary = {"run_id": result.run_id, "ok": result.ok, "failed": result.failed, "db": str(db)}
    if result.steadiness is not None:
        summary["steadiness"] = result.steadiness.to_dict(samples=False)
    if as_json:
        print_json(summary)
    else:
        typer.echo(f"run {result.run_id}: {result.ok} ok, {result.failed} failed -> {db} "
                   f"(labctl report --db {db} --run {result.run_id})")
    if result.failed:
        raise typer.Exit(1)


def tune(file: Optional[Path] = typer.Argument(None, help="profile whose sweep matrix is the search space"),
         budget: int = typer.Option(..., "--budget", help="most trials to spend"),
         replay: Optional[Path] = typer.Option(None, "--replay", help="search recorded trials (JSONL) instead"),
         seed: int = typer.Option(0, "--seed"), db: Path = DB,
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Adaptive search (TPE) over the sweep space; stops when the budget is spent or the best is clear."""
    api.check_budget(budget)
    if (file is None) == (replay is None):
        raise UserError("tune needs either a profile FILE (live trials) or --replay FILE.jsonl, not both")

    def step(event: Event) -> None:
        if event.kind == "step":
            item = event.data
            rate = "failed" if item.mpps is None else f"{item.mpps:.3f} Mpps"
            say(f"[{item.step}/{event.total}] {item.phase}: {short_label(item.config.items(), ' ')} -> {rate}")

    if replay is not None:
        result = api.replay(replay, budget, seed)
    else:
        result = api.tune(api.load(file), budget, seed, db, None if as_json else step)
    if as_json:
        print_json(result.to_dict())
        return
    knobs = " ".join(f"{k}={v}" for k, v in result.best_config.items())
    trials = f"trial{'s' if result.best_n != 1 else ''}"
    measured = (f"median {result.best_median:.3f} Mpps over {result.best_n} {trials}; "
                if result.best_median is not None and result.best_n else "")
    typer.echo(f"best: {knobs} ({measured}{result.trials_used} trials used, stopped: {result.stop_reason})")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command()(sweep)
    app.command()(tune)
