"""``labctl apply``: the advice, a tuned profile or knobs applied to the user's own domains: a domain XML
file (``--xml IN --out OUT``) or a defined domain by name; ``--verify`` and ``--undo`` for defined ones.

The last line of an apply to a defined domain, or an undo, is ``changed: N`` (what changed, or with ``--dry-run`` what would:
the XML counts one, each live pin one, a restart one): ``playbooks/roles/labctl_apply`` reads it for
Ansible's ``changed``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.errors import UserError


def _print_edit(edit, dry_run: bool) -> None:
    if edit.diff:
        typer.echo(edit.diff, nl=False)
    for line in edit.lines:
        typer.echo(line)
    if not edit.changed:
        typer.echo("unchanged: the domain already has these settings")


def apply(domain: Optional[str] = typer.Argument(None, help="a defined libvirt domain (or --xml FILE)"),
          xml: Optional[Path] = typer.Option(None, "--xml", help="a domain XML file to edit offline"),
          out: Optional[Path] = typer.Option(None, "--out", help="with --xml: the file to write (may be --xml's)"),
          set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE, e.g. guest.nics.*.queues=4"),
          run: Optional[int] = typer.Option(None, "--run", help="apply this run's advice"),
          db: Optional[Path] = typer.Option(None, "--db", help=f"with --run: the result store (default {api.DEFAULT_DB}); "
                                            "with --dry-run: where a reconf of the same change is looked up"),
          profile: Optional[Path] = typer.Option(None, "--profile", help="apply a (tuned) profile's NICs and pins"),
          nic: Optional[str] = typer.Option(None, "--nic", help="only the interface with this MAC"),
          uri: Optional[str] = typer.Option(None, "--uri", help="libvirt URI (default qemu:///system)"),
          restart: bool = typer.Option(False, "--restart", help="restart the domain for what needs it"),
          live: bool = typer.Option(False, "--live", help="swap a running domain's changed NICs in place (PCI "
                                    "hot-plug: unplugged, plugged again with the new queues and rings)"),
          dry_run: bool = typer.Option(False, "--dry-run", help="print the diff and lines, write nothing"),
          verify: bool = typer.Option(False, "--verify", help="requested against negotiated per NIC"),
          undo: bool = typer.Option(False, "--undo", help="restore the domain XML saved before the first change")) -> None:
    """Apply the advice, a tuned profile or knobs to a domain XML file or a defined domain."""
    if verify or undo:
        if verify and undo:
            raise UserError("--verify and --undo: one at a time (allowed: --verify DOMAIN or --undo DOMAIN)")
        if domain is None or xml is not None:
            raise UserError(f"--{'verify' if verify else 'undo'}: name a defined domain (allowed: --{'verify' if verify else 'undo'} DOMAIN)")
        if verify:
            for line in api.verify_domain(domain, uri):
                typer.echo(line)
        else:
            typer.echo(api.undo_domain(domain, uri))
            typer.echo("changed: 1")
        return
    if (domain is None) == (xml is None):
        raise UserError("name a domain or give --xml FILE (allowed: labctl apply DOMAIN | labctl apply --xml IN --out OUT)")
    if db is not None and run is None and not dry_run:
        raise UserError("--db is for --run and --dry-run (allowed: --run N [--db STORE], --dry-run [--db STORE])")
    advice = api.advise(db or api.DEFAULT_DB, run) if run is not None else None
    if xml is not None:
        if uri is not None or restart or live:
            raise UserError("--uri, --restart and --live are for a defined domain (allowed with --xml: --out, "
                            "--dry-run)")
        edit = api.apply_xml(xml, out, list(set_ or []), profile, advice, nic, dry_run)
        _print_edit(edit, dry_run)
        if dry_run:
            typer.echo("dry run: nothing written")
        elif edit.changed:
            typer.echo(f"wrote {out}")
        return
    if out is not None:
        raise UserError("--out is for --xml (a defined domain is changed in libvirt)")
    result = api.apply_domain(domain, uri, list(set_ or []), profile, advice, nic, restart, dry_run, live)
    _print_edit(result.edit, dry_run)
    for line in result.applied_live:
        typer.echo(f"live: {line}")
    if result.restarted:
        typer.echo(f"restarted {domain}")
    elif result.edit.restart_needed:
        for line in result.edit.restart_needed:
            typer.echo(f"needs a restart (--restart): {line}")
    for note in result.notes:
        typer.echo(f"note: {note}")
    if dry_run:
        for line in api.reconf_cost(list(set_ or []), profile, advice, nic, db or api.DEFAULT_DB):
            typer.echo(f"cost: {line}")
        typer.echo("dry run: nothing changed")
    typer.echo(f"changed: {int(result.edit.changed) + len(result.applied_live) + int(result.restarted)}")


def register(app: typer.Typer) -> None:
    app.command()(apply)
