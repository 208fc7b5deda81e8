"""The library face of labctl: everything a face (the CLI, the TUI, the fleet) may call.

Each function checks its arguments first (a :class:`~labctl.errors.UserError` names the field and the
allowed values, before anything is created), does the work, and reports progress through one callback,
``on_event(Event)`` (see :mod:`labctl.events`). Work that creates resources runs in a cancel scope
(:mod:`labctl.signals`): pass ``scope=CancelScope()`` and call ``scope.cancel()`` from another thread to
stop it cleanly (the trial in flight is torn down; a sweep stays resumable); SIGTERM does the same.

Nothing below this module imports :mod:`advisor`; the advice, the pinning plan and the adaptive search
are reached through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable

from labctl import signals
from labctl.errors import ProfileError, Problem, UserError
from labctl.events import Event, OnEvent, notify
from labctl.host.doctor import Doctor, describe_host
from labctl.paths import can_create
from labctl.profile.load import LoadedProfile, load_profile
from labctl.results.access import open_store, resolve_run, run_pair, run_trials
from labctl.results.interchange import import_files as import_runs  # noqa: F401  (the fleet's: files, db)
from labctl.results.interchange import read_jsonl as read_trials_file  # noqa: F401  (the fleet's)
from labctl.results.interchange import write_jsonl as write_trials_file  # noqa: F401  (the fleet's)
from labctl.results.metrics import DEFAULT_PRECISION, DEFAULT_THRESHOLD_PCT, default_metric, resolve
from labctl.results.record import SEARCH_ROLES, Metrics, TrialRecord, judged_trials
from labctl.results.store import Store
from labctl.signals import CancelScope

__all__ = [
    "Event", "OnEvent", "CancelScope", "Validation", "Doctor", "DEFAULT_DB", "SEARCH_ROLES",
    "load", "parse_overrides", "validate", "render", "up", "down", "status", "build_image", "build_guest_image",
    "run", "sweep", "tune", "replay", "runs", "trials", "report", "render_report", "plot",
    "import_trials", "export_trials", "advise", "apply_advice", "plan", "doctor", "check_writable",
    "report_metrics", "check_budget", "ndr", "search_settings", "default_metric", "DEFAULT_PRECISION",
    "DEFAULT_THRESHOLD_PCT", "load_for_hosts", "check_store", "import_runs", "read_trials_file", "write_trials_file",
]

DEFAULT_DB = Path("labctl.db")


# --- profiles -----------------------------------------------------------------------------------------

def parse_overrides(assignments: Iterable[str] | None) -> dict[str, Any]:
    """``["guest.nics.*.queues=2", ...]`` (the CLI's ``--set``) as knob -> value."""
    from labctl.profile.knobs import parse_assignment

    return dict(parse_assignment(text) for text in assignments or [])


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> LoadedProfile:
    """Read, parse and validate one profile (``overrides``: knob -> value applied first)."""
    return load_profile(path, overrides or None)


@dataclass
class Validation:
    path: Path
    loaded: LoadedProfile | None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.loaded is not None


def load_for_hosts(path: str | Path) -> LoadedProfile:
    """A profile that runs on other hosts (``labctl fleet sweep``): every rule, but its CPU pins are left to
    each host to check against its own CPUs."""
    from labctl.profile.load import ANY_CPU

    return load_profile(path, cpus=ANY_CPU)


def validate(paths: Iterable[str | Path]) -> list[Validation]:
    """Validate each profile; the problems of an invalid one, the warnings of a valid one."""
    out = []
    for path in map(Path, paths):
        try:
            loaded = load_profile(path)
        except ProfileError as exc:
            out.append(Validation(path, None, list(exc.problems)))
            continue
        out.append(Validation(path, loaded, list(loaded.warnings)))
    return out


def render(loaded: LoadedProfile, uri: str | None = None, guest: str = "a") -> str:
    """The libvirt domain XML of a profile (``guest`` ``b``: guest B of a vm2vm profile)."""
    from labctl.lab.libvirt.lifecycle import render_profile

    return render_profile(loaded.profile, uri, guest)


# --- libvirt labs -------------------------------------------------------------------------------------

def up(loaded: LoadedProfile, uri: str | None = None, mode: str = "verify", timeout_s: float = 300.0,
       on_event: OnEvent | None = None, scope: CancelScope | None = None):
    """Define and start the profile's guest; returns requested vs negotiated per NIC and the pins."""
    from labctl.lab.libvirt.lifecycle import up as lab_up

    if not 1 <= timeout_s <= 3600:
        raise UserError(f"--timeout {timeout_s:g}: out of range (allowed: 1..3600 seconds)")
    with signals.stoppable(scope):
        return lab_up(loaded, uri, mode, timeout_s, on_event)


@dataclass
class DownResult:
    name: str
    removed: list[str]


def down(target: str, uri: str | None = None, scope: CancelScope | None = None) -> DownResult:
    """Remove everything labctl created for a lab (a profile file or a lab name); idempotent. SIGTERM
    stops it between two resources (what is left stays in the ledger for the next ``down``)."""
    from labctl.lab.libvirt.lifecycle import down as lab_down, lab_name_of

    name = lab_name_of(target)
    if uri is None and target.endswith((".yaml", ".yml")):
        profile = load_profile(target).profile
        uri = profile.libvirt_uri if profile.backend == "libvirt" else None
    with signals.stoppable(scope):
        return DownResult(name, lab_down(name, uri))


def status(uri: str | None = None) -> list[dict[str, Any]]:
    """The labs labctl has up, with requested vs applied pins and negotiated NICs."""
    from labctl.lab.libvirt.lifecycle import status as lab_status

    return lab_status(uri)


def build_image(force: bool = False, on_event: OnEvent | None = None):
    """Build (or find cached) the workload appliance the libvirt lab boots."""
    from labctl.lab.libvirt.appliance import cache as appliance

    return appliance.build(force=force, progress=lambda text: notify(on_event, "note", message=text))


def build_guest_image(out: str | Path | None, force: bool = False, on_event: OnEvent | None = None):
    """Build (or find cached) the Debian 12 guest disk image (``labctl image guest``) and copy it to ``out``.
    An existing ``out`` that is not an image labctl made is refused (``force``: replaced, and the image rebuilt).
    Returns a :class:`~labctl.lab.libvirt.guestimage.GuestImageInfo` (``out`` set when copied)."""
    from labctl.lab.libvirt.guestimage import cache as guestimage

    target = Path(out).expanduser().absolute() if out is not None else None
    if target is not None:
        guestimage.check_out(target, force)
    progress = lambda text: notify(on_event, "note", message=text)  # noqa: E731
    info = guestimage.build_guest_image(force=force, on_progress=progress)
    return guestimage.copy_image(info, target, progress) if target is not None else info


# --- measuring ----------------------------------------------------------------------------------------

def run(loaded: LoadedProfile, on_event: OnEvent | None = None, scope: CancelScope | None = None,
        wait: bool = True) -> TrialRecord:
    """One trial of an embedded profile: warm-up, measurement window, teardown. ``wait``: a trial whose
    CPUs another trial measures on waits for them (a ``note`` says for whom); False fails at once
    (:class:`~labctl.errors.CpusBusyError`). The same for sweep, tune and ndr."""
    from labctl.measure.trial import run_trial

    with signals.stoppable(scope):
        return run_trial(loaded, on_event=on_event, wait=wait)


def sweep(loaded: LoadedProfile, db: str | Path = DEFAULT_DB, repeat: int | None = None, resume: bool = False,
          steadiness_s: float | None = None, on_event: OnEvent | None = None, scope: CancelScope | None = None,
          metric: str = "mpps", wait: bool = True, order: str | None = None, seed: int | None = None,
          until: str | None = None, budget: str | None = None, threshold_pct: float | None = None,
          verdict_metric: str | None = None, futility_pct: float | None = None):
    """Cross the profile's sweep matrix, repeats interleaved; every trial is stored as it finishes.
    ``until`` ``decided`` with ``budget`` (``40`` trials or ``12m``): blocks, round by round, until every
    comparison is decided or the budget is spent (:mod:`labctl.measure.until`; ``threshold_pct`` the band,
    ``verdict_metric`` what is judged, ``futility_pct`` the chance of a verdict below which a comparison is
    given up).
    ``metric``: ``mpps`` (a trial at the profile's rate) or ``ndr``/``pdr`` (an NDR/PDR search per
    configuration and repeat; its measurements are stored too). ``order``/``seed``: the order within a
    repeat (``interleaved``, or ``random`` with a seed recorded in the run; default: the profile's)."""
    from labctl.measure.sweep import run_sweep

    metric = measure_metric(metric)
    settings = _metric_search(loaded, metric)
    with signals.stoppable(scope):
        return run_sweep(loaded, db, repeat, resume, steadiness_s=steadiness_s, on_event=on_event, search=settings,
                         wait=wait, order=order, seed=seed, until=until, budget=budget, threshold_pct=threshold_pct,
                         verdict_metric=verdict_metric, futility_pct=futility_pct)


MEASURE_METRICS = ("mpps", "ndr", "pdr")


def measure_metric(metric: str) -> str:
    """What a sweep or tune measures, by its short name: ``ndr_mpps`` / ``pdr_mpps`` (the registry's names
    of what ``ndr`` / ``pdr`` name) are taken as ``ndr`` / ``pdr``."""
    from labctl.results.metrics import ALIASES

    return {name: alias for alias, name in ALIASES.items()}.get(metric, metric)


def _metric_search(loaded: LoadedProfile, metric: str):
    """The NDR/PDR search settings a sweep or tune by ``ndr``/``pdr`` runs (None for ``mpps``)."""
    from labctl.measure.ndr import check_searchable

    if metric not in MEASURE_METRICS:
        raise UserError(f"--metric {metric}: not a measured metric (allowed: {', '.join(MEASURE_METRICS)})")
    if metric == "mpps":
        return None
    settings = search_settings(loaded)
    check_searchable(loaded.profile, settings)
    return settings


def check_budget(budget: int) -> None:
    if budget < 1:
        raise UserError(f"--budget {budget}: out of range (allowed: 1 or more trials)")


def tune(loaded: LoadedProfile, budget: int, seed: int = 0, db: str | Path = DEFAULT_DB,
         on_event: OnEvent | None = None, scope: CancelScope | None = None, metric: str = "mpps",
         wait: bool = True):
    """Adaptive search (TPE, then a race) over the profile's sweep matrix with live trials, each stored;
    ``metric`` ``ndr``/``pdr``: each evaluation is an NDR/PDR search, the search maximises that rate."""
    from advisor.search import space_from_profile, tune as search
    from labctl.measure.labs import check_measurable
    from labctl.measure.tune import run_tune

    check_budget(budget)
    if loaded.profile.workload.kind != "forward":
        # The search maximises a forwarding rate (mpps, NDR/PDR); a tcp trial has none, so a tcp tune would
        # optimise a missing number. Refuse until the objective can be gbps/tps.
        raise UserError(f"workload.kind {loaded.profile.workload.kind}: tune searches forwarding rates only "
                        f"(allowed: forward; use sweep and advise for tcp_stream/tcp_rr)")
    metric = measure_metric(metric)
    settings = _metric_search(loaded, metric)
    check_measurable(loaded.profile)
    space = space_from_profile(loaded.profile)
    with signals.stoppable(scope):
        return run_tune(loaded, db, lambda evaluate, step: search(space, evaluate, budget, seed, on_step=step),
                        budget, settings, metric, on_event, wait)


def ndr(loaded: LoadedProfile, db: str | Path = DEFAULT_DB, search: str = "mlrsearch", precision: float = DEFAULT_PRECISION,
        final_trial_s: float | None = None, initial_trial_s: float = 1.0, duration_sum_s: float | None = None,
        on_event: OnEvent | None = None, scope: CancelScope | None = None, wait: bool = True):
    """NDR (no loss) and PDR (0.5% loss) of a profile's lab with MLRsearch (or ``search="binary"``), then
    latency at 10/50/90% of PDR; every trial of the search is stored in a new run. Returns the
    :class:`~labctl.measure.ndr.NdrResult` (``run_id`` set)."""
    from labctl.measure.ndr import run_ndr

    settings = search_settings(loaded, search, precision, final_trial_s, initial_trial_s, duration_sum_s)
    with signals.stoppable(scope):
        return run_ndr(loaded, settings, db, on_event, wait)


def search_settings(loaded: LoadedProfile, search: str = "mlrsearch", precision: float = DEFAULT_PRECISION,
                    final_trial_s: float | None = None, initial_trial_s: float = 1.0,
                    duration_sum_s: float | None = None):
    """An NDR/PDR search's settings; the final trial lasts the profile's ``workload.duration_s`` unless given."""
    from labctl.measure.ndr import SearchSettings

    final = final_trial_s if final_trial_s is not None else loaded.profile.workload.duration_s
    settings = SearchSettings(search=search, precision=precision, initial_trial_s=min(initial_trial_s, final),
                              final_trial_s=final, duration_sum_s=duration_sum_s if duration_sum_s is not None
                              else 2 * final)
    settings.check()
    return settings


def replay(path: str | Path, budget: int, seed: int = 0):
    """The same adaptive search against recorded trials (JSONL), for judging it offline."""
    from advisor.search import replay as replay_search

    check_budget(budget)
    return replay_search(Path(path), budget, seed)


# --- results ------------------------------------------------------------------------------------------

def check_writable(out: Path, option: str = "--out") -> None:
    """``out`` must name a file in an existing, writable directory (checked before any work)."""
    if not can_create(out):
        raise UserError(f"{option} {out}: cannot write there (allowed: a file in an existing writable directory)")


def runs(db: str | Path) -> list[dict[str, Any]]:
    """Every run of the store, oldest first, with its trial counts."""
    with open_store(db) as store:
        return store.runs()


def trials(db: str | Path, run: int | None = None, status: str | None = "ok",
           host: str | None = None, measurements: bool = False) -> tuple[int, list[TrialRecord]]:
    """(run id, its trials of ``status``; None: every status) for ``run``, or the newest run; ``host``:
    only the trials of that host (a fleet's merged store holds many). The single measurements an
    NDR/PDR search made are left out unless ``measurements`` (their search's record stands for them)."""
    run_id, records, _info = run_trials(db, run, status, host, measurements)
    return run_id, records


def report_metrics() -> list[str]:
    """The scalar metrics a report or plot can summarise."""
    return [k for k, f in Metrics.model_fields.items() if f.annotation in (float | None, int | None)]


def _check_metric(metric: str) -> str:
    """The scalar metric ``metric`` names (an alias resolved: ``ndr`` -> ``ndr_mpps``); UserError naming
    the allowed ones otherwise."""
    return resolve(metric, report_metrics(), what="a scalar metric")


def report(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None, metric: str | None = None,
           host: str | None = None):
    """A run's report: per configuration the median, its 95% CI, n, loss, A/B deltas and notes (trials of
    different hosts, accelerators or labs are never pooled; ``host`` keeps one host's). ``metric``
    defaults to the trials' own rate (:func:`default_metric`); NDR, PDR and p99 latency are shown beside
    the metric wherever they were measured."""
    from labctl.analysis.report import build_report

    if metric is not None:
        metric = _check_metric(metric)
    run_id, records, info = run_trials(db, run, host=host)
    metric = metric or default_metric(records)
    return build_report(records, by, run_id, metric, run_info=info)


def pivot(db: str | Path = DEFAULT_DB, run: int | None = None, rows: str = "", by: str = "",
          metrics: list[str] | None = None, host: str | None = None):
    """A run as the posts' tables: ``rows`` knob values as rows, a column group per ``by`` value, per metric
    the median with its interval and the % change against the first ``by`` value (see
    :mod:`labctl.analysis.pivot`; default metrics: bandwidth or transactions and service demand)."""
    from labctl.analysis.pivot import build_pivot

    metrics = [_check_metric(metric) for metric in metrics or []] or None
    run_id, records = trials(db, run, host=host)
    return build_pivot(records, rows, by, metrics, run_id)


def render_pivot(result, fmt: str = "table") -> str:
    from labctl.analysis.pivot import render_pivot as render_as
    from labctl.analysis.renderers import check_format

    check_format(fmt)
    return render_as(result, fmt)


def render_report(result, fmt: str = "table", terminal_plot: bool = False) -> str:
    """A report as ``table``, ``md``, ``csv`` or ``json``; with ``terminal_plot`` a bar chart under a table."""
    from labctl.analysis.renderers import render as render_as, render_terminal_plot

    text = render_as(result, fmt)
    if fmt == "table" and terminal_plot and len(result.rows) > 1:
        text += "\n" + render_terminal_plot(result)
    return text


#: What ``labctl plot --by`` takes for "no grouping" (besides leaving it out).
NO_GROUPING = ("", "none")


def plot(by: str | None, out: str | Path, db: str | Path = DEFAULT_DB, run: int | None = None,
         metric: str | None = None, host: str | None = None) -> Path:
    """A PNG of medians with 95% intervals against one knob, one series per combination of the others.
    ``by`` None, empty or ``none``: no grouping, a point per configuration (a run with one varying knob
    is still plotted against it: that is the same plot with the knob's name on the axis)."""
    from labctl.analysis.plot import plot_report
    from labctl.analysis.report import build_report

    out = Path(out)
    if out.suffix.lower() != ".png":
        raise UserError(f"--out {out}: the plot is written as PNG (allowed: a path ending in .png)")
    check_writable(out)
    if metric is not None:
        metric = _check_metric(metric)
    if by is not None and by.strip().lower() in NO_GROUPING:
        by = None
    run_id, records = trials(db, run, host=host)
    return plot_report(build_report(records, by, run_id, metric or default_metric(records)), out)


def import_trials(file: str | Path, db: str | Path = DEFAULT_DB, name: str | None = None) -> tuple[int, int]:
    """Load trials from JSON lines into the store as one run, all or nothing: (run id, count)."""
    return import_runs([(file, name)], db)[0]


def check_store(db: str | Path, option: str = "--db") -> None:
    """``db`` is a result store (``NotAStoreError``, exit 2, when it is another file), or a file that can
    be created: checked before any work."""
    if Path(db).exists():
        Store(db).close()
    else:
        check_writable(Path(db), option)


EXPORT_FORMATS = ("jsonl", "csv")


def export_trials(db: str | Path, out: str | Path | IO[str], fmt: str = "jsonl", run: int | str | None = None) -> int:
    """Write trials as JSON lines (the import format) or CSV; returns how many. ``run``: an id or a name
    (:func:`resolve_run`); None: every run."""
    from labctl.results.interchange import export_csv, export_jsonl

    if fmt not in EXPORT_FORMATS:
        raise UserError(f"--format {fmt}: not an export format (allowed: {', '.join(EXPORT_FORMATS)})")
    if isinstance(out, (str, Path)):
        check_writable(Path(out))
    run = resolve_run(db, run)
    writer = export_jsonl if fmt == "jsonl" else export_csv
    with open_store(db) as store:
        if run is not None:
            store.run(run)
        return writer(store, out, run)


# --- advice -------------------------------------------------------------------------------------------

def advise(db: str | Path = DEFAULT_DB, run: int | None = None, max_loss: float | None = None,
           host: str | None = None, metric: str | None = None):
    """Recommendations per knob from a run's trials, with evidence; refusals where the data cannot tell
    (comparisons stay within one host, accelerator and lab; ``host`` keeps one host's trials). ``metric``:
    the rate ranked (``mpps``; ``ndr_mpps``/``pdr_mpps`` for a run of NDR/PDR searches, the default there;
    ``bandwidth_gbps``/``transactions_per_s`` for a tcp_stream/tcp_rr run, the default there, which takes
    no ``max_loss``: no loss limit applies to TCP)."""
    from advisor.advice import DEFAULT_MAX_LOSS
    from advisor.recommend import TCP_METRICS, advise as make_advice, advised_metrics
    from labctl.results.metrics import ALIASES

    run_id, records = trials(db, run, status=None, host=host)
    allowed = advised_metrics(records)
    given, metric = metric, ALIASES.get(metric, metric) if metric else default_metric(records)
    if metric not in allowed:
        kind = "tcp" if allowed[0] in TCP_METRICS else "forwarding"
        raise UserError(f"--metric {given or metric}: not a rate the advisor ranks for run {run_id}'s {kind} "
                        f"trials (allowed: {', '.join(allowed)})")
    if metric in TCP_METRICS and max_loss is not None:
        raise UserError(f"--max-loss {max_loss:g}: no loss limit applies to run {run_id}'s tcp trials (TCP "
                        "retransmits what is lost; allowed: --max-loss only for forwarding runs)")
    advice = make_advice(records, max_loss=DEFAULT_MAX_LOSS if max_loss is None else max_loss, metric=metric)
    return _until_advice(db, run_id, records, advice)


def _until_advice(db: str | Path, run_id: int, records: list, advice):
    """A ``sweep --until decided`` run: its own verdicts decide the knobs they cover
    (:func:`advisor.verdicts.apply_until`)."""
    from advisor.verdicts import apply_until
    from labctl.analysis.grouping import knob_value
    from labctl.results.access import open_store

    with open_store(db) as store:
        course = store.run(run_id)["info"].get("until")
    if not course:
        return advice
    ids: dict[str, dict[str, list[int]]] = {}
    for state in course.get("comparisons", []):
        cells = ids.setdefault(state["knob"], {})
        for r in records:
            if isinstance(r.details.get("block"), int) and r.id is not None:
                cells.setdefault(repr(knob_value(r, state["knob"])), []).append(r.id)
    return apply_until(advice, course, ids, run_id)


def apply_advice(profile: str | Path, out: str | Path, db: str | Path = DEFAULT_DB, run: int | None = None,
                 max_loss: float | None = None) -> list[str]:
    """Write ``out``: the profile with the advice applied (validated by reading it back); returns notes."""
    from advisor.apply import write_tuned

    check_writable(Path(out))
    return write_tuned(profile, advise(db, run, max_loss), out)


def plan(profile: str | Path):
    """A pinning plan and first settings from this host's topology, before any measurement."""
    from advisor.pinning import pinning_plan
    from labctl.host.facts import gather

    return pinning_plan(gather(), load_profile(profile).profile)


from labctl.domain_edit.face import (apply_domain, apply_xml, check_emit_form, emit_advice,  # noqa: E402,F401  (labctl apply)
                                     undo_domain, verify_domain)
__all__ += ["apply_xml", "apply_domain", "verify_domain", "undo_domain", "emit_advice", "check_emit_form"]

# --- host ---------------------------------------------------------------------------------------------

def doctor(steadiness_s: float | None = None, on_event: OnEvent | None = None,
           scope: CancelScope | None = None) -> Doctor:
    """What this host can do (CPUs, NUMA, hugepages, KVM, versions, lab backends), and optionally how
    steady its own speed is (``steadiness_s`` seconds of probing)."""
    from labctl.host.facts import gather
    from labctl.host.steadiness import check_arguments, probe

    if steadiness_s is not None:
        check_arguments(steadiness_s)  # bad input fails before any work
    result = Doctor(gather())
    if steadiness_s is not None:
        notify(on_event, "note", message=f"steadiness: probing the host for {steadiness_s:g} s")
        with signals.stoppable(scope):
            result.steadiness = probe(steadiness_s)
        notify(on_event, "steadiness", data=result.steadiness, message=result.steadiness.describe())
    return result


# --- regressions: a run against a baseline, and a metric's trend over runs ---------------------------

__all__ += ["check_threshold", "check_view_format", "compare", "render_comparison", "parse_selection", "trend", "render_trend"]


def check_threshold(threshold_pct: float) -> None:
    """A regression threshold in per cent of the baseline median: 0 <= PCT < 100."""
    from labctl.analysis.compare import check_threshold as check

    check(threshold_pct)


def compare(db: str | Path = DEFAULT_DB, baseline: int | str | None = None, candidate: Any = None,
            metric: str | None = None, threshold_pct: float | str | None = None, junit: str | Path | None = None,
            baseline_db: str | Path | None = None, run: int | str | None = None, by: str | None = None):
    """A candidate run against a baseline run, per configuration: the change of ``metric`` with its interval
    and a verdict, the environment changes, ``exit_code`` 1 on a regression (:mod:`labctl.analysis.compare`).
    ``candidate``: a run of ``db`` (default: the newest); ``baseline``: a run of ``baseline_db`` (default
    ``db``, then required), each an id or a name (:func:`resolve_run`). With ``by`` (a knob), one ``run``
    (default: the newest) is compared inside: ``by``'s value ``baseline`` against each ``candidate`` value
    (one, a list, or None: every other), per configuration of the other knobs (:mod:`labctl.analysis.within`).
    ``metric``: default the candidate's own rate; ``threshold_pct``: :data:`DEFAULT_THRESHOLD_PCT`;
    ``junit``: also a JUnit XML report. Every argument is checked before any work; two runs with no
    configuration in common are refused (:func:`labctl.analysis.requests.compare_request`)."""
    from labctl.analysis.requests import compare_request

    if junit is not None:
        check_writable(Path(junit), "--junit")
    return compare_request(db, baseline, candidate, metric, threshold_pct, junit, baseline_db, run, by)


def check_view_format(fmt: str, what: str = "a comparison") -> None:
    """Comparisons are shown as ``table``, ``json`` or ``post``; trends as ``table`` or ``json``."""
    from labctl.analysis.post import check_format
    from labctl.analysis.renderers import check_view_format as check

    check_format(fmt) if what == "a comparison" else check(fmt, what)


def render_comparison(result, fmt: str = "table") -> str:
    """A comparison as text (``table``), the rows as engineers post them (``post``) or ``json``."""
    from labctl.analysis.comparison_text import render_comparison as text
    from labctl.analysis.post import render_post
    from labctl.analysis.renderers import text_or_json

    return render_post(result) if fmt == "post" else text_or_json(result, fmt, "a comparison", text)


def parse_selection(assignments: Iterable[str] | None) -> dict[str, Any]:
    """``["workload.burst=32", ...]`` (``--config``) as knob -> value."""
    from labctl.profile.knobs import parse_selection as parse

    return parse(assignments, "--config")


def trend(db: str | Path = DEFAULT_DB, profile: str = "", metric: str | None = None,
          configs: Iterable[str] | None = None, host: str | None = None):
    """``metric`` (default: ``mpps``, or a tcp profile's own rate) across every run of ``profile`` in the
    store, one row per run in the order they were measured, per configuration (``configs``: ``KNOB=VALUE``
    it must have) and host/accelerator/lab: the median, its 95% CI, n, the change against the first run with its verdict, and the environment
    changes against the previous row (:mod:`labctl.analysis.trend`). ``host`` keeps one host's trials."""
    from labctl.analysis.trend import build_trend

    from labctl.results.access import only_host

    selection = parse_selection(configs)
    with open_store(db) as store:
        records = store.trials(None, status=None)
        created = {r["id"]: r["created_at"] for r in store.runs()}
    return build_trend(only_host(records, host, str(db)), profile, metric, selection, created)


def render_trend(result, fmt: str = "table") -> str:
    """A trend as text (``table``) or ``json``."""
    from labctl.analysis.renderers import text_or_json
    from labctl.analysis.trend import render_trend as text

    return text_or_json(result, fmt, "a trend", text)

# --- for faces that draw: the TUI's needs -------------------------------------------------------------
# Small read-only helpers the Textual face (labctl/tui/) calls instead of reaching below this module.

from labctl.errors import Interrupted, LabError  # noqa: E402  (re-exported: faces catch these)

__all__ += ["LabError", "Interrupted", "describe_host", "describe_nics", "knob_label", "reports",
            "compare_trials"]


def describe_nics(nics: list[dict[str, Any]]) -> list[str]:
    """Requested vs negotiated per NIC (the ``nics`` of :func:`up` or of a :func:`status` entry), one
    line per NIC, each followed by the reasons for what the guest got differently."""
    from labctl.lab.libvirt.negotiation import describe_nics as describe

    return describe(nics)


def knob_label(config: dict[str, Any] | Iterable[tuple[str, Any]], sep: str = ", ") -> str:
    """Knob settings by the last part of their path: ``rx_queue_size=1024, burst=64``."""
    from labctl.profile.knobs import short_label

    return short_label(config.items() if isinstance(config, dict) else config, sep)


def reports(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
            host: str | None = None) -> dict[str, Any]:
    """One report (as :func:`report`) per scalar metric the run's successful trials carry, the one the run
    measured (:func:`default_metric`) first: a face shows every measured metric (rates, loss, NDR/PDR, latency, ...) per configuration.
    The trials are read once."""
    from labctl.analysis.report import build_reports

    run_id, records, info = run_trials(db, run, host=host)
    return build_reports(records, by, run_id, report_metrics(), run_info=info)


def compare_trials(db: str | Path, baseline: Iterable[int], candidate: Iterable[int], metric: str = "mpps",
                   run: int | None = None):
    """Two selections of one run's trials (ids) compared on ``metric``: the change of the candidate's
    median against the baseline's with its bootstrap 95% interval and a verdict
    (:func:`labctl.analysis.statistics.compare`; for loss, drops, latency and cycles lower is better)."""
    from labctl.analysis.compare import compare_selections

    metric = _check_metric(metric)
    run_id, records = trials(db, run)
    return compare_selections(records, baseline, candidate, metric, run_id)


# --- the page people share: a run or a comparison as one self-contained HTML file ---------------------

__all__ += ["report_document", "check_html_out", "report_html", "compare_html"]


def report_document(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
                    metric: str | None = None, host: str | None = None) -> dict[str, Any]:
    """A run as one JSON document, what ``labctl report --format json`` prints and ``--html`` renders
    (:func:`labctl.analysis.html.document.stored_run_document`; the advice is :func:`advise`'s)."""
    from labctl.analysis.html.document import stored_run_document

    return stored_run_document(db, run, by, metric and _check_metric(metric), host,
                               advise=lambda run_id: advise(db, run_id, host=host).to_dict())


def check_html_out(out: str | Path, option: str = "--html") -> Path:
    """``out``: a file ending in .html or .htm in an existing writable directory (before any work)."""
    if Path(out).suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{option} {out}: the page is written as HTML (allowed: a path ending in .html or .htm)")
    check_writable(Path(out), option)
    return Path(out)


def report_html(out: str | Path, db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
                metric: str | None = None, host: str | None = None) -> Path:
    """Write a run's page to ``out``: :func:`report_document` rendered (:mod:`labctl.analysis.html.page`)."""
    from labctl.analysis.html.page import render_run, write

    out = check_html_out(out)
    return write(render_run(report_document(db, run, by, metric, host)), out)


def compare_html(result, out: str | Path) -> Path:
    """Write a comparison's page (:func:`compare`'s result, rendered from its JSON) to ``out``."""
    from labctl.analysis.html.page import render_comparison, write

    return write(render_comparison(result.to_dict()), check_html_out(out))


def run_verdicts(db: str | Path = DEFAULT_DB, run: int | str | None = None, knob: str | None = None) -> list[str]:
    """The verdicts a ``sweep --until decided`` run reached, one line per comparison (of ``knob`` only, when
    given): verdict, change and interval, the trials it took and the confidence actually achieved (the
    error spent at the deciding look), or what an open one would need. Empty for any other run."""
    from labctl.measure.until import describe, stop_text
    from labctl.results.access import resolve_run, run_trials

    run_id = resolve_run(db, run) if isinstance(run, str) else run
    _id, _records, info = run_trials(db, run_id)
    course = info.get("until") or {}
    states = [s for s in course.get("comparisons", []) if knob is None or s["knob"] == knob]
    if not states:
        return []
    stop = stop_text(course)
    head = (f"until decided (run {_id}): {stop}; {course.get('metric')}, threshold {course.get('threshold_pct'):g}%, "
            f"error {course.get('alpha'):g} spent over {course.get('looks')} looks ({course.get('spending')}-type). "
            "The run was measured in blocks: its within-block verdict below is the one to read (the table above "
            "pools unpaired trials)")
    return [head, *(f"  {describe(s)}" for s in states)]


# --- when did it change, and which commit did it: trend marks and bisect over builds --------------------

__all__ += ["trend_of", "trend_junit", "trend_html", "trend_marks", "check_bisect", "bisect", "render_bisect", "bisect_document",
            "bisect_html"]


def trend_of(db: str | Path = DEFAULT_DB, profile: str = "", metric: str | None = None,
             configs: Iterable[str] | None = None, host: str | None = None, threshold_pct: float | None = None):
    """:func:`trend` with its threshold (``labctl trend --threshold``): the smallest change, in per cent, a
    comparison with the first run and a mark's gate (:func:`labctl.analysis.trend.trend_failures`) count."""
    from labctl.analysis.trend import build_trend
    from labctl.results.access import only_host

    if threshold_pct is not None:
        check_threshold(threshold_pct)
    selection = parse_selection(configs)
    with open_store(db) as store:
        records = store.trials(None, status=None)
        created = {r["id"]: r["created_at"] for r in store.runs()}
    return build_trend(only_host(records, host, str(db)), profile, metric, selection, created,
                       DEFAULT_THRESHOLD_PCT if threshold_pct is None else threshold_pct)


def trend_junit(result, out: str | Path) -> Path:
    """Write a trend's JUnit report (:mod:`labctl.analysis.trend_junit`: a testcase per series, a failure
    where the newest group starts with a regression beyond the threshold)."""
    from labctl.analysis.trend_junit import write_trend_junit

    check_writable(Path(out), "--junit")
    return write_trend_junit(result, out)


def trend_html(result, out: str | Path) -> Path:
    """Write a trend's page (its series, groups and marks; :func:`labctl.analysis.html.page.render_trend`)."""
    from labctl.analysis.html.page import render_trend, write

    return write(render_trend(result.to_dict()), check_html_out(out))


def trend_marks(db: str | Path = DEFAULT_DB, run: int | None = None, limit: int = 4) -> list[str]:
    """The jumpavg marks of the trend of ``run``'s profile (its own metric), newest first, at most ``limit``
    lines, the run's own mark flagged; empty when its profile has no marks (or one run)."""
    from labctl.analysis.trend import build_trend, mark_lines

    run_id, records, _info = run_trials(db, run)
    names = {str(r.config.get("name")) for r in records if r.config.get("name") is not None}
    if len(names) != 1:
        return []
    with open_store(db) as store:
        every = store.trials(None, status=None)
        created = {r["id"]: r["created_at"] for r in store.runs()}
    try:
        return mark_lines(build_trend(every, names.pop(), run_times=created), run_id, limit)
    except UserError:
        return []


def check_bisect(loaded: LoadedProfile, recipe: str | None, good: str | None, bad: str | None,
                 budget: str | None = None, threshold_pct: float | None = None, metric: str | None = None,
                 db: str | Path = DEFAULT_DB, step_blocks: int | None = None):
    """``labctl bisect``'s arguments checked before anything is built (:func:`labctl.measure.bisect.check_request`):
    the recipe, both revisions (known, good an ancestor of bad), the budget, threshold, metric, the blocks a
    step plans its looks over, and the store."""
    from labctl.measure.bisect import check_request

    return check_request(loaded, recipe, good, bad, budget, threshold_pct, metric, db, step_blocks)


def bisect(request, on_event: OnEvent | None = None, scope: CancelScope | None = None, wait: bool = True):
    """Run (or resume: the same profile, recipe, range, metric and threshold) a bisect checked by
    :func:`check_bisect`: builds by the recipe, until-decided steps, the first bad commit and its interval
    against its parent (:class:`labctl.measure.bisect.BisectResult`)."""
    from labctl.measure.bisect import run_bisect

    with signals.stoppable(scope):
        return run_bisect(request, on_event=on_event, wait=wait)


def bisect_document(db: str | Path = DEFAULT_DB, bisect_id: int | None = None) -> dict[str, Any]:
    """A stored bisect (default: the newest) as the document of its answer and steps."""
    from labctl.analysis.bisect_report import stored_document
    from labctl.results.bisects import bisect as stored

    with open_store(db) as store:
        return stored_document(stored(store, bisect_id))


def render_bisect(doc: dict[str, Any], fmt: str = "table") -> str:
    """A bisect's document as text (``table``) or ``json``."""
    import json

    from labctl.analysis.bisect_report import render_bisect as text
    from labctl.analysis.renderers import check_view_format as check

    check(fmt, "a bisect")
    return text(doc) if fmt == "table" else json.dumps(doc, indent=2, default=str)


def bisect_html(doc: dict[str, Any], out: str | Path) -> Path:
    """Write a bisect's page (steps, verdicts, the final pair; :func:`labctl.analysis.html.page.render_bisect`)."""
    from labctl.analysis.html.page import render_bisect as page, write

    return write(page(doc), check_html_out(out))
