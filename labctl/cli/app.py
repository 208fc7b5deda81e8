"""The labctl command line: a thin Typer face over the library API."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from labctl.errors import KnobError, LabError, ProfileError, UserError
from labctl.profile.knobs import short_label
from labctl.host.paths import can_create
from labctl.errors import Terminated

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="QEMU/KVM lab automation and virtio-net tuning advisor.")


def _print_json(data) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def _overrides(sets: list[str] | None) -> dict:
    from labctl.profile.knobs import parse_assignment

    return dict(parse_assignment(text) for text in sets or [])


@app.command()
def validate(files: List[Path] = typer.Argument(..., help="lab profiles (YAML)")) -> None:
    """Check profiles: prints `FILE: ok` or one line per problem (exit 2)."""
    from labctl.profile.load import load_profile

    failed = False
    for path in files:
        try:
            loaded = load_profile(path)
        except ProfileError as exc:
            failed = True
            for problem in exc.problems:
                typer.echo(problem.render(str(path)), err=True)
            continue
        for warning in loaded.warnings:
            typer.echo(warning.render(str(path)), err=True)
        typer.echo(f"{path}: ok")
    if failed:
        raise typer.Exit(2)


@app.command()
def render(file: Path, uri: Optional[str] = typer.Option(None, help="libvirt URI (default: the profile's)"),
           set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE, repeatable")) -> None:
    """Print the libvirt domain XML for a profile."""
    from labctl.lab.libvirt.lifecycle import render_profile
    from labctl.profile.load import load_profile

    loaded = load_profile(file, _overrides(set_))
    typer.echo(render_profile(loaded.profile, uri), nl=False)


@app.command()
def up(file: Path, uri: Optional[str] = typer.Option(None, help="libvirt URI (default: the profile's)"),
       mode: str = typer.Option("verify", help="verify: report the NICs and power off; workload: run testpmd"),
       timeout: float = typer.Option(300.0, help="seconds to wait for the guest's report"),
       as_json: bool = typer.Option(False, "--json", help="print one JSON document")) -> None:
    """Define and start the profile's guest; print requested vs negotiated per NIC."""
    from labctl.lab.libvirt.lifecycle import up as lab_up
    from labctl.profile.load import load_profile

    if not 1 <= timeout <= 3600:
        raise UserError(f"--timeout {timeout}: out of range (allowed: 1..3600 seconds)")
    phase = None if as_json else (lambda text: typer.echo(f"[{text}]", err=True))
    result = lab_up(load_profile(file), uri, mode, timeout, phase)
    if as_json:
        _print_json(result.to_dict())
        return
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    boot = f", report after {result.boot_s:.1f} s" if result.boot_s else ""
    typer.echo(f"{result.domain}: {result.state} on {result.uri} (domain type {result.domain_type}{boot})")
    for nic in result.nics:
        req, neg = nic["requested"], nic["negotiated"] or {}
        typer.echo(f"nic{nic['index']} {req['backend']:<9} {neg.get('ifname') or '?':<5} "
                   f"queues {req['queues']}->{neg.get('queues')}  rx {req['rx_ring']}->{neg.get('rx_ring')}  "
                   f"tx {req['tx_ring']}->{neg.get('tx_ring')}")
        for reason in nic["differences"]:
            typer.echo(f"     {reason}")
    if result.workload:
        w = result.workload
        rate = w["tx_packets"] / w["t"] / 1e6 if w.get("t") else 0.0
        typer.echo(f"guest forwarder: {w['rx_packets']} packets in, {w['tx_packets']} out, {w['tx_dropped']} "
                   f"TX-dropped in {w.get('t', 0):.1f} s (~{rate:.2f} Mpps{', TCG' if result.domain_type == 'qemu' else ''})")
    applied = result.pins.get("applied") or {}
    threads = applied.get("threads") or {}
    if threads:
        typer.echo(f"pins: vcpus {threads.get('vcpus')} emulator {threads.get('emulator')} "
                   f"vswitch {applied.get('vswitch') or '-'}")
    for problem in result.pins.get("mismatches") or []:
        typer.echo(f"warning: pin not applied: {problem}", err=True)


