"""The TUI command: ``labctl tui [--db PATH] [FILE]`` (the Textual face, labctl/tui/)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api


def tui(file: Optional[Path] = typer.Argument(None, help="profile for the Sweep and Advice screens"),
        db: Path = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store"),
        set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE applied to FILE, repeatable")) -> None:
    """Watch a sweep, browse results, read and apply the advice: h Host, l Labs, s Sweep, r Results, a Advice, v Live (a reconf or soak)."""
    overrides = api.parse_overrides(set_)
    if file is not None:
        api.load(file, overrides)  # a bad FILE or --set fails here, in one line, before the screen opens
    from labctl.tui import run

    code = run(db, file, overrides)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(tui)
