"""Verdicts within a budget: fixed repeats against ``sweep --until decided``, on noise from stored trials.

Usage: ``python benchmarks/verdict.py [--runs N] [--seed S] [--budget TRIALS] [--threshold PCT]``

Noise models, fitted to ``benchmarks/data/*.jsonl`` (real embedded-lab sweeps on this kind of host):

- per-trial noise: the log-scale sd of one configuration's repeats, drawn from the stored configurations'
  own (48 configurations, 2-31 %), clipped to 5-35 %;
- the host's slow speed: an AR(1) process (persistence 0.9) that carries the share of the variance the
  stored runs' lag-1 autocorrelation of residuals shows (0.28-0.37), plus a linear drift per trial drawn
  within the stored runs' fitted slopes (+-0.26 % per trial);
- two bands: with the share of stored configurations :func:`two_band` calls two-band, the host switches
  (stay probability 0.9 per trial) between its speed and a band 1 / 1.3 slower.

Planted effects 0, 5, 10 and 20 % (the candidate faster). One comparison: a baseline and a candidate,
measured in blocks (A B, then B A). Designs: fixed n blocks (n = 3..budget/2, the first n blocks of the
same draw), one look at level 0.05 (fixed-5 and fixed-10 shown in full); and ``--until decided``
(:class:`labctl.measure.until.Until` and :func:`run_until`: the sweep's own code, the same
:func:`labctl.analysis.sequential.decide`), alpha 0.05 spent over its looks by exact boundaries, a comparison
given up when its chance of a verdict by the budget's end falls below ``--futility`` (10 %), a budget of 40
trials.
Per design and effect: the share of correct verdicts (better for 10 and 20 %, equivalent for 0 %; for 5 %,
on the threshold itself, better), the share of false ones (a direction on 0 %, the wrong direction, or
equivalent on an effect of twice the threshold or more), the share undecided, the mean and median trials
over all runs (the average sample number), and the median trials to a correct verdict.

The fair comparison is with the fixed design of the same error, both kinds: the same alpha (false
verdicts) and the same power (correct verdicts; sequential analysis compares designs so: Jennison &
Turnbull 2000, "Group Sequential Methods", ch. 1 and 7). ``equal_power_at_10pct`` finds the fewest trials of
a fixed design whose correct share at 10 % reaches until's (shown as a design of its own, ``fixed-N``) and
puts until's mean and median trials over all runs, and its median trials to a correct verdict, against
them. ``--tune`` repeats it for 3, 5 and 8 looks, Pocock- and O'Brien-Fleming-type spending, and the
sweep's design without futility. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from labctl.analysis import sequential as seq  # noqa: E402
from labctl.analysis.statistics import two_band  # noqa: E402
from labctl.measure.until import FUTILITY, Budget, Pairing, Until, paired, run_until  # noqa: E402
from labctl.results.record import Metrics, TrialRecord  # noqa: E402

DATA = sorted((ROOT / "benchmarks" / "data").glob("*.jsonl"))
EFFECTS = (0.0, 5.0, 10.0, 20.0)
#: the until design measured (see --tune): looks, spending, blocks before the first look
LOOKS, SPENDING, FIRST = 8, "pocock", 3
KNOB = "k"


def fit(paths=DATA) -> dict:
    """The noise model's parameters, from stored trials."""
    cvs, bands, rhos, slopes = [], 0, [], []
    for path in paths:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        groups: dict[str, list] = defaultdict(list)
        for row in rows:
            if row["metrics"].get("mpps"):
                groups[json.dumps(row["config"], sort_keys=True)].append((row.get("started_at") or 0, row["metrics"]["mpps"]))
        medians = {k: float(np.median([m for _, m in v])) for k, v in groups.items()}
        for values in groups.values():
            x = np.array([m for _, m in values])
            cvs.append(float(np.std(np.log(x), ddof=1)))
            bands += two_band(x) is not None
        ordered = sorted((t, math.log(m / medians[k])) for k, v in groups.items() for t, m in v)
        res = np.array([r for _, r in ordered])
        rhos.append(float(np.corrcoef(res[:-1], res[1:])[0, 1]))
        slopes.append(abs(float(np.polyfit(np.arange(len(res)), res, 1)[0])))
    return {"cvs": cvs, "two_band_share": bands / len(cvs), "lag1": float(np.mean(rhos)),
            "slope": float(max(slopes)), "configurations": len(cvs), "files": [p.name for p in paths]}


