"""Commands that measure: run (one trial), sweep, tune."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from labctl import api
from labctl.cli.output import SweepProgress, notes_printer, phase_printer, print_json, say
from labctl.errors import UserError
from labctl.events import Event

SET = typer.Option(None, "--set", help="KNOB=VALUE, repeatable")
DB = typer.Option(api.DEFAULT_DB, "--db", help="SQLite result store")


NO_WAIT = typer.Option(False, "--no-wait", help="fail at once (exit 1) when another trial measures on this "
                                                  "trial's CPUs, instead of waiting for it")
PROFILE = typer.Argument(..., help="lab profile (YAML)")
RATE = typer.Option(None, "--rate", help="offered load of all ports: 2.5Mpps, 750kpps or 40% (of the measured "
                                         "maximum); sets workload.rate (labgen)")
SWAP = typer.Option(None, "--swap", help="hotplug | boot: how a running guest reaches a trial whose NICs differ only "
                                          "in settings (queues, rings, model): its NICs swapped in place, or a boot "
                                          "(default: the profile's swap, hotplug); sets swap")


def _knobs(set_: Optional[List[str]], rate: Optional[str], swap: Optional[str] = None) -> dict:
    knobs = api.parse_overrides(set_)
    if rate is not None:
        knobs["workload.rate"] = rate
    if swap is not None:
        knobs["swap"] = swap
    return knobs


def run(file: Path = PROFILE, set_: Optional[List[str]] = SET, rate: Optional[str] = RATE,
        as_json: bool = typer.Option(False, "--json", help="print the trial record as JSON"),
        no_wait: bool = NO_WAIT) -> None:
    """Run one trial of a profile: its lab up, warm-up, measurement window, teardown."""
    record = api.run(api.load(file, _knobs(set_, rate)), phase_printer if not as_json else notes_printer,
                     wait=not no_wait)
    typer.echo(record.model_dump_json(indent=2) if as_json else api.trial_summary(record))
    if record.status != "ok":
        raise typer.Exit(1)


def sweep(file: Path = PROFILE, db: Path = DB,
          repeat: Optional[int] = typer.Option(None, help="repeats per configuration (default: the profile's)"),
          resume: bool = typer.Option(False, "--resume", help="finish the newest unfinished run of this profile"),
          set_: Optional[List[str]] = SET, rate: Optional[str] = RATE,
          steadiness: Optional[float] = typer.Option(None, "--steadiness", metavar="SECONDS",
                                                     help="first probe how steady the host's speed is (1-600 s); "
                                                          "if unsteady, every trial carries the warning"),
          metric: str = typer.Option("mpps", "--metric", help="mpps (a trial at the profile's rate) | ndr | pdr "
                                                            "(an NDR/PDR search per configuration)"),
          order: Optional[str] = typer.Option(None, "--order", help="interleaved | random: the order within a "
                                              "repeat (default: the profile's order, interleaved)"),
          seed: Optional[int] = typer.Option(None, "--seed", help="the seed of --order random (recorded in the run; "
                                             "default: drawn)"),
          until: Optional[str] = typer.Option(None, "--until", help="decided: add repeats, round by round, only "
                                              "where a comparison is undecided (needs --budget)"),
          budget: Optional[str] = typer.Option(None, "--budget", help="with --until decided: most trials (40) or "
                                               "time (90s, 12m, 1h)"),
          threshold: Optional[float] = typer.Option(None, "--threshold", help="with --until decided: the smallest "
                                                    f"change in % that counts (default {api.DEFAULT_THRESHOLD_PCT:g}); "
                                                    "within it: equivalent"),
          verdict_metric: Optional[str] = typer.Option(None, "--verdict-metric", help="with --until decided: what is "
                                                       "judged (default: the run's own: mpps, ndr, pdr, a tcp rate; "
                                                       "loss_ratio at a paced rate)"),
          futility: Optional[float] = typer.Option(None, "--futility", metavar="PCT", help="with --until decided: "
                                                   "give a comparison up when its chance of a verdict by the budget's "
                                                   "end falls below PCT% (default 10; 0: never)"),
          swap: Optional[str] = SWAP,
          as_json: bool = typer.Option(False, "--json", help="print the run summary as JSON"),
          no_wait: bool = NO_WAIT) -> None:
    """Cross the profile's sweep matrix, repeats interleaved; every trial is stored as it finishes."""
    # before the profile is read: a bad value fails first
    api.check_sweep(repeat, until, budget, futility, steadiness, swap)
    loaded = api.load(file, _knobs(set_, rate, swap))
    for warning in loaded.warnings:
        say(warning.render(str(file)))
    decide = dict(until=until, budget=budget, threshold_pct=threshold, verdict_metric=verdict_metric,
                  futility_pct=futility)
    if as_json:
        result = api.sweep(loaded, db, repeat, resume, steadiness, on_event=notes_printer, metric=metric,
                           wait=not no_wait, order=order, seed=seed, **decide)
    else:
        with SweepProgress() as progress:
            result = api.sweep(loaded, db, repeat, resume, steadiness, on_event=progress, metric=metric,
                               wait=not no_wait, order=order, seed=seed, **decide)
    summary = {"run_id": result.run_id, "ok": result.ok, "failed": result.failed, "db": str(db)}
    if result.steadiness is not None:
        summary["steadiness"] = result.steadiness.to_dict(samples=False)
    if result.until is not None:
        summary["until"] = result.until
    if as_json:
        print_json(summary)
    else:
        for line in api.course_lines(result.until or {}):  # the next line names the run
            typer.echo(line)
        typer.echo(f"run {result.run_id}: {result.ok} ok, {result.failed} failed -> {db} "
                   f"(labctl report --db {db} --run {result.run_id})")
    if result.failed:
        raise typer.Exit(1)


