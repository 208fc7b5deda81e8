"""How often the trend's grouping (FD.io CSIT's jumpavg, :mod:`labctl.analysis.changes`) marks a change that is
not there, and finds one that is, on this host's own spread.

Usage: ``python benchmarks/trend_marks.py [--series N] [--runs R] [--trials T]``

Series of R runs of T trials at 8 Mpps, each trial's noise a log residual of the stored embedded-lab trials
(``benchmarks/data``: :func:`tests.datasets.host_residuals`, drawn with replacement). Flat series: the share with
any mark (false marks). Stepped series (the rate times 0.5, 0.7, 0.8, 0.9 from run R*6/10 on): the share marked
with exactly one regression at the step's run, and the share with any mark at all. Also the same series grouped
by their run medians alone (one number per run, as a trend of medians would): the reason runs go in as their
trials. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labctl.analysis.changes import group_runs  # noqa: E402
from tests.datasets import host_residuals, trend_series  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=300)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    residuals = host_residuals()
    step = args.runs * 6 // 10
    out = {"series": args.series, "runs": args.runs, "trials": args.trials, "step_at_run": step,
           "noise": {"source": "benchmarks/data/*.jsonl log residuals about each configuration's mean log", "n": len(residuals),
                     "sd": round(statistics.pstdev(residuals), 4)}, "grouped_by": {}}
    for name, shape in (("trials", lambda s: s), ("medians", lambda s: [[statistics.median(r)] for r in s])):
        flat = [group_runs(shape(trend_series(i, args.runs, args.trials, residuals=residuals))) for i in range(args.series)]
        result = {"flat_marked": round(sum(bool(g.marks) for g in flat) / args.series, 4)}
        for factor in (0.5, 0.7, 0.8, 0.9):
            stepped = [group_runs(shape(trend_series(i, args.runs, args.trials, step, factor, residuals=residuals)))
                       for i in range(args.series)]
            exact = sum([(m.index, m.kind) for m in g.marks] == [(step, "regression")] for g in stepped)
            result[f"x{factor:g}"] = {"exact": round(exact / args.series, 4),
                                      "any_mark": round(sum(bool(g.marks) for g in stepped) / args.series, 4)}
        out["grouped_by"][name] = result
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
