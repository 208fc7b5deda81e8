"""Import and export of trial records: JSONL (lossless, round-trips) and CSV (one row per trial).

JSONL, one JSON object a line::

    {"config": {"guest.nics.0.rx_queue_size": 1024, ...},
     "metrics": {"mpps": 9.8, "loss_ratio": 0.0002, "tx_dropped": 1200, ...},
     "env": {"host": "lab1", "accel": "kvm", ...},
     "status": "ok", "repeat_index": 0, "warnings": [...], "details": {...}}

``config`` is required; every other key is optional and takes the TrialRecord default. The keys are the
fields of :class:`labctl.results.record.TrialRecord` except ``id`` and ``run_id``, which the store assigns. Each
line is validated by that model; one bad line rejects the whole file (nothing is imported).
"""

from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from pydantic import ValidationError

from labctl.errors import ImportFormatError
from labctl.results.codecs import DICT_METRICS, SCALAR_METRICS
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store

ASSIGNED_BY_STORE = ("id", "run_id")
_UNION_TAGS = {"bool", "int", "float", "str", "none"}


# --------------------------------------------------------------------------------------------------
# import


MAX_LINE_CHARS = 1 << 20  # a trial record is a few KiB; a longer line is not one
MAX_LINES = 1_000_000


class _Hostile(ValueError):
    """JSON that parses but that a trial record never holds (NaN, a key twice)."""


def _no_constant(name: str) -> None:
    raise _Hostile(f"{name} is not a number a record holds (allowed: finite numbers, or null)")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Hostile(f"key {json.dumps(key)[:40]} appears twice in one object (allowed: each key once)")
        seen[key] = value
    return seen


def parse_line(text: str) -> TrialRecord:
    """Validate one JSONL line; raises ``ImportFormatError`` with ``source="-"``, ``line=None``. NaN,
    Infinity, a key given twice and nesting too deep for Python are refused like any bad value."""
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ImportFormatError("-", None, None, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except _Hostile as exc:
        raise ImportFormatError("-", None, None, str(exc)) from None
    except RecursionError:
        raise ImportFormatError("-", None, None, "nested too deeply (allowed: a trial record's few levels)") from None
    if not isinstance(data, dict):
        raise ImportFormatError("-", None, None, f"expected a JSON object, got {type(data).__name__}")
    for key in ASSIGNED_BY_STORE:
        if key in data:
            raise ImportFormatError("-", None, key, "is assigned by the store; remove it from the line")
    try:
        return TrialRecord.model_validate(data)
    except ValidationError as exc:
        field, problem = _describe(exc.errors()[0])
        raise ImportFormatError("-", None, field, problem) from None


def _describe(error: dict[str, Any]) -> tuple[str, str]:
    """Turn one pydantic error into (dotted field, short problem)."""
    loc = [str(part) for part in error["loc"]]
    kind = error["type"]
    if loc and loc[0] == "config" and len(loc) == 3 and loc[2] in _UNION_TAGS:
        value = error.get("input")
        return f"config.{loc[1]}", (
            f"a knob value must be a number, true/false, a string or null, not {type(value).__name__}"
        )
    field = ".".join(loc) or "line"
    if kind == "extra_forbidden":
        allowed = _allowed(loc[:-1])
        return field, "unknown field" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if kind == "missing":
        return field, "missing (required)"
    value = error.get("input")
    shown = json.dumps(value, default=str)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return field, f"{error['msg']} (got {shown})"


def _allowed(parent: list[str]) -> list[str]:
    model: Any = {(): TrialRecord, ("env",): Environment, ("metrics",): Metrics}.get(tuple(parent))
    if model is None:
        return []
    names = list(model.model_fields)
    return [n for n in names if n not in ASSIGNED_BY_STORE] if model is TrialRecord else names


def read_jsonl(path: str | Path) -> list[TrialRecord]:
    """Every record of a JSONL file, validated. Raises ``ImportFormatError`` for the first bad line
    (its message says how many more bad lines follow); blank lines are skipped."""
    source = str(path)
    records: list[TrialRecord] = []
    first: ImportFormatError | None = None
    bad = 0
    for number, text in _lines(source):
        if not text.strip():
            continue
        try:
            records.append(parse_line(text))
        except ImportFormatError as exc:
            bad += 1
            if first is None:
                first = ImportFormatError(source, number, exc.field, exc.problem)
    if first is not None:
        if bad > 1:
            more = bad - 1
            raise ImportFormatError(
                source, first.line, first.field, f"{first.problem} ({more} more bad line{'s' * (more > 1)})"
            )
        raise first
    if not records:
        raise ImportFormatError(source, None, None, "no trial records to import")
    return records


def _lines(source: str) -> Iterator[tuple[int, str]]:
    """(number, text) of each line, read a bounded line at a time: a huge line or file is refused,
    never read whole into memory."""
    try:
        with open(source, encoding="utf-8") as handle:
            for number in range(1, MAX_LINES + 2):
                text = handle.readline(MAX_LINE_CHARS + 1)
                if not text:
                    return
                if number > MAX_LINES:
                    raise ImportFormatError(source, number, None, f"more than {MAX_LINES} lines "
                                            f"(allowed: up to {MAX_LINES} trial records a file)")
                if len(text) > MAX_LINE_CHARS and not text.endswith("\n"):
                    raise ImportFormatError(source, number, None, f"longer than {MAX_LINE_CHARS} characters "
                                            f"(allowed: a trial record of up to {MAX_LINE_CHARS})")
                yield number, text.rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(source, None, None, f"cannot read: {exc}") from None


def import_jsonl(store: Store, path: str | Path, run_name: str | None = None) -> tuple[int, int]:
    """Import a JSONL file as one new run (status ``imported``); all or nothing.
    Returns ``(run_id, number of trials imported)``."""
    records = read_jsonl(path)
    hosts = {r.env.host for r in records}
    plan = [{"seq": i, "config": r.config, "repeat_index": r.repeat_index} for i, r in enumerate(records)]
    with store.transaction():
        run_id = store.create_run(
            run_name or f"import:{Path(path).name}",
            {"imported_from": str(path), "trials": len(records)},
            plan,
            host=hosts.pop() if len(hosts) == 1 else None,
            status="imported",
        )
        for seq, record in enumerate(records):
            store.add_trial(record.model_copy(update={"run_id": run_id}), seq=seq)
    return run_id, len(records)


def import_files(files: Iterable[tuple[str | Path, str | None]], db: str | Path) -> list[tuple[int, int]]:
    """JSONL files into the store ``db``, one run per (file, run name), all or nothing: every file is
    checked before the store is opened (or created), and one transaction imports them all. (run id,
    count) per file."""
    files = list(files)
    for path, _name in files:
        read_jsonl(path)
    with Store(db) as store, store.transaction():
        return [import_jsonl(store, path, name) for path, name in files]


# --------------------------------------------------------------------------------------------------
# export


@contextlib.contextmanager
def _opened(out: str | Path | IO[str], newline: str | None = None) -> Iterator[IO[str]]:
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline=newline) as handle:
            yield handle
    else:
        yield out


