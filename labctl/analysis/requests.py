"""``labctl compare``'s request: its arguments checked before any work, the runs read, and the comparison
made: a run against a baseline run (:func:`labctl.analysis.compare.compare_runs`), or one knob's values
inside one run (:func:`labctl.analysis.within.compare_within`); the JUnit report written when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labctl.analysis.compare import (
    Comparison, check_measured, check_paired, check_threshold, compare_runs, parse_threshold,
)
from labctl.analysis.junit import write_junit
from labctl.analysis.within import check_options, compare_within
from labctl.results.access import resolve_run, run_and_trials, run_pair
from labctl.results.metrics import DEFAULT_THRESHOLD_PCT, default_metric
from labctl.results.record import judged_trials


def compare_request(db: str | Path, baseline: int | str | None, candidate: Any, metric: str | None,
                    threshold_pct: float | str | None, junit: str | Path | None, baseline_db: str | Path | None,
                    run: int | str | None, by: str | None) -> Comparison:
    """What :func:`labctl.api.compare` does (its docstring says the arguments; it checks ``junit``'s
    directory before calling this)."""
    threshold_pct = parse_threshold(threshold_pct)
    threshold_pct = DEFAULT_THRESHOLD_PCT if threshold_pct is None else threshold_pct
    check_threshold(threshold_pct)
    candidates = check_options(run, by, baseline, candidate, baseline_db)
    if by is not None:
        facts, records = run_and_trials(db, resolve_run(db, run, "--run"), "--run")
        result = compare_within(records, by, baseline, candidates, metric, threshold_pct, facts)
    else:
        (base_run, base_records), (cand_run, cand_records), where = run_pair(
            db, baseline, (candidates or [None])[0], baseline_db)
        metric = metric or default_metric(judged_trials(cand_records))
        check_measured(metric, [base_records, cand_records], where)
        result = check_paired(compare_runs(base_records, cand_records, metric, threshold_pct, base_run, cand_run),
                              base_records, cand_records)
    if junit is not None:
        write_junit(result, junit)
    return result
