"""A run as one JSON document: the report (rows, intervals, deltas, notes) and everything a reader of
the run needs beside it: the question, the advice and its refusals, the environment (hosts, CPUs,
accelerator, versions, builds with their hashes, the pins read back), the steadiness probe, every
warning, every trial, for NDR/PDR runs each search's measurements and latency, and for reconf and soak trials
their time series (``live``).

``labctl report --format json`` prints it and ``labctl report --html`` renders it
(:mod:`labctl.analysis.html.page`): the page never computes a figure of its own."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from labctl.analysis.course import course_text, describe
from labctl.analysis.grouping import knob_value, varying_knobs
from labctl.analysis.report import Report, build_report
from labctl.host.steadiness import UNSTEADY_WARNING
from labctl.results.lines import reached
from labctl.results.metrics import lower_is_better
from labctl.results.record import TrialRecord, config_key, judged_trials

#: The environment fields shown, in order (every value the run's trials recorded, distinct).
ENV_FIELDS = ("host", "cpu_model", "cores", "kernel", "accel", "lab", "qemu", "libvirt", "dpdk", "virtio_backend",
              "hugepages", "shared_cores")


def _distinct(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(v for v in values if v is not None and v != {}))


def environment(records: Sequence[TrialRecord]) -> dict[str, Any]:
    """Every distinct value of each environment field, the builds (name -> role -> path, sha256,
    version) and the pins read back (distinct role -> cpuset maps)."""
    env: dict[str, Any] = {name: _distinct([getattr(r.env, name) for r in records]) for name in ENV_FIELDS}
    builds: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.env.binaries:
            builds.setdefault(str(r.config.get("build", "default")), {}).update(
                {role: {k: b.get(k) for k in ("path", "sha256", "version")} for role, b in r.env.binaries.items()})
    env["builds"] = builds
    pins: list[dict[str, Any]] = []
    for r in records:
        if r.env.pins and r.env.pins not in pins:
            pins.append(r.env.pins)
    env["pins"] = pins
    return env


def steadiness(records: Sequence[TrialRecord], info: dict[str, Any]) -> dict[str, Any]:
    """What the run knows of the host's steadiness: the probe stored with the run (``info``), and the
    unsteady-host warnings its trials carry (:meth:`labctl.host.steadiness.Steadiness.trial_warning`)."""
    warned = [w for r in records for w in r.warnings if w.startswith(UNSTEADY_WARNING)]
    return {"probe": info.get("steadiness"), "unsteady_trials": len(warned),
            "trials": len(records), "warnings": _distinct(warned)}


#: Row notes the report's own notes already explain for the whole run.
ROW_MARKS = ("TCG", "shared cores")


def warnings(report: Report, records: Sequence[TrialRecord]) -> list[dict[str, Any]]:
    """Every warning: the report's notes (what ``labctl report`` prints under its table), each row's
    notes (two bands, high variance, few repeats, TCG, shared cores) and every distinct trial warning
    with the number of trials that carry it."""
    out = [{"source": "report", "text": note, "trials": None} for note in report.notes]
    for row in report.rows:
        label = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in row.knobs.items()) or "all trials"
        out += [{"source": f"row {label}", "text": note, "trials": row.n} for note in row.notes
                if note not in ROW_MARKS]  # said once by the report's own note
    counts = Counter(w for r in records for w in r.warnings)
    out += [{"source": "trials", "text": text, "trials": n} for text, n in counts.items()]
    return out


def trials(records: Sequence[TrialRecord], knobs: Sequence[str], metric: str) -> list[dict[str, Any]]:
    """Every trial of the run (NDR/PDR measurements included, by their role): id, status, the varying
    knobs, the metric, loss, accelerator, how a libvirt guest reached it (a boot or a NIC swap, with its
    seconds: :func:`labctl.results.lines.reached`), error and warnings."""
    return [{"id": r.id, "status": r.status, "repeat": r.repeat_index, "role": r.details.get("role"),
             "knobs": {k: knob_value(r, k) for k in knobs}, "value": getattr(r.metrics, metric, None),
             "offered_mpps": r.metrics.offered_mpps, "loss_ratio": r.metrics.loss_ratio, "accel": r.env.accel,
             "reached": reached(r), "error": r.error, "warnings": list(r.warnings)} for r in records]


def searches(records: Sequence[TrialRecord], knobs: Sequence[str]) -> list[dict[str, Any]]:
    """Each NDR/PDR search (a record of role ``ndr``): its bounds, its measurements (offered load
    against loss, by role) and its latency at shares of the PDR. Measurements belong to the search of
    the same configuration and repeat."""
    points: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in records:
        if r.details.get("role") in ("search", "latency", "calibration") and r.metrics.offered_mpps is not None:
            points.setdefault((config_key(r.config), r.repeat_index), []).append(
                {"offered_mpps": r.metrics.offered_mpps, "loss_ratio": r.metrics.loss_ratio,
                 "role": r.details.get("role"), "valid": r.metrics.valid})
    out = []
    for r in records:
        if r.details.get("role") != "ndr":
            continue
        m = r.metrics
        out.append({"trial": r.id, "repeat": r.repeat_index, "knobs": {k: knob_value(r, k) for k in knobs},
                    "ndr_mpps": m.ndr_mpps, "ndr_bounds": [m.ndr_lower_mpps, m.ndr_upper_mpps],
                    "pdr_mpps": m.pdr_mpps, "pdr_bounds": [m.pdr_lower_mpps, m.pdr_upper_mpps],
                    "pdr_loss_ratio": (r.details.get("pdr") or {}).get("loss_ratio", 0.005),
                    "measurements": sorted(points.get((config_key(r.config), r.repeat_index), []),
                                           key=lambda p: p["offered_mpps"]),
                    "latency": list(r.details.get("latency") or [])})
    return out


def live_trials(records: Sequence[TrialRecord]) -> list[dict[str, Any]]:
    """Each reconf and soak trial over time, as the page draws and lists it: what it was (in words:
    :func:`labctl.results.lines.reconf_lines` / ``soak_lines``), and its details' ``reconf`` or ``soak`` (the
    series, the outages or loss events, the host's seconds)."""
    from labctl.results.lines import reconf_lines, soak_lines

    out = []
    for r in records:
        for kind, words in (("reconf", reconf_lines), ("soak", soak_lines)):
            if kind in r.details and r.status == "ok":
                out.append({"kind": kind, "trial": r.id, "lines": words(r, limit=20), **r.details[kind],
                            "metrics": {k: v for k, v in r.metrics.model_dump().items()
                                        if v is not None and not isinstance(v, dict)}})
    return out


