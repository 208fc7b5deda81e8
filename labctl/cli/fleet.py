"""``labctl fleet``: lab hosts prepared and swept in parallel (a Typer sub-app over :mod:`labctl.fleet`).

Progress goes to stderr, one line per host step (``h1: labctl sweep: started``); the result is a per-host
table (or ``--json``). Exit 1 when any host failed or was unreachable; bad input (an unreadable inventory,
a bad profile) is a ``UserError``, which the main app turns into one line and exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from labctl.fleet import FleetRun, HostEvent

fleet_app = typer.Typer(help="Many lab hosts at once (Ansible playbooks through ansible-runner).",
                        no_args_is_help=True)

INVENTORY = typer.Option(..., "-i", "--inventory", help="Ansible inventory (file or directory)")
DATA_DIR = typer.Option(Path("out/fleet"), "--data-dir",
                        help="where each run's private data directory (events, artefacts) is kept")
JSON = typer.Option(False, "--json", help="print one JSON document: per-host status and stats")
COLUMNS = ("host", "status", "ok", "changed", "unreachable", "failures", "skipped")


def _progress(step: HostEvent) -> None:
    if step.state != "skipped":
        typer.echo(step.line(), err=True)


def table(run: FleetRun) -> list[str]:
    """The per-host table: status and the runner's stats, then each bad host's reason."""
    rows = [COLUMNS] + [(h.host, h.status, *(str(getattr(h.stats, c)) for c in COLUMNS[2:])) for h in run.hosts]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [f"{h.host}: {h.reason}" for h in run.hosts if h.reason]
    for merged in run.merged:
        lines.append(f"{merged.host}: {merged.trials} trials merged as run {merged.run_id}")
    lines.append(f"artefacts: {run.data_dir}")
    return lines


def _finish(run: FleetRun, as_json: bool) -> None:
    for note in run.notes:  # e.g. a job a killed labctl fleet left running, stopped first
        typer.echo(f"note: {note}", err=True)
    if as_json:
        typer.echo(json.dumps(run.to_dict(), indent=2, sort_keys=True, default=str))
    else:
        for line in table(run):
            typer.echo(line)
    if run.failed:
        raise typer.Exit(1)


@fleet_app.command("prepare")
def prepare_cmd(inventory: Path = INVENTORY,
                hugepages: Optional[int] = typer.Option(None, "--hugepages", help="2 MiB pages each host keeps"),
                appliance: bool = typer.Option(True, "--appliance/--no-appliance", help="build the appliance"),
                reboot: bool = typer.Option(False, "--reboot", help="apply the kernel-arguments plan and reboot"),
                data_dir: Path = DATA_DIR, as_json: bool = JSON) -> None:
    """Prepare every host of the inventory as a lab host (playbooks/lab-host.yml)."""
    from labctl.fleet import prepare

    run = prepare(inventory, hugepages=hugepages, build_appliance=appliance, reboot=reboot, data_dir=data_dir,
                  on_event=None if as_json else _progress)
    if not as_json:
        for host in run.hosts:
            plan = host.facts.get("labctl_kernel_plan")
            if plan and plan.get("missing") and not plan.get("applied"):
                typer.echo(f"{host.host}: kernel arguments to add: {' '.join(plan['missing'])} (--reboot applies them)")
    _finish(run, as_json)


@fleet_app.command("sweep")
def sweep_cmd(file: Path = typer.Argument(..., help="lab profile (copied to every host)"),
              inventory: Path = INVENTORY,
              db: Path = typer.Option(Path("labctl.db"), "--db", help="result store the hosts' trials merge into"),
              command: str = typer.Option("sweep", "--command", help="sweep | ndr | tune"),
              arg: Optional[List[str]] = typer.Option(None, "--arg", help="extra argument for the command, repeatable"),
              data_dir: Path = DATA_DIR, as_json: bool = JSON) -> None:
    """Run the profile on every host at once (playbooks/sweep.yml); merge the good hosts' trials into --db."""
    from labctl.fleet import sweep

    run = sweep(file, inventory, db, command=command, args=arg or (), data_dir=data_dir,
                on_event=None if as_json else _progress)
    _finish(run, as_json)