@app.command()
def down(target: str = typer.Argument(..., help="profile file or lab name"),
         uri: Optional[str] = typer.Option(None, help="libvirt URI, if the state file is gone")) -> None:
    """Remove everything labctl created for a lab; a second call is a no-op."""
    from labctl.lab.libvirt.lifecycle import down as lab_down, lab_name_of

    name = lab_name_of(target)
    if uri is None and target.endswith((".yaml", ".yml")):
        from labctl.profile.load import load_profile

        profile = load_profile(target).profile
        uri = profile.libvirt_uri if profile.backend == "libvirt" else None
    removed = lab_down(name, uri)
    typer.echo(f"{name}: removed {len(removed)} resources" if removed else f"{name}: nothing to remove")


@app.command()
def status(uri: Optional[str] = typer.Option(None, help="also list labctl domains on this URI"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """List the labs labctl has up."""
    from labctl.lab.libvirt.lifecycle import status as lab_status

    labs = lab_status(uri)
    if as_json:
        _print_json({"labs": labs})
        return
    if not labs:
        typer.echo("no labs are up")
    for lab in labs:
        typer.echo(f"{lab['name']}: {lab['state']} ({lab['uri']}, {len(lab['resources'])} resources)")


@app.command("run")
def run_cmd(file: Path, set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE, repeatable"),
            as_json: bool = typer.Option(False, "--json", help="print the trial record as JSON")) -> None:
    """Run one trial of an embedded profile: warm-up, measurement window, teardown."""
    from labctl.profile.load import load_profile
    from labctl.measure.trial import run_trial

    loaded = load_profile(file, _overrides(set_))
    phase = None if as_json else (lambda name: typer.echo(f"[{name}]", err=True))
    record = run_trial(loaded, on_phase=phase)
    if as_json:
        typer.echo(record.model_dump_json(indent=2))
    else:
        from labctl.analysis.report import trial_summary

        typer.echo(trial_summary(record))
    if record.status != "ok":
        raise typer.Exit(1)


DB_OPTION = typer.Option(Path("labctl.db"), "--db", help="SQLite result store")


@app.command()
def sweep(file: Path, db: Path = DB_OPTION,
          repeat: Optional[int] = typer.Option(None, help="repeats per configuration (default: the profile's)"),
          resume: bool = typer.Option(False, "--resume", help="finish the newest unfinished run of this profile"),
          set_: Optional[List[str]] = typer.Option(None, "--set", help="KNOB=VALUE, repeatable"),
          steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                     help="first probe how steady the host's speed is (1-600 s); "
                                                          "if unsteady, every trial carries the warning"),
          as_json: bool = typer.Option(False, "--json", help="print the run summary as JSON")) -> None:
    """Cross the profile's sweep matrix, repeats interleaved; every trial is stored as it finishes."""
    from labctl.profile.load import load_profile
    from labctl.measure.sweep import run_sweep

    if repeat is not None and not 1 <= repeat <= 100:
        raise KnobError(f"--repeat {repeat}: out of range (allowed: 1..100)")
    if steadiness is not None:
        from labctl.host.steadiness import check_arguments

        check_arguments(steadiness)
    loaded = load_profile(file, _overrides(set_))
    for warning in loaded.warnings:
        typer.echo(warning.render(str(file)), err=True)
    probed = []
    if as_json:
        result = run_sweep(loaded, db, repeat, resume, steadiness_s=steadiness, on_steadiness=probed.append)
    else:
        def said(measured) -> None:
            probed.append(measured)
            typer.echo(f"steadiness: {measured.describe()}", err=True)

        if steadiness is not None:
            typer.echo(f"steadiness: probing the host for {steadiness:g} s before the first trial", err=True)

        result = _sweep_with_progress(loaded, db, repeat, resume, steadiness, said)
    summary = {"run_id": result.run_id, "ok": result.ok, "failed": result.failed, "db": str(db)}
    if probed:
        summary["steadiness"] = probed[0].to_dict(samples=False)
    if as_json:
        _print_json(summary)
    else:
        typer.echo(f"run {result.run_id}: {result.ok} ok, {result.failed} failed -> {db} "
                   f"(labctl report --db {db} --run {result.run_id})")
    if result.failed:
        raise typer.Exit(1)


def _sweep_with_progress(loaded, db, repeat, resume, steadiness=None, on_steadiness=None):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from labctl.measure.sweep import run_sweep

    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[last]}"),
                  console=console, transient=False) as progress:
        task = {}

        def started(run_id: int, total: int) -> None:
            task["id"] = progress.add_task(f"run {run_id}", total=total, last="")

        def finished(event) -> None:
            record = event.record
            knobs = short_label(event.entry["config"].items(), " ")
            rate = (f"{record.metrics.mpps:.2f} Mpps" if record.status == "ok" and record.metrics.mpps is not None
                    else record.status)
            progress.update(task["id"], completed=event.done, last=f"last: {knobs} -> {rate}")

        return run_sweep(loaded, db, repeat, resume, on_start=started, on_trial=finished,
                         steadiness_s=steadiness, on_steadiness=on_steadiness)


