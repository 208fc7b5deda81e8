"""How trial data becomes stored values: the metric names (scalar fields and flattened dict fields), an
environment's fingerprint, JSON text for the store, and trial status filters."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable
from typing import Any, get_origin

from labctl.errors import StoreError
from labctl.results.record import Environment, Metrics

TRIAL_STATUSES = ("ok", "failed", "aborted")

# Top-level Metrics fields that hold one number (the dict fields are flattened with a dotted prefix).
SCALAR_METRICS: tuple[str, ...] = tuple(
    name for name, field in Metrics.model_fields.items() if get_origin(field.annotation) is not dict
)
DICT_METRICS: tuple[str, ...] = tuple(n for n in Metrics.model_fields if n not in SCALAR_METRICS)


def metric_items(metrics: Metrics) -> dict[str, float]:
    """Every numeric metric of a trial as ``name -> value``: the scalar fields that are set, then the
    dict fields flattened (``drops.ring_full``, ``cpu.vswitch_pmd``, ``queue_shares.guest.port0.rxq1``).
    Booleans and non-finite values are left out."""
    out: dict[str, float] = {}
    for name in SCALAR_METRICS:
        value = getattr(metrics, name)
        if _is_number(value):
            out[name] = value
    for name in DICT_METRICS:
        for key, value in getattr(metrics, name).items():
            if _is_number(value):
                out[f"{name}.{key}"] = value
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def env_fingerprint(env: Environment) -> str:
    """A stable identity for an environment (same fields and values -> same fingerprint)."""
    text = json.dumps(env.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _json_default(obj: Any) -> Any:
    # numpy scalars and arrays (details often hold them), sets; anything else is a programming error
    if hasattr(obj, "item") and callable(obj.item):
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return obj.tolist()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def dumps(value: Any, what: str) -> str:
    """``value`` as JSON text for the store; ``what`` names it in the ``StoreError`` if it cannot be."""
    try:
        return json.dumps(value, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot store {what}: {exc}") from exc


def status_filter(status: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """The trial statuses a query keeps (``None``: every status); an unknown status is a ValueError."""
    if status is None:
        return None
    wanted = (status,) if isinstance(status, str) else tuple(status)
    unknown = [s for s in wanted if s not in TRIAL_STATUSES]
    if unknown:
        raise ValueError(f"unknown trial status {unknown[0]!r} (one of {', '.join(TRIAL_STATUSES)})")
    return wanted
