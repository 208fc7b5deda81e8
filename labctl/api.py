"""The library face of labctl: everything a face (the CLI, the TUI, the fleet) may call.

Each function checks its arguments first (a :class:`~labctl.errors.UserError` names the field and the
allowed values, before anything is created), does the work, and reports progress through one callback,
``on_event(Event)`` (see :mod:`labctl.events`). Work that creates resources runs in a cancel scope
(:mod:`labctl.signals`): pass ``scope=CancelScope()`` and call ``scope.cancel()`` from another thread to
stop it cleanly (the trial in flight is torn down; a sweep stays resumable); SIGTERM does the same.

Nothing below this module imports :mod:`advisor`; the advice, the pinning plan and the adaptive search
are reached through here. The reading of stored runs (reports, pivots, plots, comparisons, trends, stored
bisects, the until-decided verdicts) lives in :mod:`labctl.analysis.face` and ``labctl apply``'s in
:mod:`labctl.domain_edit.face`; this module re-exports both, so a face imports only ``labctl.api``
(``tests/unit/cli/test_through_api.py``, ``tests/unit/fleet/test_through_api.py``).

Imports marked ``lazy:`` stay inside their function, because the module they name would slow every start
of the CLI (``labctl --help`` too). Measured as the time ``import M`` adds after ``import labctl.cli`` on a
2-core Debian 12 host (median of 5): ``scipy``: scipy and numpy for the statistics (analysis, the advisor's
recommend, ``measure.until`` and so ``measure.sweep``), 1.0 s; ``optuna``: the adaptive search
(``advisor.search``: optuna 0.2 s, with scipy), 0.9 s; ``numpy``: the steadiness probe, 0.09 s; ``lab``:
the lab and measure rooms (libvirt-python, MLRsearch), 0.1 s together. ``labctl --help`` took 0.61 s so,
and 1.95 s with every one of them at the top (medians of 11, the host busy with another test run). The
cheap rooms (the advisor's advice, apply, verdicts and pinning, the host's facts, the page's template, the
image caches) are imported at the top: ``import labctl.cli`` takes 0.38 s with them there, 0.40 s when
they were lazy (medians of 21, within the noise).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from advisor.advice import DEFAULT_MAX_LOSS
from advisor.apply import write_tuned
from advisor.pinning import pinning_plan
from advisor.verdicts import apply_until
from labctl import signals
from labctl.analysis.course import course_lines
from labctl.analysis.face import (
    EXPORT_FORMATS, NO_GROUPING, check_html_out, check_metric, check_report_format, check_store, check_threshold,
    check_view_format, check_writable, compare, compare_html, compare_trials, export_trials, import_trials,
    parse_selection, pivot, plot, render_comparison, render_pivot, render_report, render_trend, report,
    report_metrics, reports, run_verdicts, runs, trend, trial_summary, trials, trend_junit, trend_html, trend_marks,
    bisect_document, render_bisect, bisect_html,
)
from labctl.analysis.grouping import knob_value
from labctl.analysis.html.page import render_run, write as write_page
from labctl.buildinfo import version_line
from labctl.shipped import tree_path as shipped_path
from labctl.domain_edit.face import (apply_domain, apply_xml, check_emit_form, emit_advice, resolve_changes,
                                     undo_domain, verify_domain)
from labctl.errors import Interrupted, LabError, ProfileError, Problem, UserError
from labctl.events import Event, OnEvent, notify
from labctl.host.doctor import Doctor, describe_host
from labctl.host.facts import gather
from labctl.lab.libvirt.appliance import cache as appliance
from labctl.lab.libvirt.guestimage import cache as guestimage
from labctl.profile.knobs import parse_assignment, short_label
from labctl.profile.load import ANY_CPU, LoadedProfile, load_profile
from labctl.results.access import DEFAULT_DB, run_trials
from labctl.results.interchange import import_files as import_runs, read_jsonl as read_trials_file
from labctl.results.interchange import write_jsonl as write_trials_file
from labctl.results.lines import describe_nics, reached, reconf_lines, soak_lines, trial_rate
from labctl.results.metrics import ALIASES, DEFAULT_PRECISION, DEFAULT_THRESHOLD_PCT, default_metric
from labctl.results.record import SEARCH_ROLES, TrialRecord, plan_entry
from labctl.signals import CancelScope

__all__ = [
    # base: events, cancel scopes, the errors faces catch, the host's report
    "Event", "OnEvent", "CancelScope", "LabError", "Interrupted", "UserError", "Doctor", "describe_host",
    "version_line", "shipped_path",
    # profiles and labs
    "DEFAULT_DB", "load", "load_profile", "load_for_hosts", "parse_overrides", "Validation", "validate", "render",
    "up", "DownResult", "down", "status", "build_image", "build_guest_image",
    # measuring
    "run", "sweep", "check_sweep", "check_swap", "tune", "check_budget", "replay", "ndr", "search_settings", "measure_metric",
    "MEASURE_METRICS", "DEFAULT_PRECISION", "DEFAULT_THRESHOLD_PCT", "default_metric", "SEARCH_ROLES",
    # advice, the pinning plan, the host
    "advise", "apply_advice", "plan", "doctor",
    # labctl apply (labctl.domain_edit.face)
    "apply_xml", "apply_domain", "verify_domain", "undo_domain", "emit_advice", "check_emit_form",
    # the fleet's
    "import_runs", "read_trials_file", "write_trials_file",
    # words every face says alike
    "knob_label", "describe_nics", "trial_rate", "reached", "plan_entry", "course_lines",
    # the page of a run
    "report_document", "report_html",
    # the reading of stored runs (labctl.analysis.face)
    "check_writable", "runs", "trials", "report_metrics", "check_metric", "report", "reports", "pivot", "render_pivot",
    "check_report_format", "render_report", "trial_summary", "NO_GROUPING", "plot", "import_trials", "check_store",
    "EXPORT_FORMATS", "export_trials", "check_threshold", "compare", "check_view_format", "render_comparison",
    "parse_selection", "trend", "render_trend", "compare_trials", "check_html_out", "compare_html", "run_verdicts",
    "trend_junit", "trend_html", "trend_marks", "bisect_document", "render_bisect", "bisect_html",
    # bisect over builds
    "check_bisect", "bisect",
    # live changes and long trials
    "check_reconf", "reconf", "resolve_advice_changes", "check_soak", "soak", "reconf_cost", "live_lines",
]


# --- profiles -----------------------------------------------------------------------------------------

def parse_overrides(assignments: Iterable[str] | None) -> dict[str, Any]:
    """``["guest.nics.*.queues=2", ...]`` (the CLI's ``--set``) as knob -> value."""
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
    from labctl.lab.libvirt.lifecycle import render_profile  # lazy: lab

    return render_profile(loaded.profile, uri, guest)


# --- libvirt labs -------------------------------------------------------------------------------------

def up(loaded: LoadedProfile, uri: str | None = None, mode: str = "verify", timeout_s: float = 300.0,
       on_event: OnEvent | None = None, scope: CancelScope | None = None):
    """Define and start the profile's guest; returns requested vs negotiated per NIC and the pins."""
    from labctl.lab.libvirt.lifecycle import up as lab_up  # lazy: lab

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
    from labctl.lab.libvirt.lifecycle import down as lab_down, lab_name_of  # lazy: lab

    name = lab_name_of(target)
    if uri is None and target.endswith((".yaml", ".yml")):
        profile = load_profile(target).profile
        uri = profile.libvirt_uri if profile.backend == "libvirt" else None
    with signals.stoppable(scope):
        return DownResult(name, lab_down(name, uri))


def status(uri: str | None = None) -> list[dict[str, Any]]:
    """The labs labctl has up, with requested vs applied pins and negotiated NICs."""
    from labctl.lab.libvirt.lifecycle import status as lab_status  # lazy: lab

    return lab_status(uri)


def build_image(force: bool = False, on_event: OnEvent | None = None):
    """Build (or find cached) the workload appliance the libvirt lab boots."""
    return appliance.build(force=force, progress=lambda text: notify(on_event, "note", message=text))


def build_guest_image(out: str | Path | None, force: bool = False, on_event: OnEvent | None = None):
    """Build (or find cached) the Debian 12 guest disk image (``labctl image guest``) and copy it to ``out``.
    An existing ``out`` that is not an image labctl made is refused (``force``: replaced, and the image rebuilt).
    Returns a :class:`~labctl.lab.libvirt.guestimage.GuestImageInfo` (``out`` set when copied)."""
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
    from labctl.measure.trial import run_trial  # lazy: lab

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
    from labctl.measure.sweep import run_sweep  # lazy: lab, scipy

    metric = measure_metric(metric)
    settings = _metric_search(loaded, metric)
    with signals.stoppable(scope):
        return run_sweep(loaded, db, repeat, resume, steadiness_s=steadiness_s, on_event=on_event, search=settings,
                         wait=wait, order=order, seed=seed, until=until, budget=budget, threshold_pct=threshold_pct,
                         verdict_metric=verdict_metric, futility_pct=futility_pct)


def check_sweep(repeat: int | None = None, until: str | None = None, budget: str | None = None,
                futility_pct: float | None = None, steadiness_s: float | None = None, swap: str | None = None) -> None:
    """A sweep's options checked before its profile is read, in the order the CLI names them: the repeats,
    ``until`` with its ``budget``, the futility (only with ``until``), the steadiness probe's duration, ``swap``."""
    from labctl.host.steadiness import check_arguments  # lazy: numpy
    from labctl.measure.sweep import check_repeat  # lazy: lab, scipy
    from labctl.measure.until import check_futility, check_until  # lazy: scipy

    check_repeat(repeat)
    check_until(until, budget)
    if until is not None:
        check_futility(futility_pct)
    if steadiness_s is not None:
        check_arguments(steadiness_s)
    check_swap(swap)


def check_swap(swap: str | None) -> None:
    """``--swap hotplug|boot`` (how a running guest reaches a trial whose NICs differ; it sets the profile's
    ``swap``): one line naming the option and the allowed values."""
    from labctl.lab.plan import check_swap as check  # lazy: lab

    check(swap)


MEASURE_METRICS = ("mpps", "ndr", "pdr")


def measure_metric(metric: str) -> str:
    """What a sweep or tune measures, by its short name: ``ndr_mpps`` / ``pdr_mpps`` (the registry's names
    of what ``ndr`` / ``pdr`` name) are taken as ``ndr`` / ``pdr``."""
    return {name: alias for alias, name in ALIASES.items()}.get(metric, metric)


def _metric_search(loaded: LoadedProfile, metric: str):
    """The NDR/PDR search settings a sweep or tune by ``ndr``/``pdr`` runs (None for ``mpps``)."""
    from labctl.measure.ndr import check_searchable  # lazy: lab

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
    from advisor.search import space_from_profile, tune as search  # lazy: optuna, scipy
    from labctl.measure.labs import check_measurable  # lazy: lab
    from labctl.measure.tune import run_tune  # lazy: lab

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
    from labctl.measure.ndr import run_ndr  # lazy: lab

    settings = search_settings(loaded, search, precision, final_trial_s, initial_trial_s, duration_sum_s)
    with signals.stoppable(scope):
        return run_ndr(loaded, settings, db, on_event, wait)


def search_settings(loaded: LoadedProfile, search: str = "mlrsearch", precision: float = DEFAULT_PRECISION,
                    final_trial_s: float | None = None, initial_trial_s: float = 1.0,
                    duration_sum_s: float | None = None):
    """An NDR/PDR search's settings; the final trial lasts the profile's ``workload.duration_s`` unless given."""
    from labctl.measure.ndr import SearchSettings  # lazy: lab

    final = final_trial_s if final_trial_s is not None else loaded.profile.workload.duration_s
    settings = SearchSettings(search=search, precision=precision, initial_trial_s=min(initial_trial_s, final),
                              final_trial_s=final, duration_sum_s=duration_sum_s if duration_sum_s is not None
                              else 2 * final)
    settings.check()
    return settings


def replay(path: str | Path, budget: int, seed: int = 0):
    """The same adaptive search against recorded trials (JSONL), for judging it offline."""
    from advisor.search import replay as replay_search  # lazy: optuna, scipy

    check_budget(budget)
    return replay_search(Path(path), budget, seed)


# --- advice -------------------------------------------------------------------------------------------

def advise(db: str | Path = DEFAULT_DB, run: int | None = None, max_loss: float | None = None,
           host: str | None = None, metric: str | None = None):
    """Recommendations per knob from a run's trials, with evidence; refusals where the data cannot tell
    (comparisons stay within one host, accelerator and lab; ``host`` keeps one host's trials). ``metric``:
    the rate ranked (``mpps``; ``ndr_mpps``/``pdr_mpps`` for a run of NDR/PDR searches, the default there;
    ``bandwidth_gbps``/``transactions_per_s`` for a tcp_stream/tcp_rr run, the default there, which takes
    no ``max_loss``: no loss limit applies to TCP)."""
    from advisor.recommend import TCP_METRICS, advise as make_advice, advised_metrics  # lazy: scipy

    run_id, records, info = run_trials(db, run, status=None, host=host)
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
    return _until_advice(info.get("until"), run_id, records, advice)


def _until_advice(course: dict[str, Any] | None, run_id: int, records: list, advice):
    """A ``sweep --until decided`` run (``course``: its info's ``until``): its own verdicts decide the knobs
    they cover (:func:`advisor.verdicts.apply_until`)."""
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
    check_writable(Path(out))
    return write_tuned(profile, advise(db, run, max_loss), out)


def plan(profile: str | Path):
    """A pinning plan and first settings from this host's topology, before any measurement."""
    return pinning_plan(gather(), load_profile(profile).profile)


# --- host ---------------------------------------------------------------------------------------------

def doctor(steadiness_s: float | None = None, on_event: OnEvent | None = None,
           scope: CancelScope | None = None) -> Doctor:
    """What this host can do (CPUs, NUMA, hugepages, KVM, versions, lab backends), and optionally how
    steady its own speed is (``steadiness_s`` seconds of probing)."""
    from labctl.host.steadiness import check_arguments, probe  # lazy: numpy

    if steadiness_s is not None:
        check_arguments(steadiness_s)  # bad input fails before any work
    result = Doctor(gather())
    if steadiness_s is not None:
        notify(on_event, "note", message=f"steadiness: probing the host for {steadiness_s:g} s")
        with signals.stoppable(scope):
            result.steadiness = probe(steadiness_s)
        notify(on_event, "steadiness", data=result.steadiness, message=result.steadiness.describe())
    return result


# --- words every face says alike (trial_rate, reached, plan_entry, describe_nics, course_lines: imported above) --

def knob_label(config: dict[str, Any] | Iterable[tuple[str, Any]], sep: str = ", ") -> str:
    """Knob settings by the last part of their path: ``rx_queue_size=1024, burst=64``."""
    return short_label(config.items() if isinstance(config, dict) else config, sep)


# --- the page people share: a run as one self-contained HTML file (a comparison's: compare_html) -------

def report_document(db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
                    metric: str | None = None, host: str | None = None) -> dict[str, Any]:
    """A run as one JSON document, what ``labctl report --format json`` prints and ``--html`` renders
    (:func:`labctl.analysis.html.document.stored_run_document`; the advice is :func:`advise`'s)."""
    from labctl.analysis.html.document import stored_run_document  # lazy: scipy

    return stored_run_document(db, run, by, metric and check_metric(metric), host,
                               advise=lambda run_id: advise(db, run_id, host=host).to_dict())


def report_html(out: str | Path, db: str | Path = DEFAULT_DB, run: int | None = None, by: str | None = None,
                metric: str | None = None, host: str | None = None) -> Path:
    """Write a run's page to ``out``: :func:`report_document` rendered (:mod:`labctl.analysis.html.page`)."""
    out = check_html_out(out)
    return write_page(render_run(report_document(db, run, by, metric, host)), out)


# --- which commit did it: bisect over builds (its stored answer: labctl.analysis.face) ------------------

def check_bisect(loaded: LoadedProfile, recipe: str | None, good: str | None, bad: str | None,
                 budget: str | None = None, threshold_pct: float | None = None, metric: str | None = None,
                 db: str | Path = DEFAULT_DB, step_blocks: int | None = None):
    """``labctl bisect``'s arguments checked before anything is built (:func:`labctl.measure.bisect_request.check_request`):
    the recipe, both revisions (known, good an ancestor of bad), the budget, threshold, metric, the blocks a
    step plans its looks over, and the store."""
    from labctl.measure.bisect_request import check_request  # lazy: lab

    return check_request(loaded, recipe, good, bad, budget, threshold_pct, metric, db, step_blocks)


def bisect(request, on_event: OnEvent | None = None, scope: CancelScope | None = None, wait: bool = True):
    """Run (or resume: the same profile, recipe, range, metric and threshold) a bisect checked by
    :func:`check_bisect`: builds by the recipe, until-decided steps, the first bad commit and its interval
    against its parent (:class:`labctl.measure.bisect.BisectResult`)."""
    from labctl.measure.bisect import run_bisect  # lazy: lab

    with signals.stoppable(scope):
        return run_bisect(request, on_event=on_event, wait=wait)


# --- live changes and long trials: labctl reconf, labctl soak (labctl.measure.reconf, .soak) ----------

def check_reconf(changes: Iterable[str] = (), exec_argv: list[str] | None = None, advice_run: int | None = None,
                 window_s: float = 5.0, rate: str | None = None, at: str | None = None) -> None:
    """A reconf's own arguments, before its profile is read: one kind of change, the window, the load."""
    from labctl.measure.load_point import check_load  # lazy: lab
    from labctl.measure.reconf import ReconfRequest, check_request  # lazy: lab

    check_request(ReconfRequest(list(changes), exec_argv, True if advice_run is not None else None,
                                window_s=window_s))
    check_load(rate, at)


def reconf(loaded: LoadedProfile, changes: Iterable[str] = (), exec_argv: list[str] | None = None,
           advice_run: int | None = None, rate: str | None = None, at: str | None = None, window_s: float = 5.0,
           db: str | Path = DEFAULT_DB, on_event: OnEvent | None = None, scope: CancelScope | None = None,
           wait: bool = True):
    """What one live change costs (:mod:`labctl.measure.reconf`): ``changes`` (``KNOB=VALUE``), or the user's
    command ``exec_argv`` (an argv, never a shell), or ``advice_run``'s advice applied to the lab's running
    domain as ``labctl apply`` would. Refused before anything starts when it cannot be made live here
    (:class:`~labctl.errors.NotLiveError`, exit 2). Load: ``rate``, else the stored NDR lower bound (``at``
    ``ndr``) or half of it. Returns a :class:`~labctl.measure.reconf.ReconfResult` (stored in a new run of ``db``)."""
    from labctl.measure.reconf import ReconfRequest, prepare, run_reconf  # lazy: lab

    check_reconf(changes, exec_argv, advice_run, window_s, rate, at)
    request = ReconfRequest(list(changes), exec_argv, rate=rate, at=at, window_s=window_s)
    if advice_run is not None:
        request.advice, _notes = resolve_advice_changes(advise(db, advice_run))
        request.advice_source = f"the advice of run {advice_run}"
    prepared = prepare(loaded, request, db, lambda: render(loaded))
    with signals.stoppable(scope):
        return run_reconf(loaded, prepared, db, on_event, wait)


def resolve_advice_changes(advice: Any):
    """The change set ``labctl apply --run N`` would make from ``advice`` (domain settings only), with notes."""
    return resolve_changes(advice=advice)


def check_soak(duration: str, rate: str | None = None, at: str | None = None) -> float:
    """A soak's own arguments, before its profile is read; returns the duration in seconds."""
    from labctl.measure.load_point import check_load  # lazy: lab
    from labctl.measure.soak import parse_duration  # lazy: lab

    seconds = parse_duration(duration)
    check_load(rate, at)
    return seconds


def soak(loaded: LoadedProfile, duration: str, rate: str | None = None, at: str | None = None,
         db: str | Path = DEFAULT_DB, on_event: OnEvent | None = None, scope: CancelScope | None = None,
         wait: bool = True):
    """One long trial second by second (:mod:`labctl.measure.soak`), stored as it runs (every minute): the
    series, the loss events with the host's stalls beside them, the loss ratio's one-sided 95% upper bound.
    Returns a :class:`~labctl.measure.soak.SoakResult`; an interrupted soak keeps what it measured (a note
    says where it stopped) and raises as interrupted."""
    from labctl.measure.soak import prepare, run_soak  # lazy: lab

    check_soak(duration, rate, at)
    prepared = prepare(loaded, duration, rate, at, db)
    with signals.stoppable(scope):
        return run_soak(loaded, prepared, db, on_event, wait)


def reconf_cost(knobs: Iterable[str] = (), profile: str | Path | None = None, advice: Any = None,
                nic: str | None = None, db: str | Path = DEFAULT_DB) -> list[str]:
    """What a ``labctl apply`` change (``--set`` knobs, a tuned profile or advice, as apply resolves them) cost
    where ``db`` holds a reconf trial of the same settings (``labctl apply --dry-run``): the newest such trial
    in words; ``[]`` when none (or no store)."""
    from labctl.measure.reconf import stored_cost  # lazy: lab

    changes, _notes = resolve_changes(list(knobs), profile, advice, nic)
    return stored_cost(changes.knobs(), db)


def live_lines(record: TrialRecord) -> list[str]:
    """A reconf or soak trial in words (:func:`labctl.results.lines.reconf_lines` / ``soak_lines``)."""
    return soak_lines(record) if "soak" in record.details else reconf_lines(record)
