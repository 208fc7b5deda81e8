"""Commands on a running lab over time: reconf (what a live change costs) and soak (one long trial)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.measure import PROFILE
from labctl.cli.output import print_json, say
from labctl.errors import UserError
from labctl.events import Event

SET = typer.Option(None, "--set", help="KNOB=VALUE, repeatable (the lab before the change)")
DB = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store (and where the stored NDR is looked up)")
RATE = typer.Option(None, "--rate", help="offered load of all ports: 0.5Mpps, 200kpps or 40% (default: half the NDR "
                                         "lower bound stored for this configuration)")
AT = typer.Option(None, "--at", help="ndr: hold the stored NDR lower bound itself (CSIT's load)")
NO_WAIT = typer.Option(False, "--no-wait", help="fail at once (exit 1) when another trial measures on this trial's "
                                                  "CPUs, instead of waiting for it")


def _printer(as_json: bool):
    """Phases and notes on standard error (with --json: notes only); a soak's progress once a minute."""
    shown: dict[str, float] = {"t": -60.0}

    def printer(event: Event) -> None:
        if event.kind == "note" or (event.kind == "phase" and not as_json):
            say(event.message if event.kind == "note" else f"[{event.message}]")
        elif event.kind == "live" and not as_json:
            data = event.data or {}
            if data.get("kind") == "reconf":
                say(f"  {event.message}")
            elif data.get("kind") == "soak" and data.get("t_s", 0) >= shown["t"] + 60:
                shown["t"] = data["t_s"]
                say(f"  soak {data['t_s']:.0f}/{data['duration_s']:.0f} s: {data['received']}/{data['offered']} "
                    f"received in that second, p99 {data['p99_us']:.1f} us")

    return printer


def _loaded(file: Path, set_: Optional[List[str]]):
    loaded = api.load(file, api.parse_overrides(set_))
    for warning in loaded.warnings:
        say(warning.render(str(file)))
    return loaded


def _finish(result, db: Path, as_json: bool) -> None:
    """The result (JSON, or the trial in words and where it is stored), its warnings; exit 1 for a failed trial."""
    if as_json:
        print_json(result.to_dict())
    else:
        for line in api.live_lines(result.record):
            typer.echo(line)
        typer.echo(f"run {result.run_id} -> {db} (labctl report --db {db} --run {result.run_id} --html PAGE)")
    for warning in result.record.warnings:
        say(f"warning: {warning}")
    if result.record.status != "ok":
        raise typer.Exit(1)


def reconf(file: Path = PROFILE,
           change: Optional[List[str]] = typer.Option(None, "--change", help="KNOB=VALUE made live while the load runs, "
                                                      "repeatable: workload.rxd|txd|burst (embedded), "
                                                      "guest.pinning.vhost (OVS's PMDs), vswitch.pmd_rxq_rebalance=now, "
                                                      "guest.pinning.vcpus.N|emulator (libvirt)"),
           exec_: Optional[str] = typer.Option(None, "--exec", metavar="ARGV", help="run this command at the change "
                                               "time instead: its words split as a shell would (shlex), run as an "
                                               "argv, never through a shell"),
           advice: Optional[int] = typer.Option(None, "--advice", metavar="RUN", help="labctl apply of this run's "
                                                "advice to the lab's running domain (libvirt)"),
           rate: Optional[str] = RATE, at: Optional[str] = AT,
           window: float = typer.Option(5.0, "--window", metavar="SECONDS", help="the window without the change and "
                                        "the one after it (1..60 s)"),
           db: Path = DB, set_: Optional[List[str]] = SET,
           as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
           max_time_lost: Optional[float] = typer.Option(None, "--max-time-lost", metavar="SECONDS",
                                                         help="exit 1 when the implied time lost exceeds this (CI)"),
           no_wait: bool = NO_WAIT) -> None:
    """What a live change costs: packets lost, implied time lost, every outage, latency before and after."""
    try:
        argv = shlex.split(exec_) if exec_ is not None else None
    except ValueError as exc:
        raise UserError(f"--exec {exec_}: {exc} (allowed: a command line such as '/usr/local/bin/step --now')") from None
    if max_time_lost is not None and max_time_lost < 0:
        raise UserError(f"--max-time-lost {max_time_lost:g}: negative (allowed: 0 or more seconds)")
    api.check_reconf(list(change or []), argv, advice, window, rate, at)  # before the profile is read
    result = api.reconf(_loaded(file, set_), list(change or []), argv, advice, rate, at, window, db,
                        on_event=_printer(as_json), wait=not no_wait)
    _finish(result, db, as_json)
    lost_s = result.record.metrics.time_lost_s or 0.0
    if max_time_lost is not None and lost_s > max_time_lost:
        say(f"time lost {lost_s:.4f} s exceeds --max-time-lost {max_time_lost:g} s")
        raise typer.Exit(1)


def soak(file: Path = PROFILE,
         duration: str = typer.Option("30m", "--duration", help="how long: 90s, 30m, 2h (10 s to 12 h)"),
         rate: Optional[str] = RATE, at: Optional[str] = AT, db: Path = DB, set_: Optional[List[str]] = SET,
         as_json: bool = typer.Option(False, "--json", help="print the result (with its series) as JSON"),
         no_wait: bool = NO_WAIT) -> None:
    """One long trial, second by second: loss events beside the host's stalls, the loss bound, stored every minute."""
    api.check_soak(duration, rate, at)  # before the profile is read
    result = api.soak(_loaded(file, set_), duration, rate, at, db, on_event=_printer(as_json), wait=not no_wait)
    _finish(result, db, as_json)


def register(app: typer.Typer) -> None:
    app.command()(reconf)
    app.command()(soak)
