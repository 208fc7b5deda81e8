"""The host command: doctor (what this host can do, and how steady its speed is)."""

from __future__ import annotations

from typing import Optional

import typer

from labctl import api
from labctl.cli.output import print_json


def doctor(as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
           steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                      help="also probe how steady the host's speed is for SECONDS "
                                                           "(1-600): shared or oversubscribed hosts give two-band "
                                                           "results")) -> None:
    """Report what this host can do: CPUs, NUMA, hugepages, KVM, versions, lab backends."""
    result = api.doctor(steadiness)
    if as_json:
        print_json(result.to_dict())
        return
    for label, text in api.describe_host(result):
        typer.echo(f"{label + ':':<11} {text}")


def register(app: typer.Typer) -> None:
    app.command()(doctor)
