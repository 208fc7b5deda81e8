"""Printing for the CLI: JSON documents, one-line progress, and the rich progress bar of sweeps."""

from __future__ import annotations

import json
from typing import Any

import typer

from labctl import api
from labctl.events import Event


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def say(text: str) -> None:
    """A line for the user on standard error (standard output stays for results)."""
    typer.echo(text, err=True)


def phase_printer(event: Event) -> None:
    """``[setup]``, ``[measure]``, ... and notes, on standard error."""
    if event.kind == "phase":
        say(f"[{event.message}]")
    elif event.kind in ("note", "steadiness"):
        say(event.message if event.kind == "note" else f"steadiness: {event.message}")


def notes_printer(event: Event) -> None:
    """Only the notes (whom a trial waits for, what was left behind), on standard error: for --json."""
    if event.kind == "note":
        say(event.message)


class SweepProgress:
    """A progress bar (rich) fed by sweep events: run started, each trial stored."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"),
                                 console=Console(stderr=True), transient=False)
        self.task: Any = None
        self.done = 0  # plan entries done (search measurements are not)
        self._shown = False

    def __enter__(self) -> "SweepProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._shown:
            self.progress.__exit__(*exc)

    def __call__(self, event: Event) -> None:
        if not self._shown and event.kind in ("run", "note", "steadiness"):
            self.progress.__enter__()  # shown once there is something to show: errors before it stay one line
            self._shown = True
        if event.kind == "run":
            self.done = event.done or 0
            self.task = self.progress.add_task(f"run {event.run_id}", total=event.total, completed=self.done, last="")
        elif event.kind == "trial" and self.task is not None:
            knobs = api.knob_label((event.data or {}).get("config", {}), " ")
            if api.plan_entry(event.record):  # a search's measurement is not one of the planned searches
                self.done += 1
            self.progress.update(self.task, completed=self.done, last=f"last: {knobs} -> {api.trial_rate(event.record)}")
        elif event.kind in ("note", "steadiness"):
            self.progress.console.print(event.message if event.kind == "note" else f"steadiness: {event.message}")