def until_course(info: dict[str, Any]) -> dict[str, Any] | None:
    """A ``sweep --until decided`` run's course: why it stopped and one line per comparison (its
    within-block verdict, trials and confidence, or what it would need); None for any other run."""
    course = info.get("until")
    if not course:
        return None
    return {"stop": course.get("stop"), "head": course_text(course),
            "comparisons": [{"verdict": c.get("verdict"), "line": describe(c)} for c in course.get("comparisons", [])]}


def run_document(records: list[TrialRecord], facts: dict[str, Any], by: str | None, metric: str,
                 advise: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run's document. ``records``: every trial of the run (each status, the searches' measurements
    included); ``facts``: the run (:meth:`labctl.results.store.Store.run`); ``advise``: the advice as
    a dict (``labctl advise --json``), or raises a :class:`labctl.errors.UserError` saying why there
    is none (its text is kept as the answer's refusal)."""
    from labctl.errors import UserError

    judged = judged_trials(records)
    info = facts.get("info") or {}
    report = build_report(judged, by, facts.get("id"), metric, run_info=info)
    knobs = varying_knobs([r for r in judged if r.status == "ok"]) or report.knobs
    advice: dict[str, Any] | None = None
    advice_refused = None
    if advise is not None:
        try:
            advice = advise()
        except UserError as exc:
            advice_refused = str(exc)
    ok = [r for r in records if r.status == "ok"]
    return {
        "kind": "run",
        **report.to_dict(),
        "question": {"profile": facts.get("profile_name"), "run": facts.get("id"), "knobs": report.knobs,
                     "by": report.by, "metric": metric, "lower_is_better": lower_is_better(metric),
                     "created_at": facts.get("created_at"), "finished_at": facts.get("finished_at"),
                     "status": facts.get("status"), "trials": len(judged),
                     "failed": sum(r.status != "ok" for r in judged)},
        "advice": advice, "advice_refused": advice_refused,
        "until": until_course(info),
        "environment": environment(ok or records),
        "steadiness": steadiness(judged, info),
        "warnings": warnings(report, judged),
        "searches": searches(records, knobs),
        "live": live_trials(records),
        "trials": trials(records, knobs, metric),
    }


def stored_run_document(db, run: int | None, by: str | None, metric: str | None, host: str | None,
                        advise: Callable[[int], dict[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`run_document` of ``run`` (default: the newest) of the store ``db``: every trial of the run
    (``host``: that host's), ``metric`` defaulting to what the run measured; ``advise(run_id)``."""
    from labctl.results.access import open_store, run_trials
    from labctl.results.metrics import default_metric

    run_id, records, _info = run_trials(db, run, status=None, host=host, measurements=True)
    with open_store(db) as store:
        facts = store.run(run_id)
    metric = metric or default_metric([r for r in judged_trials(records) if r.status == "ok"] or records)
    return run_document(records, facts, by, metric, advise=None if advise is None else lambda: advise(run_id))