def record_to_line(record: TrialRecord) -> dict[str, Any]:
    """The JSONL object of one record: ids left out, defaults left out except status and repeat_index."""
    line: dict[str, Any] = {
        "config": record.config,
        "metrics": record.metrics.model_dump(exclude_defaults=True),
        "env": record.env.model_dump(mode="json", exclude_defaults=True),
        "status": record.status,
        "repeat_index": record.repeat_index,
    }
    if record.error is not None:
        line["error"] = record.error
    if record.warnings:
        line["warnings"] = record.warnings
    if record.details:
        line["details"] = record.details
    if record.started_at is not None:
        line["started_at"] = record.started_at
    if record.finished_at is not None:
        line["finished_at"] = record.finished_at
    return line


def write_jsonl(records: Iterable[TrialRecord], out: str | Path | IO[str]) -> int:
    """Write ``records`` as JSONL (the import format); returns the count."""
    count = 0
    with _opened(out) as handle:
        for record in records:
            handle.write(json.dumps(record_to_line(record), ensure_ascii=False) + "\n")
            count += 1
    return count


def export_jsonl(store: Store, out: str | Path | IO[str], run_id: int | None = None) -> int:
    """Write every trial (all statuses) of ``run_id`` (or of every run) as JSONL; returns the count."""
    return write_jsonl(store.trials(run_id, status=None), out)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def export_csv(store: Store, out: str | Path | IO[str], run_id: int | None = None) -> int:
    """One row per trial (all statuses): run_id, trial_id, status, repeat_index, host, accel, every
    config knob (first-seen order), every scalar metric (the Metrics fields, then dict metrics as
    ``drops.<cause>``, ``cpu.<role>``, ``queue_shares.<queue>``), error, warnings. Returns the count."""
    records = store.trials(run_id, status=None)
    fixed = ["run_id", "trial_id", "status", "repeat_index", "host", "accel"]
    knobs: dict[str, None] = {}
    extra: dict[str, set[str]] = {name: set() for name in DICT_METRICS}
    for record in records:
        knobs.update(dict.fromkeys(record.config))
        for name in DICT_METRICS:
            extra[name].update(getattr(record.metrics, name))
    metric_cols = list(SCALAR_METRICS) + [f"{n}.{k}" for n in DICT_METRICS for k in sorted(extra[n])]
    tail = ["error", "warnings"]
    taken = set(fixed) | set(metric_cols) | set(tail)
    knob_cols = {knob: (f"config.{knob}" if knob in taken else knob) for knob in knobs}
    header = fixed + list(knob_cols.values()) + metric_cols + tail
    with _opened(out, newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for r in records:
            row = [r.run_id, r.id, r.status, r.repeat_index, r.env.host, r.env.accel]
            row += [r.config.get(knob) for knob in knob_cols]
            row += [getattr(r.metrics, name) for name in SCALAR_METRICS]
            row += [getattr(r.metrics, n).get(k) for n in DICT_METRICS for k in sorted(extra[n])]
            row += [r.error, "; ".join(r.warnings)]
            writer.writerow([_cell(v) for v in row])
    return len(records)