def _writable_out(out: Path) -> None:
    """--out must name a file in an existing, writable directory (checked before any work)."""
    if not can_create(out):
        raise UserError(f"--out {out}: cannot write there (allowed: a file in an existing writable directory)")


def _run_trials(db: Path, run: int | None):
    """(run id, its successful trials) for --run, or the newest run; unknown runs are user errors."""
    with _open_store(db) as store:
        run_id = run if run is not None else store.latest_run_id()
        if run_id is None:
            raise UserError(f"--db {db}: holds no runs")
        store.run(run_id)
        return run_id, store.trials(run_id)


def _open_store(db: Path):
    from labctl.results.store import Store

    if not db.exists():
        raise UserError(f"--db {db}: no such result store (run `labctl sweep` or `labctl import` first)")
    return Store(db)


@app.command()
def report(db: Path = DB_OPTION, run: Optional[int] = typer.Option(None, "--run", help="run id (default: newest)"),
           by: Optional[str] = typer.Option(None, "--by", help="knob whose values are compared"),
           fmt: str = typer.Option("table", "--format", help="table | md | csv | json"),
           metric: str = typer.Option("mpps", "--metric", help="metric to summarize"),
           plot: bool = typer.Option(True, "--plot/--no-plot", help="terminal bar chart under the table")) -> None:
    """Tables of a run: median rate, 95% CI, n, loss per configuration; A/B deltas; notes."""
    from labctl.results.record import Metrics
    from labctl.analysis.report import build_report, render, render_terminal_plot

    if fmt not in ("table", "md", "csv", "json"):
        raise UserError(f"--format {fmt}: not a report format (allowed: table, md, csv, json)")
    scalar = [k for k, f in Metrics.model_fields.items() if f.annotation in (float | None, int | None)]
    if metric not in scalar:
        raise UserError(f"--metric {metric}: not a scalar metric (allowed: {', '.join(scalar)})")
    run_id, records = _run_trials(db, run)
    result = build_report(records, by, run_id, metric)
    typer.echo(render(result, fmt))
    if fmt == "table" and plot and len(result.rows) > 1:
        typer.echo(render_terminal_plot(result))


@app.command("plot")
def plot_cmd(by: str = typer.Option(..., "--by", help="knob on the x axis"),
             out: Path = typer.Option(..., "--out", help="PNG file to write"),
             db: Path = DB_OPTION, run: Optional[int] = typer.Option(None, "--run"),
             metric: str = typer.Option("mpps", "--metric")) -> None:
    """Plot medians with 95% intervals against one knob, one series per combination of the others."""
    from labctl.analysis.plot import plot_report
    from labctl.analysis.report import build_report

    if out.suffix.lower() != ".png":
        raise UserError(f"--out {out}: the plot is written as PNG (allowed: a path ending in .png)")
    _writable_out(out)
    run_id, records = _run_trials(db, run)
    written = plot_report(build_report(records, by, run_id, metric), out)
    typer.echo(f"wrote {written}")


@app.command("import")
def import_cmd(file: Path, db: Path = DB_OPTION,
               name: Optional[str] = typer.Option(None, "--name", help="name for the imported run")) -> None:
    """Load trials from JSON lines (other hosts, other labs) into the store, all or nothing."""
    from labctl.results.interchange import import_jsonl, read_jsonl
    from labctl.results.store import Store

    read_jsonl(file)  # every line checked before the store is opened (or created)
    with Store(db) as store:
        run_id, count = import_jsonl(store, file, name)
    typer.echo(f"imported {count} trials as run {run_id} into {db}")


