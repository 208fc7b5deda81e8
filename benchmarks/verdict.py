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
measured in blocks (A B, then B A). Designs: fixed 5 and fixed 10 blocks, one look at level 0.05; and
``--until decided`` (:class:`labctl.measure.until.Until` and :func:`run_until`: the sweep's own code,
the same :func:`labctl.analysis.sequential.decide`), alpha 0.05 spent over its looks, a budget of 40
trials. Per design and effect: the share of correct verdicts (better for 10 and 20 %, equivalent for 0 %;
for 5 %, on the threshold itself, better), the share of false ones (a direction on 0 %, the wrong
direction, or equivalent on an effect of twice the threshold or more), the share undecided and the median
trials to a verdict (over the runs that reached a correct one). Prints one JSON document.
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
from labctl.measure.until import Budget, Until, paired, run_until  # noqa: E402
from labctl.results.record import Metrics, TrialRecord  # noqa: E402

DATA = sorted((ROOT / "benchmarks" / "data").glob("*.jsonl"))
EFFECTS = (0.0, 5.0, 10.0, 20.0)
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


def fixed(host: Host, effect: float, blocks: int, threshold: float) -> tuple[str, int]:
    records = []
    for b in range(blocks):
        for v in ((0, 1) if b % 2 == 0 else (1, 0)):
            records.append(_record({KNOB: v}, b, host.draw(1 + effect / 100 if v else 1.0)))
    from labctl.measure.until import Pairing

    diffs, refusal = paired(records, Pairing(KNOB, 0, 1), "mpps")
    return seq.decide(diffs, seq.ALPHA, threshold, False, "log", refusal).verdict, len(records)


def until(host: Host, effect: float, budget: int, threshold: float) -> tuple[str, int]:
    course = Until({KNOB: [0, 1]}, [{KNOB: 0}, {KNOB: 1}], Budget(trials=budget), threshold, "mpps")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="noise models drawn per design and effect")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=int, default=40, help="--until decided's budget in trials")
    parser.add_argument("--threshold", type=float, default=5.0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    model = fit()
    designs = {"fixed-5": lambda h, e: fixed(h, e, 5, args.threshold),
               "fixed-10": lambda h, e: fixed(h, e, 10, args.threshold),
               "until-decided": lambda h, e: until(h, e, args.budget, args.threshold)}
    out: dict = {"model": {k: v for k, v in model.items() if k != "cvs"} | {
        "cv_range": [round(min(model["cvs"]), 3), round(max(model["cvs"]), 3)]},
        "runs": args.runs, "seed": args.seed, "threshold_pct": args.threshold, "alpha": seq.ALPHA,
        "budget_trials": args.budget, "spending": "pocock", "designs": {}}
    for name, design in designs.items():
        rows = {}
        for effect in EFFECTS:
            rng = np.random.default_rng([args.seed, int(effect * 10)])  # the same hosts for every design
            tally: dict[str, int] = defaultdict(int)
            trials = []
            for _ in range(args.runs):
                verdict, used = design(Host(model, rng), effect)
                outcome = judge(verdict, effect, args.threshold)
                tally[outcome] += 1
                if outcome == "correct":
                    trials.append(used)
            rows[f"{effect:g}%"] = {"correct": tally["correct"] / args.runs, "false": tally["false"] / args.runs,
                                    "undecided": tally["undecided"] / args.runs,
                                    "median_trials_to_correct": float(np.median(trials)) if trials else None}
        out["designs"][name] = rows
    zero = {name: rows["0%"]["false"] for name, rows in out["designs"].items()}
    ten = {name: rows["10%"]["median_trials_to_correct"] for name, rows in out["designs"].items()}
    fixed_ten = [v for k, v in ten.items() if k.startswith("fixed") and v is not None]
    out["targets"] = {
        "false_on_0pct_at_most_alpha": all(v <= seq.ALPHA for v in zero.values()),
        "until_fewer_median_trials_at_10pct": ten["until-decided"] is not None and bool(fixed_ten)
        and ten["until-decided"] < min(fixed_ten)}
    out["wall_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