def tune(file: Optional[Path] = typer.Argument(None, help="profile whose sweep matrix is the search space"),
         budget: int = typer.Option(..., "--budget", help="most trials to spend"),
         replay: Optional[Path] = typer.Option(None, "--replay", help="search recorded trials (JSONL) instead"),
         seed: int = typer.Option(0, "--seed", help="the search's random seed (the same seed and trials give the same proposals)"), db: Path = DB,
         metric: str = typer.Option("mpps", "--metric", help="mpps | ndr | pdr: what the search maximises"),
         swap: Optional[str] = SWAP,
         as_json: bool = typer.Option(False, "--json", help="print the search's result as JSON"), no_wait: bool = NO_WAIT) -> None:
    """Adaptive search (TPE) over the sweep space; stops when the budget is spent or the best is clear."""
    api.check_budget(budget)
    api.check_swap(swap)
    if (file is None) == (replay is None):
        raise UserError("tune needs either a profile FILE (live trials) or --replay FILE.jsonl, not both")

    def step(event: Event) -> None:
        if event.kind == "note":
            say(event.message)
        elif event.kind == "step":
            item = event.data
            rate = "failed" if item.mpps is None else f"{item.mpps:.3f} Mpps"
            say(f"[{item.step}/{event.total}] {item.phase}: {api.knob_label(item.config, ' ')} -> {rate}")

    if replay is not None:
        result = api.replay(replay, budget, seed)
    else:
        result = api.tune(api.load(file, _knobs(None, None, swap)), budget, seed, db,
                          notes_printer if as_json else step, metric=metric, wait=not no_wait)
    if as_json:
        print_json(result.to_dict())
        return
    knobs = " ".join(f"{k}={v}" for k, v in result.best_config.items())
    trials = f"trial{'s' if result.best_n != 1 else ''}"
    unit = "Mpps" if metric == "mpps" else f"Mpps {metric.upper()}"
    measured = (f"median {result.best_median:.3f} {unit} over {result.best_n} {trials}; "
                if result.best_median is not None and result.best_n else "")
    typer.echo(f"best: {knobs} ({measured}{result.trials_used} trials used, stopped: {result.stop_reason})")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command()(sweep)
    app.command()(tune)
    app.command()(ndr)


def ndr(file: Path = PROFILE, db: Path = DB, set_: Optional[List[str]] = SET,
        search: str = typer.Option("mlrsearch", "--search", help="mlrsearch | binary (RFC 2544, for comparison)"),
        precision: float = typer.Option(api.DEFAULT_PRECISION, "--precision", help="relative width at which a rate is found"),
        final_trial: Optional[float] = typer.Option(None, "--final-trial", metavar="SECONDS",
                                                    help="the longest trial (default: the profile's duration_s)"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON document"),
        no_wait: bool = NO_WAIT) -> None:
    """NDR (no loss) and PDR (0.5% loss) with MLRsearch, then latency at 10/50/90% of PDR; every trial stored."""
    loaded = api.load(file, api.parse_overrides(set_))
    result = api.ndr(loaded, db, search, precision, final_trial,
                     on_event=notes_printer if as_json else phase_printer, wait=not no_wait)
    if as_json:
        print_json(result.to_dict())
        return
    for name, bound in (("NDR", result.ndr), ("PDR", result.pdr)):
        if bound.mpps is None:
            typer.echo(f"{name}:  none above the minimum load")
        else:
            upper = f", upper bound {bound.upper_mpps:.3f}" if bound.upper_mpps is not None else ""
            what = "forwarded at the lower bound's load" if result.search == "mlrsearch" else "the lower bound"
            typer.echo(f"{name}:  {bound.mpps:.3f} Mpps ({what}; load lower bound {bound.lower_mpps:.3f}{upper}; "
                       f"all ports)")
    for row in result.latency:
        typer.echo(f"latency at {row['load_pct']}% of PDR ({row['mpps']:.3f} Mpps): p50 {row['p50_us']:.1f} us, "
                   f"p90 {row['p90_us']:.1f}, p99 {row['p99_us']:.1f}, p99.9 {row['p999_us']:.1f}, "
                   f"max {row['max_us']:.1f}")
    typer.echo(f"{result.search}: {result.trials} trials, {result.trial_seconds:.1f} trial-seconds in "
               f"{result.wall_s:.0f} s (generator's paced maximum {result.max_load_mpps:.3f} Mpps, found in "
               f"{result.calibration_trials} calibration trials) -> run {result.run_id} "
               f"in {db}")
    for warning in result.warnings:
        say(f"warning: {warning}")
