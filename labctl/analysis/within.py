"""One knob's values compared inside one run: the per-patch verdict (``labctl compare --run N --by KNOB
--baseline VALUE [--candidate VALUE ...]``).

A sweep that crosses ``build: [base, patched]`` (or any knob: ``workload.packet_size``,
``guest.nics.*.rx_queue_size``) with the other knobs, builds alternating within every repeat, holds the
A/B a patch's cover letter reports: CSIT's per-patch job, parent build against patched build, on one
host in one run. Here the run's trials are grouped by everything *but* that knob (the other knobs'
configuration, and the host, accelerator and lab when a merged run has several); in every group the
baseline value's trials are the baseline side and each candidate value's trials a candidate side.

The verdicts are run-against-run compare's (:mod:`labctl.analysis.compare`: the same bootstrap
interval, the same four verdicts and causes, the threshold, the family-wise confidence over every pair
judged, candidates and configurations together, the exit code, JSON and JUnit): only the pairing differs.
Environment differences are listed per candidate against the baseline's trials (a build's binaries and
versions, when its trials record them).

Values are matched as the records hold them: ``--baseline 256`` is the integer 256 of
``workload.packet_size``, ``--baseline base`` the string of ``build``; a value the run does not have, or a
knob it did not vary, is a one-line UserError naming the allowed ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labctl.analysis.compare import (
    ConfigVerdict, Comparison, check_measured, family_notes, judge_pending, lower_is_better, metric_name, pair_item,
)
from labctl.analysis.environments import env_changes, shared_env
from labctl.analysis.grouping import ENV_DIMENSIONS, knob_value, sort_key, varying_knobs
from labctl.errors import UserError
from labctl.profile.knobs import short_label
from labctl.results.metrics import DEFAULT_THRESHOLD_PCT, default_metric
from labctl.results.record import TrialRecord, config_key, judged_trials

__all__ = ["WithinComparison", "compared_knobs", "match_value", "compare_within", "check_options"]


@dataclass
class WithinComparison(Comparison):
    """A :class:`Comparison` of one knob's values inside one run: ``baseline`` and ``candidate`` are the
    same run's facts; ``by`` the knob, ``baseline_value`` and ``candidate_values`` its values compared.
    Every item's ``candidate_value`` says which candidate it judges."""

    by: str = ""
    baseline_value: Any = None
    candidate_values: list[Any] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "by": self.by, "baseline_value": self.baseline_value,
                "candidate_values": self.candidate_values}


def check_options(run: Any, by: str | None, baseline: Any, candidate: Any, baseline_db: Any) -> list[Any]:
    """``labctl compare``'s options checked together, before any store is read: ``--run`` and
    ``--by`` go together (a knob's values inside one run), ``--baseline-db`` and several ``--candidate``
    only without them (runs against a run). The candidates as a list (``candidate``: None, one, or many)."""
    candidates = [] if candidate is None else list(candidate) if isinstance(candidate, (list, tuple)) else [candidate]
    if by is None:
        if run is not None:
            raise UserError(f"--run {run}: compares inside one run only with --by KNOB (allowed: --run RUN --by "
                            "KNOB --baseline VALUE; or --baseline RUN --candidate RUN without --run)")
        if len(candidates) > 1:
            raise UserError(f"--candidate {' '.join(map(str, candidates))}: one run against the baseline run "
                            "(allowed: one --candidate RUN; several only with --by KNOB, as values of KNOB)")
        return candidates
    if baseline_db is not None:
        raise UserError(f"--baseline-db {baseline_db}: not with --by, which compares a knob's values inside "
                        "one run (allowed: --db STORE --run RUN)")
    if baseline is None or str(baseline).strip() == "":
        raise UserError(f"--baseline: required with --by {by} (allowed: a value of {by} in the run)")
    return candidates


def _shown(value: Any) -> str:
    return str(value)


def compared_knobs(records: Sequence[TrialRecord]) -> list[str]:
    """The knobs ``--by`` may name: those the run's successful trials vary (NIC knobs collapsed as
    :func:`~labctl.analysis.grouping.varying_knobs` does; host, accelerator and lab are not knobs)."""
    ok = [r for r in records if r.status == "ok"]
    return [k for k in varying_knobs(ok or records) if not k.startswith("env.")]


def _same(text: str, value: Any) -> bool:
    """Whether a face's text names the recorded ``value``: ``256`` is 256 (and 256.0), ``true`` is True,
    ``base`` is "base"."""
    if text == str(value):
        return True
    if isinstance(value, bool) or value is None:
        return text.lower() == json.dumps(value)
    if isinstance(value, (int, float)):
        try:
            number = float(text)
        except ValueError:
            return False
        return math.isfinite(number) and number == value
    return False


def match_value(text: Any, values: Sequence[Any], option: str, knob: str, run: Any) -> Any:
    """The recorded value of ``values`` that ``text`` names, else UserError naming ``option`` and the
    allowed values."""
    for value in values:
        if value == text and type(value) is type(text) or _same(str(text).strip(), value):
            return value
    raise UserError(f"{option} {text}: not a value of {knob} in run {run} (allowed: "
                    f"{', '.join(map(_shown, values))})")


def _values(records: Sequence[TrialRecord], knob: str) -> list[Any]:
    """The knob's values in the run, in the order its trials first ran them (the sweep's order)."""
    ordered = sorted(records, key=lambda r: (r.started_at or 0.0, r.id or 0))
    return list({repr(v): v for v in (knob_value(r, knob) for r in ordered)}.values())


