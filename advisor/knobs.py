"""The knob model of the advisor: the dimensions along which recorded trials vary.

A :class:`Knob` is a config key with more than one value among the trials: a tuning knob (a NIC field
set alike on every NIC, the pinning layout, or a plain key), a condition (:data:`CONDITION_KEYS`: the
workload or the measurement, never recommended) or an environment field (:data:`ENV_FIELDS`).
:func:`knob_groups` finds them, :func:`knob_space` lists their values; the rules are in the docstring of
:mod:`advisor.recommend` ("Knobs").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from labctl.profile.knobs import flatten
from labctl.profile.schema import Profile
from labctl.results.record import Environment, TrialRecord

__all__ = [
    "CONDITION_KEYS",
    "CONDITION_PREFIXES",
    "ENV_FIELDS",
    "Knob",
    "knob_groups",
    "knob_space",
]

#: Config keys that describe the workload, the measurement or the lab, not a tuning choice.
CONDITION_KEYS = frozenset({
    "name", "backend", "uri", "repeat", "workload.mode", "workload.packet_size", "workload.duration_s",
    "workload.warmup_s",
    # TCP: how many streams and which way they flow are the application's, not a setting to pick; the
    # queue and pinning advice is given per session count, as the posts' tables have sessions as rows
    "workload.kind", "workload.sessions", "workload.direction",
})
CONDITION_PREFIXES = ("workload.noisy.",)
ENV_FIELDS = ("host", "accel", "lab")

_MISSING = object()


# --------------------------------------------------------------------------------------------------
# knobs


@dataclass(frozen=True)
class Knob:
    """One dimension of the data: a tuning knob, a condition or an environment field.

    ``name`` is the knob path reported (``guest.nics.*.queues``, ``guest.pinning``, ``env.host``);
    ``paths`` the config keys it reads; ``kind`` one of ``nic``, ``pinning``, ``plain`` (tuning knobs),
    ``condition`` or ``env`` (never recommended).
    """

    name: str
    paths: tuple[str, ...]
    kind: str

    @property
    def tunable(self) -> bool:
        return self.kind in ("nic", "pinning", "plain")

    @property
    def short(self) -> str:
        return "pinning" if self.kind == "pinning" else self.name.rsplit(".", 1)[-1]

    def value_of(self, config: dict[str, Any], env: Environment | None = None) -> Any:
        """The hashable value of this knob in one trial."""
        if self.kind == "env":
            return getattr(env, self.paths[0], None) if env is not None else None
        if self.kind == "pinning":
            return tuple((p, config.get(p)) for p in self.paths)
        return config.get(self.paths[0])

    def json_value(self, value: Any) -> Any:
        if self.kind == "pinning":
            return {p: v for p, v in value}
        return value

    def settings(self, value: Any) -> dict[str, Any]:
        """Knob path -> value assignments (for :func:`labctl.profile.knobs.with_knobs`) that set ``value``."""
        if self.kind == "pinning":
            return {p: v for p, v in value}
        return {self.name: value}


def _nic_key(key: str) -> tuple[int, str] | None:
    parts = key.split(".")
    if len(parts) == 4 and parts[0] == "guest" and parts[1] == "nics" and parts[2].isdigit():
        return int(parts[2]), parts[3]
    return None


def _is_condition(key: str) -> bool:
    return key in CONDITION_KEYS or key.startswith(CONDITION_PREFIXES)


def _hashable(value: Any) -> Any:
    return value if not isinstance(value, (list, dict)) else repr(value)


def knob_groups(records: Iterable[TrialRecord]) -> list[Knob]:
    """The dimensions along which ``records`` vary (see the module docstring): tuning knobs first
    (sorted by name), then conditions, then environment fields."""
    records = list(records)
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r.config))
    varying = [k for k in keys if len({_hashable(r.config.get(k)) for r in records}) > 1]
    knobs: list[Knob] = []
    nic_fields: dict[str, list[str]] = {}
    for key in varying:
        nic = _nic_key(key)
        if nic is not None:
            nic_fields.setdefault(nic[1], []).append(key)
    for field_name, _ in sorted(nic_fields.items()):
        every = sorted((k for k in keys if (_nic_key(k) or (0, ""))[1] == field_name), key=lambda k: _nic_key(k)[0])
        alike = all(len({_hashable(r.config.get(k, _MISSING)) for k in every}) == 1 for r in records)
        if alike and len(every) > 1:
            knobs.append(Knob(f"guest.nics.*.{field_name}", tuple(every), "nic"))
        else:
            knobs.extend(Knob(k, (k,), "plain") for k in nic_fields[field_name])
    pinning = sorted(k for k in varying if k.startswith("guest.pinning."))
    if pinning:
        knobs.append(Knob("guest.pinning", tuple(pinning), "pinning"))
    for key in varying:
        if _nic_key(key) is None and not key.startswith("guest.pinning.") and not _is_condition(key):
            knobs.append(Knob(key, (key,), "plain"))
    knobs.sort(key=lambda k: k.name)
    conditions = sorted((Knob(k, (k,), "condition") for k in varying if _is_condition(k)), key=lambda k: k.name)
    envs = [Knob(f"env.{f}", (f,), "env") for f in ENV_FIELDS
            if len({getattr(r.env, f) for r in records}) > 1]
    return knobs + conditions + envs


def knob_space(records: Iterable[TrialRecord]) -> dict[str, list[Any]]:
    """The sweep space of recorded trials: tuning knob name -> its values in order of first appearance
    (pinning values as ``{path: value}`` dicts). Used by the replay search."""
    records = list(records)
    space: dict[str, list[Any]] = {}
    for knob in knob_groups(records):
        if not knob.tunable:
            continue
        seen: dict[Any, None] = {}
        for r in records:
            seen.setdefault(knob.value_of(r.config, r.env))
        space[knob.name] = [knob.json_value(v) for v in seen]
    return space


_DEFAULTS = flatten(Profile(name="defaults").model_dump())


def _default_of(knob: Knob) -> Any:
    if knob.kind == "nic":
        return _DEFAULTS.get(knob.paths[0], _MISSING)
    if knob.kind == "plain":
        return _DEFAULTS.get(knob.name, _MISSING)
    return _MISSING
