"""What the screens draw, made from :mod:`labctl.api` results and events.

Pure functions and small state objects: no widget, no I/O, no clock (times come from the events and
the stored trials), so the screens stay thin and this module is tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from labctl import api
from labctl.events import Event

# --------------------------------------------------------------------------------------------------
# profiles and labs


def profile_paths(directory: str | Path, extra: str | Path | None = None) -> list[Path]:
    """The profiles the Labs screen lists: ``directory/*.yaml`` (sorted), then ``extra`` if not among them."""
    found = sorted(Path(directory).glob("*.yaml")) if Path(directory).is_dir() else []
    if extra is not None and Path(extra).resolve() not in {p.resolve() for p in found}:
        found.append(Path(extra))
    return found


def profile_summary(result: api.Validation) -> str:
    """One line per profile: its name and backend, or that it is invalid; problems follow inline."""
    if result.loaded is None:
        return f"invalid ({len(result.problems)} problem{'s' if len(result.problems) != 1 else ''})"
    profile = result.loaded.profile
    warnings = f", {len(result.problems)} warning{'s' if len(result.problems) != 1 else ''}" if result.problems else ""
    sweep = f", sweeps {len(profile.sweep)} knob{'s' if len(profile.sweep) != 1 else ''}" if profile.sweep else ""
    return f"{profile.name} ({profile.backend}{sweep}{warnings})"


def _pairs(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}" if value else "-"
    return "-" if value in (None, "") else str(value)


def lab_lines(entry: dict[str, Any]) -> list[str]:
    """A lab that is up (an :func:`labctl.api.status` entry): state, NICs requested vs negotiated, pins
    requested vs applied."""
    lines = [f"{entry['name']}: {entry['state']} ({entry.get('uri') or 'no URI'}, "
             f"{len(entry.get('resources') or [])} resources)"]
    lines += ["  " + line for line in api.describe_nics(entry.get("nics") or [])]
    pins = entry.get("pins") or {}
    requested = pins.get("requested") or {}
    if requested:
        lines.append(f"  pins requested: vcpus {_pairs(requested.get('vcpus'))} emulator "
                     f"{_pairs(requested.get('emulator'))} vhost {_pairs(requested.get('vhost'))}")
    applied = pins.get("applied") or {}
    if applied:
        threads = applied.get("threads") or {}
        lines.append(f"  pins applied ({pins.get('applied_source', 'read back')}): vcpus "
                     f"{_pairs(threads.get('vcpus'))} emulator {_pairs(threads.get('emulator'))} "
                     f"vswitch {_pairs(applied.get('vswitch'))}")
    if entry.get("note"):
        lines.append(f"  {entry['note']}")
    return lines


# --------------------------------------------------------------------------------------------------
# a sweep in progress


def clock(seconds: float | None) -> str:
    """``1:02:03``; ``--:--`` when unknown."""
    if seconds is None:
        return "--:--"
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


@dataclass
class Progress:
    """A run being measured: what the Sweep screen's bar, ETA and phase line show.

    ``source``: ``here`` (started in this TUI, fed by events) or ``store`` (found running in the store,
    e.g. a CLI sweep into the same database; polled)."""

    run_id: int | None = None
    profile: str | None = None
    total: int | None = None
    done: int = 0
    done_before: int = 0  # trials a resumed run had already
    elapsed_s: float | None = None  # measuring time behind ``done - done_before``
    phase: str = ""
    state: str = "idle"  # idle, starting, running, cancelling, finished, failed, aborted, cancelled
    source: str = "here"
    last: str = ""
    messages: list[str] = field(default_factory=list)
    measurements: int = 0  # NDR/PDR search measurements stored in this run so far (not counted in ``done``)

    def apply(self, event: Event) -> None:
        """Fold one event of the work in flight into the progress."""
        if event.kind == "run":
            self.run_id, self.total = event.run_id, event.total
            self.done = self.done_before = event.done or 0
            self.measurements = 0
            self.profile = event.lab or self.profile
            self.state, self.elapsed_s = "running", None
        elif event.kind == "phase":
            self.phase = event.message
        elif event.kind == "trial":
            # counted here, not taken from event.done: an NDR/PDR search's measurements are not planned trials
            if api.plan_entry(event.record):
                self.done += 1
            else:
                self.measurements += 1
            self.total = event.total or self.total
            self.elapsed_s = event.elapsed_s
            config = (event.data or {}).get("config", {})
            self.last = f"{api.knob_label(config, ' ') or 'trial'} -> {api.trial_rate(event.record)}"
        elif event.kind == "step":
            self.done, self.total = event.done or self.done, event.total or self.total
        elif event.kind in ("note", "steadiness"):
            self.messages.append(event.message if event.kind == "note" else f"steadiness: {event.message}")

    @property
    def fraction(self) -> float | None:
        return None if not self.total else min(1.0, self.done / self.total)

    @property
    def eta_s(self) -> float | None:
        """Seconds left: the measuring time per trial so far times the trials left."""
        measured = self.done - self.done_before
        if not self.total or not measured or self.elapsed_s is None:
            return None
        return self.elapsed_s / measured * max(0, self.total - self.done)

    def headline(self) -> str:
        if self.run_id is None:
            return "no run yet" if self.state == "idle" else self.state
        total = self.total if self.total else "?"
        where = "" if self.source == "here" else " (read from the store)"
        return f"run {self.run_id} {self.profile or ''}: {self.state}, {self.done}/{total} trials{where}"


def progress_of_run(run: dict[str, Any], records: Iterable[Any]) -> Progress:
    """The progress of a run found in the store (an :func:`labctl.api.runs` entry and its trials of
    every status): done = ok + failed, ETA from the stored trials' own durations."""
    durations = [r.finished_at - r.started_at for r in records
                 if r.status in ("ok", "failed") and r.started_at and r.finished_at]
    done = int(run.get("ok", 0)) + int(run.get("failed", 0))
    running = run.get("status") == "running"
    # a run without a plan (``labctl ndr``: one search; an import) is, once over, all it did: done of done
    total = run.get("planned") or (done if not running else None) or None
    return Progress(run_id=run["id"], profile=run.get("profile_name"), total=total, done=done,
                    elapsed_s=sum(durations) * done / len(durations) if durations else None,
                    phase="phases are shown for sweeps started here" if running else "",
                    state=run.get("status", "?"), source="store")


def watched_run(runs: list[dict[str, Any]], mine: int | None = None) -> dict[str, Any] | None:
    """The run the Sweep screen follows: this TUI's own while it runs; else one another process is
    writing (the newest running); else this TUI's last; else the newest."""
    by_id = {r["id"]: r for r in runs}
    running = [r for r in runs if r.get("status") == "running" and r["id"] != mine]
    if mine in by_id and (by_id[mine].get("status") == "running" or not running):
        return by_id[mine]
    return (running or runs or [None])[-1]


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None
    high: float | None
    n: int


def bars(report: Any) -> list[Bar]:
    """Median rate per configuration (a report's rows), for the live plot."""
    return [Bar(api.knob_label(row.knobs, " ") or "all", row.median, row.ci[0], row.ci[1], row.n)
            for row in report.rows]


# --------------------------------------------------------------------------------------------------
# the configurations table of the Results screen


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    kind: str  # knob, number, ci, count, ratio, delta


@dataclass
class ConfigRow:
    key: str
    knobs: dict[str, Any]
    label: str
    trials: list[int]
    values: dict[str, Any]  # column key -> raw value
    notes: list[str]


@dataclass
class ConfigTable:
    columns: list[Column]
    rows: list[ConfigRow]
    notes: list[str]
    metric: str


def config_table(reports: dict[str, Any]) -> ConfigTable:
    """One row per configuration, from :func:`labctl.api.reports`: the knobs, the main metric's
    median, 95% CI, n, loss and delta against the first value, then the median of every other
    scalar metric the trials carry."""
    metric = next(iter(reports))
    main = reports[metric]
    knobs = [k for k in main.knobs if k != main.by] + ([main.by] if main.by else [])
    columns = [Column(f"knob:{k}", k.split(".")[-1], "knob") for k in knobs]
    columns += [Column("median", f"median {metric}", "number"), Column("ci", "95% CI", "ci"),
                Column("n", "n", "count"), Column("loss", "loss", "ratio"), Column("delta", "vs first", "delta")]
    others = [m for m in reports if m not in (metric, "loss_ratio")]
    columns += [Column(f"metric:{m}", m, "number") for m in others]
    medians = {m: {_key(row.knobs): row.median for row in reports[m].rows} for m in others}
    rows = []
    for row in main.rows:
        key = _key(row.knobs)
        values: dict[str, Any] = {f"knob:{k}": row.knobs.get(k) for k in knobs}
        values.update(median=row.median, ci=row.ci, n=row.n, loss=row.loss,
                      delta=None if row.delta is None else f"{row.delta} {row.verdict}")
        values.update({f"metric:{m}": medians[m].get(key) for m in others})
        rows.append(ConfigRow(key, dict(row.knobs), api.knob_label(row.knobs, " ") or "all", list(row.trials),
                              values, list(row.notes)))
    return ConfigTable(columns, rows, list(main.notes), metric)


def _key(knobs: dict[str, Any]) -> str:
    return repr(sorted(knobs.items(), key=lambda kv: kv[0]))


def cell(column: Column, value: Any) -> str:
    if value is None:
        return "-"
    if column.kind == "ci":
        return "-" if value[0] is None else f"[{value[0]:.3f}, {value[1]:.3f}]"
    if column.kind == "ratio":
        return f"{value:.4%}"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)


def _sort_value(column: Column, value: Any) -> tuple:
    if value is None:
        return (2, 0.0, "")
    if column.kind == "ci":
        value = value[0]
        if value is None:
            return (2, 0.0, "")
    if column.kind == "delta":
        try:
            value = float(str(value).split("%")[0])
        except ValueError:
            return (1, 0.0, str(value))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return (1, 0.0, str(value))
    return (0, float(value), "")


def sort_rows(rows: list[ConfigRow], column: Column, reverse: bool = False) -> list[ConfigRow]:
    """Rows ordered by one column (numbers as numbers; empty cells last either way)."""
    present = [r for r in rows if r.values.get(column.key) is not None]
    empty = [r for r in rows if r.values.get(column.key) is None]
    return sorted(present, key=lambda r: _sort_value(column, r.values.get(column.key)), reverse=reverse) + empty


def filter_rows(rows: list[ConfigRow], text: str) -> list[ConfigRow]:
    """Rows whose settings contain every word of ``text`` (``burst=64 rx_queue_size=1024``, ``1024``)."""
    words = text.lower().split()
    return [r for r in rows if all(w in r.label.lower() for w in words)]


def selection_trials(rows: Iterable[ConfigRow], keys: Iterable[str]) -> list[int]:
    """The trial ids of the rows whose key is in ``keys`` (an A or B selection)."""
    wanted = set(keys)
    return sorted(t for r in rows if r.key in wanted for t in r.trials)


def run_line(run: dict[str, Any]) -> list[str]:
    """Cells of the runs table (times are the viewer's local time)."""
    import time

    created = run.get("created_at")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(created)) if created else "-"
    planned = run.get("planned") or "-"
    return [str(run["id"]), str(run.get("profile_name") or "-"), str(run.get("status") or "-"),
            f"{run.get('ok', 0)}/{planned}", str(run.get("failed", 0)), str(run.get("aborted", 0)),
            str(run.get("host") or "-"), when]


RUN_COLUMNS = ["run", "profile", "status", "ok/planned", "failed", "aborted", "host", "created"]


# --------------------------------------------------------------------------------------------------
# advice


def value_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def trial_list(ids: list[int], most: int = 12) -> str:
    shown = ", ".join(map(str, ids[:most]))
    return shown + (f", ... ({len(ids)} trials)" if len(ids) > most else f" ({len(ids)} trials)")



def chosen_run(runs: list[dict[str, Any]], run_id: int | None) -> dict[str, Any] | None:
    """The run Results and Advice show (an :func:`labctl.api.runs` entry): ``run_id``'s, else the newest."""
    return next((r for r in runs if r["id"] == run_id), None) if run_id is not None else (runs or [None])[-1]


def step_run(runs: list[dict[str, Any]], run_id: int | None, step: int) -> int | None:
    """The id of the run ``step`` places after (``-1``: before) the chosen one, oldest first; None past
    either end."""
    ids = [r["id"] for r in runs]
    chosen = chosen_run(runs, run_id)
    at = ids.index(chosen["id"]) + step if chosen is not None else -1
    return ids[at] if 0 <= at < len(ids) else None


def run_choice_line(runs: list[dict[str, Any]], run: dict[str, Any]) -> str:
    """Which run the advice reads, and how to pick another."""
    at = [r["id"] for r in runs].index(run["id"]) + 1
    newest = ", the newest" if at == len(runs) else ""
    return (f"run {run['id']} {run.get('profile_name') or '-'} ({at} of {len(runs)}{newest}), as chosen on Results; "
            "[ and ] pick an older or a newer run")


def advice_lines(advice: Any, run: dict[str, Any], runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The advice of ``run`` (an :func:`labctl.api.runs` entry, one of ``runs``) as (kind, line): head,
    which run, recommend + evidence + rationale, inconclusive + next, warning; kinds pick the style."""
    used = f"{advice.trials_used} trial{'s' * (advice.trials_used != 1)}"
    lines = [("head", f"Advice for run {run['id']}: {used}, loss limit {advice.max_loss:.2%}"),
             ("run", run_choice_line(runs, run))]
    for r in advice.recommendations:
        ci = "" if r.ci_pct is None else f" [{r.ci_pct[0]:+.1f}, {r.ci_pct[1]:+.1f}]"
        cond = f" (with {', '.join(f'{k}={value_text(v)}' for k, v in r.condition.items())})" if r.condition else ""
        lines.append(("recommend", f"recommend {r.knob} = {value_text(r.value)}{cond}: "
                                   f"{r.gain_pct:+.1f}%{ci} {r.metric}"))
        lines.append(("evidence", f"  evidence: n={r.n}, trials {trial_list(r.trials)}"))
        lines.append(("rationale", f"  {r.rationale}"))
    if advice.inconclusive:
        lines.append(("head", "Inconclusive (what to measure next)"))
    for i in advice.inconclusive:
        lines.append(("inconclusive", f"inconclusive {i.knob}"))
        lines.append(("next", f"  {i.reason}"))
    for w in advice.warnings:
        lines.append(("warning", f"warning: {w}"))
    if not advice.recommendations and not advice.inconclusive:
        lines.append(("none", "nothing varies across these trials: there is nothing to compare"))
    return lines