def _rest_key(record: TrialRecord, knob: str) -> str:
    """The trial's configuration without ``knob`` (every NIC's entry of a ``*`` knob), with its host,
    accelerator and lab: the trials a knob's values are compared within."""
    if ".*." in knob:
        head, tail = knob.split(".*.", 1)
        drop = {k for k in record.config if k.startswith(head + ".") and k.endswith("." + tail)
                and k[len(head) + 1:-len(tail) - 1].isdigit()}
    else:
        drop = {knob}
    rest = {k: v for k, v in record.config.items() if k not in drop}
    rest.update({f"env.{d}": getattr(record.env, d) for d in ENV_DIMENSIONS})
    return config_key(rest)


def check_by(records: Sequence[TrialRecord], by: str | None, run: Any) -> list[Any]:
    """The values of ``by`` in the run's trials; UserError unless the run varied it."""
    allowed = compared_knobs(records)
    if not by or by not in allowed:
        shown = ", ".join(allowed) or "none: the run measured one configuration"
        raise UserError(f"--by {by or ''}: not a knob run {run} varied (allowed: {shown})")
    return _values(records, by)


def compare_within(records: Sequence[TrialRecord], by: str, baseline: Any, candidates: Sequence[Any] = (),
                   metric: str | None = None, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                   run: dict[str, Any] | None = None) -> WithinComparison:
    """Inside one run's trials (every status), ``by``'s value ``baseline`` against each of ``candidates``
    (default: every other value the run has), configuration by configuration of the other knobs.
    ``metric``: default the run's own (:func:`default_metric`), aliases accepted. Arguments are checked
    before any statistics; ``run`` (its facts: id, profile_name, host, created_at, db) names it."""
    run = dict(run or {})
    run_id = run.get("id")
    records = judged_trials(records)
    values = check_by(records, by, run_id)
    base = match_value(baseline, values, "--baseline", by, run_id)
    chosen = [match_value(c, values, "--candidate", by, run_id) for c in candidates] or \
        [v for v in values if repr(v) != repr(base)]
    chosen = list({repr(v): v for v in chosen}.values())
    if any(repr(c) == repr(base) for c in chosen):
        others = [v for v in values if repr(v) != repr(base)]
        raise UserError(f"--candidate {base}: the baseline value itself (allowed: {', '.join(map(_shown, others))})")
    b_all = [r for r in records if repr(knob_value(r, by)) == repr(base)]
    c_all = {repr(c): [r for r in records if repr(knob_value(r, by)) == repr(c)] for c in chosen}
    metric = metric or default_metric(records)
    check_measured(metric, [b_all, [r for group in c_all.values() for r in group]], f"run {run_id}")
    metric = metric_name(metric)
    ok = [r for r in records if r.status == "ok"]
    knobs = [k for k in varying_knobs(ok) if k != by]
    hosts = {r.env.host for r in records}
    if len(hosts) == 1 and None not in hosts:
        run["host"] = hosts.pop()
    by_label = by.split(".")[-1]
    items: list[ConfigVerdict] = []
    pending: list = []
    changes = []
    for index, cand in enumerate(chosen):
        c_records = c_all[repr(cand)]
        b_groups = _groups(b_all, by)
        c_groups = _groups(c_records, by)
        for key in [*b_groups, *(k for k in c_groups if k not in b_groups)]:
            example = (b_groups.get(key) or c_groups[key])[0]
            knob_values = {k: knob_value(example, k) for k in knobs}
            label = " ".join(filter(None, [short_label((i for i in knob_values.items() if not i[0].startswith("env.")), " "),
                                           *(f"{k[4:]}={v}" for k, v in knob_values.items() if k.startswith("env.")),
                                           f"{by_label}={cand}"]))
            item = pair_item(key, label, knob_values, b_groups.get(key, []), c_groups.get(key, []), metric,
                             (run_id, run_id), (f"baseline's trials ({by_label}={base})",
                                                f"candidate's trials ({by_label}={cand})"), pending)
            item.candidate_value = cand
            items.append((index, item))
        changes += env_changes(b_all, c_records, f"{by_label} {base} -> {cand}")
    if items and all(item.cause == "unpaired" for _, item in items):
        raise UserError(f"--baseline {base}: no configuration of the other knobs in run {run_id} has trials of both "
                        f"{by_label}={base} and {', '.join(map(_shown, chosen))} (allowed: values of {by} "
                        "crossed with the same other knobs)")
    confidence = judge_pending(pending, metric, threshold_pct)
    items.sort(key=lambda pair: (pair[0], *(sort_key(pair[1].knobs[k]) for k in knobs)))
    verdicts = [item for _, item in items]
    c_flat = [r for group in c_all.values() for r in group]
    notes = family_notes(verdicts, len(pending), confidence, threshold_pct, ok, b_all, c_flat)
    facts = {**run, "id": run_id}
    return WithinComparison(metric, threshold_pct, lower_is_better(metric), confidence, facts, facts, changes,
                            verdicts, notes, env=shared_env([*b_all, *c_flat]), by=by, baseline_value=base, candidate_values=chosen)


def _groups(records: Sequence[TrialRecord], by: str) -> dict[str, list[TrialRecord]]:
    out: dict[str, list[TrialRecord]] = {}
    for record in records:
        out.setdefault(_rest_key(record, by), []).append(record)
    return out