class Host:
    """One drawn noise model: a trial's value is base x effect x host speed x its own noise."""

    def __init__(self, model: dict, rng: np.random.Generator):
        self.rng = rng
        self.cv = float(np.clip(rng.choice(model["cvs"]), 0.05, 0.35))
        share = min(max(model["lag1"], 0.0) / 0.9, 0.9)
        self.slow_sd = self.cv * math.sqrt(share)
        self.fast_sd = self.cv * math.sqrt(1 - share)
        self.slope = float(rng.uniform(-model["slope"], model["slope"]))
        self.banded = rng.random() < model["two_band_share"]
        self.level = 0.0
        self.low = False
        self.n = 0

    def draw(self, factor: float) -> float:
        self.level = 0.9 * self.level + math.sqrt(1 - 0.81) * self.rng.normal(0, self.slow_sd)
        if self.banded and self.rng.random() > 0.9:
            self.low = not self.low
        self.n += 1
        log = self.level + self.slope * self.n + self.rng.normal(0, self.fast_sd) - (math.log(1.3) if self.low else 0)
        return 5.0 * factor * math.exp(log)


def _record(config: dict, block: int, value: float) -> TrialRecord:
    return TrialRecord(config=config, metrics=Metrics(mpps=value), details={"block": block})


def _blocks(host: Host, effect: float, blocks: int) -> list[TrialRecord]:
    records = []
    for b in range(blocks):
        for v in ((0, 1) if b % 2 == 0 else (1, 0)):
            records.append(_record({KNOB: v}, b, host.draw(1 + effect / 100 if v else 1.0)))
    return records


def fixed_curve(host: Host, effect: float, most: int, threshold: float) -> dict[int, str]:
    """Fixed designs of n = MIN_PAIRS..``most`` blocks on one host's trials: each n judged once at alpha
    (the first n blocks of the same draw, so the designs differ only in n)."""
    records = _blocks(host, effect, most)
    out = {}
    for n in range(seq.MIN_PAIRS, most + 1):
        diffs, refusal = paired(records[:2 * n], Pairing(KNOB, 0, 1), "mpps")
        out[n] = seq.decide(diffs, seq.ALPHA, threshold, False, "log", refusal).verdict
    return out


def until(host: Host, effect: float, budget: int, threshold: float, looks: int, spending: str,
          first: int, futility: float) -> tuple[str, int]:
    course = Until({KNOB: [0, 1]}, [{KNOB: 0}, {KNOB: 1}], Budget(trials=budget), threshold, "mpps",
                   spending=spending, most_looks=looks, first_blocks=first, futility=futility)
    records: list[TrialRecord] = []

    def measure(entry):
        v = entry["config"][KNOB]
        return _record(entry["config"], entry["block"], host.draw(1 + effect / 100 if v else 1.0))

    summary = run_until(course, measure, lambda entries: None, records, lambda r: "mpps", lambda m: False)
    return summary["comparisons"][0]["verdict"], len(records)


def judge(verdict: str, effect: float, threshold: float) -> str:
    if verdict in ("open", "refused"):
        return "undecided"
    if effect == 0.0:
        return "correct" if verdict == "equivalent" else "false"
    if verdict == "worse" or (verdict == "equivalent" and effect >= 2 * threshold):
        return "false"
    return "correct" if verdict == "better" else "neither"


def _hosts(model: dict, seed: int, effect: float, runs: int):
    rng = np.random.default_rng([seed, int(effect * 10)])  # the same hosts for every design
    return [Host(model, rng) for _ in range(runs)]


def _row(outcomes: list[tuple[str, int]], runs: int) -> dict:
    tally: dict[str, int] = defaultdict(int)
    for outcome, _ in outcomes:
        tally[outcome] += 1
    correct = [used for outcome, used in outcomes if outcome == "correct"]
    used = [u for _, u in outcomes]
    return {"correct": round(tally["correct"] / runs, 4), "false": round(tally["false"] / runs, 4),
            "undecided": round(tally["undecided"] / runs, 4),
            "mean_trials": round(float(np.mean(used)), 1), "median_trials": float(np.median(used)),
            "median_trials_to_correct": float(np.median(correct)) if correct else None}