@app.command("export")
def export_cmd(db: Path = DB_OPTION, run: Optional[int] = typer.Option(None, "--run"),
               fmt: str = typer.Option("jsonl", "--format", help="jsonl | csv"),
               out: Optional[Path] = typer.Option(None, "--out", help="file (default: standard output)")) -> None:
    """Write trials as JSON lines (the import format) or CSV."""
    from labctl.results.interchange import export_csv, export_jsonl

    if fmt not in ("jsonl", "csv"):
        raise UserError(f"--format {fmt}: not an export format (allowed: jsonl, csv)")
    writer = export_jsonl if fmt == "jsonl" else export_csv
    if out is not None:
        _writable_out(out)
    with _open_store(db) as store:
        if run is not None:
            store.run(run)
        count = writer(store, out if out is not None else sys.stdout, run)
    if out is not None:
        typer.echo(f"wrote {count} trials to {out}", err=True)


@app.command()
def advise(db: Path = DB_OPTION, run: Optional[int] = typer.Option(None, "--run", help="run id (default: newest)"),
           plan: Optional[Path] = typer.Option(None, "--plan", help="profile: a pinning plan from this host's topology"),
           apply: Optional[Path] = typer.Option(None, "--apply", help="profile to rewrite with the advice"),
           out: Optional[Path] = typer.Option(None, "--out", help="with --apply: the tuned profile to write"),
           max_loss: float = typer.Option(0.001, "--max-loss", help="acceptable loss ratio"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Recommend settings from measured trials, with evidence; or plan pinning before measuring."""
    if not 0 <= max_loss < 1:
        raise UserError(f"--max-loss {max_loss}: out of range (allowed: 0 <= value < 1)")
    if plan is not None:
        from advisor.plan import pinning_plan

        from labctl.host.facts import gather
        from labctl.profile.load import load_profile

        result = pinning_plan(gather(), load_profile(plan).profile)
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str) if as_json else result.format())
        return
    if apply is not None and out is None:
        raise UserError("--apply needs --out TUNED.yaml (the file to write)")
    if out is not None:
        _writable_out(out)
    from advisor.recommend import advise as make_advice, trials_from_store, write_tuned

    if not db.exists():
        raise UserError(f"--db {db}: no such result store (run `labctl sweep` or `labctl import` first)")
    _run_id, records = trials_from_store(db, run)
    advice = make_advice(records, max_loss=max_loss)
    if apply is not None:
        notes = write_tuned(apply, advice, out)
        for note in notes:
            typer.echo(note, err=True)
        typer.echo(f"wrote {out}")
        return
    typer.echo(json.dumps(advice.to_dict(), indent=2, default=str) if as_json else advice.format())


@app.command()
def tune(file: Optional[Path] = typer.Argument(None, help="profile whose sweep matrix is the search space"),
         budget: int = typer.Option(..., "--budget", help="most trials to spend"),
         replay: Optional[Path] = typer.Option(None, "--replay", help="search recorded trials (JSONL) instead"),
         seed: int = typer.Option(0, "--seed"), db: Path = DB_OPTION,
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Adaptive search (TPE) over the sweep space; stops when the budget is spent or the best is clear."""
    from advisor.search import replay as replay_search, space_from_profile, tune as run_search

    if budget < 1:
        raise UserError(f"--budget {budget}: out of range (allowed: 1 or more trials)")
    if (file is None) == (replay is None):
        raise UserError("tune needs either a profile FILE (live trials) or --replay FILE.jsonl, not both")
    if replay is not None:
        result = replay_search(replay, budget, seed)
    else:
        result = _tune_live(file, budget, seed, db, run_search, space_from_profile, as_json)
    if as_json:
        _print_json(result.to_dict())
    else:
        knobs = " ".join(f"{k}={v}" for k, v in result.best_config.items())
        measured = (f"median {result.best_median:.3f} Mpps over {result.best_n} trial{'s' if result.best_n != 1 else ''}; "
                    if result.best_median is not None and result.best_n else "")
        typer.echo(f"best: {knobs} ({measured}{result.trials_used} trials used, stopped: {result.stop_reason})")


def _tune_live(file, budget, seed, db, run_search, space_from_profile, quiet):
    import copy

    from labctl.profile.knobs import with_knobs
    from labctl.profile.load import load_profile, validate_data
    from labctl.results.store import Store
    from labctl.measure.trial import run_trial

    loaded = load_profile(file)
    if loaded.profile.backend != "embedded":
        raise UserError(f"{file}: backend: {loaded.profile.backend} profiles cannot be tuned yet (allowed: embedded)")
    space = space_from_profile(loaded.profile)
    base = loaded.profile.model_dump()
    base["sweep"] = {}
    with Store(db) as store:
        run_id = store.create_run(f"{loaded.profile.name}", base, [])

        def evaluate(config):
            trial = validate_data(with_knobs(copy.deepcopy(base), config), loaded.source)
            record = run_trial(trial)
            record.run_id = run_id
            record.id = store.add_trial(record)
            return record

        def step(item) -> None:
            if not quiet:
                knobs = short_label(item.config.items(), " ")
                rate = "failed" if item.mpps is None else f"{item.mpps:.3f} Mpps"
                typer.echo(f"[{item.step}/{budget}] {item.phase}: {knobs} -> {rate}", err=True)

        try:
            result = run_search(space, evaluate, budget, seed, on_step=step)
        except BaseException:
            store.finish_run(run_id, "aborted")
            raise
        store.finish_run(run_id, "finished")
    return result


image_app = typer.Typer(help="The workload appliance (kernel + initramfs) the libvirt lab boots.", no_args_is_help=True)
app.add_typer(image_app, name="image")


@image_app.command("build")
def image_build(force: bool = typer.Option(False, "--force", help="rebuild even when cached"),
                as_json: bool = typer.Option(False, "--json")) -> None:
    """Build the appliance from Debian packages, cached by content hash."""
    from labctl.lab.libvirt.appliance import cache as appliance

    built = appliance.build(force=force, progress=None if as_json else (lambda m: typer.echo(m, err=True)))
    info = {"key": built.key, "kernel": str(built.kernel), "initrd": str(built.initrd),
            "kernel_version": built.kernel_version, "size_bytes": built.size_bytes, "built": built.built}
    if as_json:
        _print_json(info)
    else:
        typer.echo(f"{'built' if built.built else 'cached'}: {built.path} (kernel {built.kernel_version}, "
                   f"{built.size_bytes / 1e6:.1f} MB)")


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json"),
           steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                      help="also probe how steady the host's speed is for SECONDS "
                                                           "(1-600): shared or oversubscribed hosts give two-band "
                                                           "results")) -> None:
    """Report what this host can do: CPUs, NUMA, hugepages, KVM, versions, lab backends."""
    from labctl.host.facts import gather

    if steadiness is not None:
        from labctl.host.steadiness import check_arguments

        check_arguments(steadiness)  # bad input fails before any work
    facts = gather()
    probed = None
    if steadiness is not None:
        from labctl.signals import stoppable
        from labctl.host.steadiness import probe

        with stoppable():
            probed = probe(steadiness)
    if as_json:
        data = facts.to_dict()
        if probed is not None:
            data["steadiness"] = probed.to_dict()
        _print_json(data)
        return
    from labctl.host.cpuset import format_cpuset

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
    if probed is not None:
        typer.echo(f"steadiness: {probed.describe()}")


