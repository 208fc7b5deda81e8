"""Which knobs vary across a set of trials, and grouping trials by them.

NIC knobs that vary in lock-step on every NIC ("guest.nics.0.queues" and "guest.nics.1.queues"
always equal) are shown as one knob, "guest.nics.*.queues".
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Iterable

from labctl.results.record import TrialRecord

_NIC = re.compile(r"^guest\.nics\.(\d+)\.(.+)$")


#: Environment fields a report splits rows by when they vary: trials of two hosts, accelerators or labs
#: are never pooled into one row.
ENV_DIMENSIONS = ("host", "accel", "lab")


def knob_value(record: TrialRecord, knob: str) -> Any:
    """The value of a (possibly '*') knob in a record; for '*', the value shared by every NIC;
    ``env.host``, ``env.accel`` and ``env.lab`` read the trial's environment."""
    if knob.startswith("env."):
        return getattr(record.env, knob[4:], None)
    if ".*." not in knob:
        return record.config.get(knob)
    prefix, field = knob.split(".*.", 1)
    values = {v for k, v in record.config.items() if (m := _NIC.match(k)) and m.group(2) == field}
    return values.pop() if len(values) == 1 else tuple(sorted(values, key=str))


def varying_knobs(records: Iterable[TrialRecord]) -> list[str]:
    """Knobs with more than one value across ``records``, NIC knobs collapsed where they move together."""
    records = list(records)
    if not records:
        return []
    keys: list[str] = []
    for record in records:
        for key in record.config:
            if key not in keys:
                keys.append(key)
    varying = [k for k in keys if len({repr(r.config.get(k)) for r in records}) > 1]
    collapsed: list[str] = []
    by_field: dict[str, list[str]] = {}
    for key in varying:
        match = _NIC.match(key)
        if match:
            by_field.setdefault(match.group(2), []).append(key)
    for key in varying:
        match = _NIC.match(key)
        if not match:
            collapsed.append(key)
            continue
        field = match.group(2)
        group = by_field[field]
        in_step = all(len({repr(r.config.get(k)) for k in group}) == 1 for r in records)
        all_nics = {k for k in keys if (m := _NIC.match(k)) and m.group(2) == field}
        if in_step and set(group) == all_nics:
            star = f"guest.nics.*.{field}"
            if star not in collapsed:
                collapsed.append(star)
        else:
            collapsed.append(key)
    collapsed += [f"env.{field}" for field in ENV_DIMENSIONS
                  if len({getattr(r.env, field) for r in records}) > 1]
    return collapsed


def group_by(records: Iterable[TrialRecord], knobs: list[str]) -> "OrderedDict[tuple, list[TrialRecord]]":
    """Records grouped by their values of ``knobs``, groups in first-seen order."""
    groups: OrderedDict[tuple, list[TrialRecord]] = OrderedDict()
    for record in records:
        key = tuple(knob_value(record, k) for k in knobs)
        groups.setdefault(key, []).append(record)
    return groups


def sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))