def run_until_design(model, args, looks, spending, first, effects=EFFECTS, futility=None) -> dict:
    rows = {}
    for effect in effects:
        outcomes = []
        for host in _hosts(model, args.seed, effect, args.runs):
            verdict, used = until(host, effect, args.budget, args.threshold, looks, spending, first,
                                  args.futility if futility is None else futility)
            outcomes.append((judge(verdict, effect, args.threshold), used))
        rows[f"{effect:g}%"] = _row(outcomes, args.runs)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="noise models drawn per design and effect")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=int, default=40, help="--until decided's budget in trials")
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--looks", type=int, default=LOOKS, help="--until decided's most looks")
    parser.add_argument("--spending", default=SPENDING, choices=seq.SPENDINGS)
    parser.add_argument("--first", type=int, default=FIRST, help="blocks before the first look")
    parser.add_argument("--futility", type=float, default=FUTILITY, help="--until decided's futility level (0: never)")
    parser.add_argument("--tune", action="store_true", help="also the until design over looks x spending")
    args = parser.parse_args(argv)
    started = time.monotonic()
    model = fit()
    most = args.budget // 2
    out: dict = {"model": {k: v for k, v in model.items() if k != "cvs"} | {
        "cv_range": [round(min(model["cvs"]), 3), round(max(model["cvs"]), 3)]},
        "runs": args.runs, "seed": args.seed, "threshold_pct": args.threshold, "alpha": seq.ALPHA,
        "until": {"budget_trials": args.budget, "looks": args.looks, "spending": args.spending,
                  "first_look_blocks": args.first}, "designs": {}}
    curves: dict[str, dict[int, list[tuple[str, int]]]] = {}
    for effect in EFFECTS:
        per_n: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for host in _hosts(model, args.seed, effect, args.runs):
            for n, verdict in fixed_curve(host, effect, most, args.threshold).items():
                per_n[n].append((judge(verdict, effect, args.threshold), 2 * n))
        curves[f"{effect:g}%"] = per_n
    for n in (5, 10):
        out["designs"][f"fixed-{n}"] = {e: _row(curves[e][n], args.runs) for e in curves}
    out["designs"]["until-decided"] = run_until_design(model, args, args.looks, args.spending, args.first)
    u10 = out["designs"]["until-decided"]["10%"]
    match = next((n for n, v in sorted(curves["10%"].items()) if _row(v, args.runs)["correct"] >= u10["correct"]), None)
    if match and match not in (5, 10):  # the fixed design of until's error: its alpha and its power at 10 %
        out["designs"][f"fixed-{match}"] = {e: _row(curves[e][match], args.runs) for e in curves}
    out["fixed_curve"] = {e: {str(2 * n): {"correct": _row(v, args.runs)["correct"], "false": _row(v, args.runs)["false"]}
                              for n, v in sorted(curves[e].items())} for e in ("0%", "10%")}
    # the fair comparison (equal alpha and equal power): the smallest fixed design whose correct share at
    # 10 % reaches until's, against until's average (and median) sample number over all its runs
    zero = {name: rows["0%"]["false"] for name, rows in out["designs"].items()}
    zero["fixed-all"] = max(_row(v, args.runs)["false"] for v in curves["0%"].values())
    out["equal_power_at_10pct"] = {
        "until_correct": u10["correct"], "until_mean_trials": u10["mean_trials"], "until_median_trials": u10["median_trials"],
        "until_median_trials_to_correct": u10["median_trials_to_correct"],
        "fixed_trials_for_that_power": 2 * match if match else f"more than {2 * most}",
        "fixed_correct": _row(curves["10%"][match], args.runs)["correct"] if match else None}
    out["targets"] = {
        "false_on_0pct_at_most_alpha": all(v <= seq.ALPHA for v in zero.values()),
        "until_fewer_trials_at_equal_power_10pct": bool(match) and u10["mean_trials"] < 2 * match
        and u10["median_trials"] < 2 * match and (u10["median_trials_to_correct"] or math.inf) < 2 * match}
    if args.tune:
        out["tuning"] = {}
        designs = [(looks, spending, args.futility) for looks in (3, 5, 8) for spending in seq.SPENDINGS]
        for looks, spending, futility in [*designs, (args.looks, args.spending, 0.0)]:
            rows = run_until_design(model, args, looks, spending, args.first, (0.0, 10.0, 20.0), futility)
            entry = {e: {k: r[k] for k in ("correct", "false", "mean_trials", "median_trials")}
                     for e, r in rows.items()}
            n = next((n for n, v in sorted(curves["10%"].items())
                      if _row(v, args.runs)["correct"] >= rows["10%"]["correct"]), None)
            entry["fixed_trials_for_equal_power_at_10pct"] = 2 * n if n else f"more than {2 * most}"
            out["tuning"][f"{looks} looks, {spending}" + (", no futility" if not futility else "")] = entry
    out["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
