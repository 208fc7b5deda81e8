"""The advisor's command: advise (recommendations with evidence, --plan before measuring, --apply)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from labctl import api
from labctl.cli.output import say
from labctl.errors import UserError


def advise(db: Path = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store"),
           run: Optional[int] = typer.Option(None, "--run", help="run id (default: newest)"),
           plan: Optional[Path] = typer.Option(None, "--plan", help="profile: a pinning plan from this host's topology"),
           apply: Optional[Path] = typer.Option(None, "--apply", help="profile to rewrite with the advice"),
           out: Optional[Path] = typer.Option(None, "--out", help="with --apply: the tuned profile to write"),
           max_loss: Optional[float] = typer.Option(None, "--max-loss",
                                                    help="acceptable median loss ratio (default 0.001)"),
           host: Optional[str] = typer.Option(None, "--host", help="only this host's trials"),
           metric: Optional[str] = typer.Option(None, "--metric",
                                                help="mpps | ndr_mpps (ndr) | pdr_mpps (pdr); bandwidth_gbps | "
                                                     "transactions_per_s for tcp runs (default: what the run "
                                                     "measured)"),
           emit: Optional[str] = typer.Option(None, "--emit",
                                              help="the advice as libvirt | nova | kubevirt | ansible"),
           as_json: bool = typer.Option(False, "--json", help="print the advice (or the pinning plan) as JSON")) -> None:
    """Recommend settings from measured trials, with evidence; or plan pinning before measuring."""
    if plan is not None:
        result = api.plan(plan)
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else result.format())
        return
    if apply is not None:
        if out is None:
            raise UserError("--apply needs --out TUNED.yaml (the file to write)")
        for note in api.apply_advice(apply, out, db, run, max_loss):
            say(note)
        typer.echo(f"wrote {out}")
        return
    if out is not None:
        raise UserError("--out is only for --apply (allowed: --apply PROFILE --out TUNED.yaml)")
    if emit is not None:
        api.check_emit_form(emit)  # bad input fails before the advice is computed
        typer.echo(api.emit_advice(emit, advice=api.advise(db, run, max_loss, host, metric)), nl=False)
        return
    advice = api.advise(db, run, max_loss, host, metric)
    typer.echo(json.dumps(advice.to_dict(), indent=2, default=str) if as_json else advice.format())


def register(app: typer.Typer) -> None:
    app.command()(advise)
