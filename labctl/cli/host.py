"""The host command: doctor (what this host can do, and how steady its speed is)."""

from __future__ import annotations

from typing import Optional

import typer

from labctl import api
from labctl.cli.output import print_json
from labctl.host.cpuset import format_cpuset


def doctor(as_json: bool = typer.Option(False, "--json"),
           steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                      help="also probe how steady the host's speed is for SECONDS "
                                                           "(1-600): shared or oversubscribed hosts give two-band "
                                                           "results")) -> None:
    """Report what this host can do: CPUs, NUMA, hugepages, KVM, versions, lab backends."""
    result = api.doctor(steadiness)
    if as_json:
        print_json(result.to_dict())
        return
    facts = result.facts
    typer.echo(f"cpu:        {facts.cpu_model}, {len(facts.cpus)} online ({format_cpuset(facts.cpus)})")
    typer.echo("numa:       " + "; ".join(f"node{n}: {format_cpuset(c)}" for n, c in facts.numa_nodes.items()))
    typer.echo(f"isolated:   {format_cpuset(facts.isolated) if facts.isolated else 'none'}")
    typer.echo("hugepages:  " + ", ".join(f"{p.size_kib // 1024} MiB x {p.total} ({p.free} free)" for p in facts.hugepages))
    typer.echo(f"kvm:        {'usable' if facts.kvm.usable else 'not usable'}: {facts.kvm.reason} -> {facts.kvm.accel}")
    typer.echo(f"kernel:     {facts.kernel}")
    for name, version in facts.versions.items():
        typer.echo(f"{name + ':':<11} {version or 'not installed'}")
    for name, text in facts.backends.items():
        typer.echo(f"lab {name + ':':<7} {text}")
    if result.steadiness is not None:
        typer.echo(f"steadiness: {result.steadiness.describe()}")


def register(app: typer.Typer) -> None:
    app.command()(doctor)