def run(argv: list[str] | None = None) -> int:
    """Run one command; LabErrors become one line and their exit code. Never prints a traceback."""
    try:
        code = app(args=argv, prog_name="labctl", standalone_mode=False)
    except LabError as exc:
        typer.echo(str(exc) if ": " in str(exc) else f"labctl: {exc}", err=True)
        return exc.exit_code
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        if code == 130:  # typer turns Ctrl-C into a silent exit 130
            typer.echo("labctl: interrupted", err=True)
        return code if isinstance(code, int) else 1
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("labctl: interrupted", err=True)
        return 130
    except Terminated:
        typer.echo("labctl: terminated by SIGTERM (cleaned up)", err=True)
        return Terminated.exit_code
    except Exception as exc:  # click usage errors and anything unexpected
        if isinstance(exc, typer.TyperException) and hasattr(exc, "show"):
            exc.show()  # usage errors: click's message, exit 2
            return getattr(exc, "exit_code", 2)
        if os.environ.get("LABCTL_DEBUG"):
            raise
        typer.echo(f"labctl: internal error: {type(exc).__name__}: {exc} (LABCTL_DEBUG=1 shows the traceback)", err=True)
        return 1
    if code == 130:  # typer turns Ctrl-C into Exit(130), which click returns in non-standalone mode
        typer.echo("labctl: interrupted", err=True)
    return code if isinstance(code, int) else 0


def main() -> None:
    sys.exit(run())

