"""What differs between two sets of trials beyond their configuration: the fields of their environments
(QEMU, libvirt, DPDK, kernel, CPU model, accelerator, pins, ...), whether they ran on one host,
accelerator and lab at all, and the processes that are not labctl's that were busy on their CPUs
(``details.busy_strangers``, :mod:`labctl.lab.busy`). :mod:`labctl.analysis.compare` and
:mod:`labctl.analysis.trend` list these beside their verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from labctl.analysis.grouping import ENV_DIMENSIONS
from labctl.results.record import Environment, TrialRecord

__all__ = ["ENV_FIELDS", "shared_env", "EnvChange", "env_values", "env_changes", "dimension_problem", "busy_side_note", "busy_note"]

ENV_FIELDS: tuple[str, ...] = tuple(Environment.model_fields)
_DIMENSION_WORDS = {"host": "host", "accel": "accelerator", "lab": "lab"}


def _shown(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, dict) and {"path", "sha256"} <= value.keys():  # a binary (env.binaries' entries)
        facts = ", ".join([*(str(value[k]) for k in ("version", "build") if value.get(k)),
                           *([f"commit {str(value['commit'])[:12]}"] if value.get("commit") else [])])
        return f"{value['path']}@{str(value['sha256'])[:12]}" + (f" ({facts})" if facts else "")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(value.items())) + "}"
    return str(value)


def _read(record: TrialRecord, name: str) -> Any:
    """An Environment field's value, or for ``field.key`` the entry ``key`` of a dict field."""
    head, _, key = name.partition(".")
    value = getattr(record.env, head, None)
    return value.get(key) if key and isinstance(value, dict) else value


def env_values(records: Iterable[TrialRecord], name: str) -> tuple[str, ...]:
    """The values of one Environment field (or ``field.key`` of a dict field) across ``records``
    (sorted, as shown)."""
    return tuple(sorted({_shown(_read(r, name)) for r in records}))


def _compared_fields(records: Iterable[TrialRecord]) -> list[str]:
    """Every Environment field, whatever it is (a field added later shows up with no change here); a dict
    field whose entries are themselves dicts (a binary per role: path, hash, version) split into one
    ``field.key`` per entry, so that a change names the entry that changed."""
    records = list(records)
    names: list[str] = []
    for name in ENV_FIELDS:
        values = [getattr(r.env, name, None) for r in records]
        nested = [v for v in values if isinstance(v, dict) and any(isinstance(e, dict) for e in v.values())]
        if nested:
            names += [f"{name}.{key}" for key in dict.fromkeys(k for v in nested for k in v)]
        else:
            names.append(name)
    return names


@dataclass(frozen=True)
class EnvChange:
    """One Environment field whose values differ between two sets of trials."""

    field: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    between: str = ""  # which trials, within one run: ``build base -> slow`` (empty between two runs)

    def format(self) -> str:
        text = f"{self.field}: {', '.join(self.before)} -> {', '.join(self.after)}"
        return f"[{self.between}] {text}" if self.between else text

    def __str__(self) -> str:
        return self.format()


def env_changes(before: Sequence[TrialRecord], after: Sequence[TrialRecord], between: str = "") -> list[EnvChange]:
    """Every Environment field (host, cpu_model, cores, kernel, qemu, libvirt, dpdk, accel, lab, pins,
    shared_cores, hugepages, and any field added later; a dict of dicts per entry) whose values in
    ``after`` differ from those in ``before``; ``between`` names the two sets when they are one run's."""
    changes = []
    for name in _compared_fields([*before, *after]):
        old, new = env_values(before, name), env_values(after, name)
        if old != new:
            changes.append(EnvChange(name, old, new, between))
    return changes


def shared_env(records: Sequence[TrialRecord], fields: Sequence[str] = ("host", "cpu_model", "accel", "lab")
               ) -> dict[str, str | None]:
    """What ``records`` ran on (the host, its CPU model, the accelerator, the lab): each field's one
    value, its values joined when they differ, None when none was recorded."""
    out: dict[str, str | None] = {}
    for name in fields:
        values = [v for v in env_values(records, name) if v != "unknown"]
        out[name] = ", ".join(values) or None
    return out


def dimension_problem(baseline: Sequence[TrialRecord], candidate: Sequence[TrialRecord]) -> str | None:
    """Why trials of one configuration cannot be compared across host, accelerator or lab, or None."""
    problems = []
    for name in ENV_DIMENSIONS:
        word = _DIMENSION_WORDS[name]
        old, new = env_values(baseline, name), env_values(candidate, name)
        for side, values in (("baseline", old), ("candidate", new)):
            if len(values) > 1:
                problems.append(f"the {side} mixes {word}s {', '.join(values)}")
        if len(old) == 1 == len(new) and old != new:
            problems.append(f"different {word}: {old[0]} vs {new[0]}")
    return "; ".join(problems) or None


# --------------------------------------------------------------------------------------------------
# busy strangers


def _strangers(record: TrialRecord) -> list[str]:
    """The busy strangers a trial named (:mod:`labctl.lab.busy`, ``details.busy_strangers``): ``name pid``."""
    found = record.details.get("busy_strangers") or []
    return list(dict.fromkeys(f"{s.get('name')} {s.get('pid')}" for s in found if isinstance(s, dict)))


def _busy_trials(records: Sequence[TrialRecord]) -> tuple[list[TrialRecord], list[TrialRecord]]:
    """(the successful trials, those of them that named busy strangers)."""
    ok = [r for r in records if r.status == "ok"]
    return ok, [r for r in ok if _strangers(r)]


def busy_side_note(name: str, records: Sequence[TrialRecord]) -> str | None:
    ok, busy = _busy_trials(records)
    return f"{name}: busy strangers in {len(busy)}/{len(ok)} trials" if busy else None


def busy_note(baseline: Sequence[TrialRecord], candidate: Sequence[TrialRecord]) -> str | None:
    """A note when successful trials ran with other processes busy on their CPUs (their figures may be
    theirs too), naming the side and the processes."""
    parts, names = [], []
    for side, records in (("baseline", baseline), ("candidate", candidate)):
        ok, busy = _busy_trials(records)
        if busy:
            parts.append(f"{len(busy)} of the {side}'s {len(ok)}")
            names += [n for r in busy for n in _strangers(r)]
    if not parts:
        return None
    names = list(dict.fromkeys(names))
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return (f"{' and '.join(parts)} trials ran with processes that are not labctl's busy on their CPUs "
            f"({shown}): a change may be theirs, not the software's")
