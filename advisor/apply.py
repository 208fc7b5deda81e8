"""``labctl advise --apply``: a profile rewritten with the advice.

:func:`apply_advice` applies the recommendations of an :class:`advisor.advice.Advice` to a profile (a
plain dict, as read from YAML): the unconditional ones, and the conditional ones whose condition the
tuned profile meets or that are each other's condition; :func:`write_tuned` reads a profile file,
applies the advice and writes the tuned profile with a comment header that names what was applied
and why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from labctl.errors import UserError
from labctl.platform import TX_RING_CAP
from labctl.profile.knobs import flatten
from labctl.profile.schema import Profile

from advisor.advice import Advice, Recommendation, show_value
from advisor.facts import tx_ring_violation
from advisor.knobs import _MISSING

__all__ = [
    "apply_advice",
    "write_tuned",
]


# --------------------------------------------------------------------------------------------------
# --apply


def _child(node: Any, part: str) -> tuple[bool, Any]:
    """(exists, key) of ``part`` below ``node``: list index, dict key, or an int key of an index map."""
    if isinstance(node, list):
        return (part.isdigit() and int(part) < len(node)), (int(part) if part.isdigit() else part)
    if isinstance(node, dict):
        if part in node:
            return True, part
        if part.isdigit() and int(part) in node:
            return True, int(part)
        return False, (int(part) if part.isdigit() and all(isinstance(k, int) for k in node) and node else part)
    return False, part


def _materialize(data: Any, full: Any, parts: list[str]) -> None:
    """Create along ``parts`` what ``data`` (the user's profile) leaves out, taking it from ``full``
    (the same profile validated, every default filled in): lists are copied whole, mappings start
    empty and a leaf gets its default, so that only the knobs being set (and the NIC list) appear."""
    import copy

    if not parts or not isinstance(data, (dict, list)):
        return
    part, rest = parts[0], parts[1:]
    if part == "*":
        if isinstance(data, list):
            for i, item in enumerate(data):
                ref = full[i] if isinstance(full, list) and i < len(full) else None
                _materialize(item, ref, rest)
        return
    exists, key = _child(data, part)
    ref_exists, ref_key = _child(full, part) if full is not None else (False, part)
    ref = full[ref_key] if ref_exists else None
    if not exists:
        if isinstance(data, list) or ref is None and rest:
            return
        if not rest:
            if ref_exists:
                data[key] = copy.deepcopy(ref)
            return
        data[key] = copy.deepcopy(ref) if isinstance(ref, list) else {}
    _materialize(data[key], ref, rest)


def _apply_one(data: dict[str, Any], full: dict[str, Any], settings: dict[str, Any]) -> None:
    from labctl.profile.knobs import set_knob

    for path, value in settings.items():
        if path.startswith("guest.pinning.") and value is None:
            # unpinned in the measured layout: drop the pin (the default) rather than write null
            parts = path.split(".")
            node: Any = data
            for part in parts[:-1]:
                exists, key = _child(node, part)
                if not exists:
                    node = None
                    break
                node = node[key]
            if isinstance(node, dict):
                exists, key = _child(node, parts[-1])
                if exists:
                    del node[key]
            continue
        _materialize(data, full, path.split("."))
        set_knob(data, path, value)


def apply_advice(profile_data: dict[str, Any], advice: Advice) -> tuple[dict[str, Any], list[str]]:
    """The profile ``profile_data`` (a plain dict, as read from YAML) with the recommended settings
    applied and the sweep dropped; returns ``(data, notes)``, notes saying what was applied or skipped.

    Unconditional recommendations are applied; a conditional one when its condition holds in the
    tuned profile, or when two recommendations are each other's condition (queues 2 with split
    pinning, split pinning with queues 2: the pair is applied). A tx_queue_size above 256 is never
    written for a NIC whose backend is not vhost-user. The result is validated against the schema
    (:class:`labctl.profile.schema.Profile`); UserError if it is invalid."""
    import copy

    from pydantic import ValidationError

    try:
        full = Profile.model_validate(profile_data).model_dump()
    except ValidationError as exc:
        raise UserError(f"the profile to tune is invalid: {exc.errors()[0]['msg']}") from None
    data = copy.deepcopy(profile_data)
    data.pop("sweep", None)
    notes: list[str] = []
    applied: list[Recommendation] = []

    def current(knob_name: str, want: Any) -> bool:
        flat = flatten(Profile.model_validate(data).model_dump())
        if knob_name == "guest.pinning" and isinstance(want, dict):
            return all(flat.get(p) == v for p, v in want.items())
        if "*" in knob_name:
            head, tail = knob_name.split(".*.")
            values = [v for k, v in flat.items() if k.startswith(head + ".") and k.endswith("." + tail)]
            return bool(values) and all(v == want for v in values)
        return flat.get(knob_name, _MISSING) == want

    def apply(rec: Recommendation) -> None:
        _apply_one(data, full, rec.settings)
        applied.append(rec)
        cond = f" (with {', '.join(f'{k}={show_value(v)}' for k, v in rec.condition.items())})" if rec.condition else ""
        notes.append(f"applied {rec.knob} = {show_value(rec.value)}{cond}: {rec.metric} {rec.gain_pct:+.1f}%")

    pending = [r for r in advice.recommendations if r.condition]
    for rec in advice.recommendations:
        if not rec.condition:
            apply(rec)
    changed = True
    while changed and pending:
        changed = False
        for rec in list(pending):
            if all(current(k, v) for k, v in rec.condition.items()):
                apply(rec)
                pending.remove(rec)
                changed = True
        if changed:
            continue
        for rec in list(pending):
            mirror = next((o for o in pending if o is not rec and set(o.condition) == {rec.knob}
                           and set(rec.condition) == {o.knob} and o.condition[rec.knob] == rec.value
                           and rec.condition[o.knob] == o.value), None)
            if mirror is not None:
                apply(rec)
                apply(mirror)
                pending.remove(rec)
                pending.remove(mirror)
                changed = True
                break
    for rec in pending:
        cond = ", ".join(f"{k}={show_value(v)}" for k, v in rec.condition.items())
        notes.append(f"skipped {rec.knob} = {show_value(rec.value)}: only with {cond}, which the tuned profile "
                     "does not have")
    try:
        tuned = Profile.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"the tuned profile is invalid: {exc.errors()[0]['msg']}") from None
    pins = data.get("guest", {}).get("pinning", {}).get("vcpus")
    if isinstance(pins, dict):
        for index in sorted((i for i in pins if int(i) >= tuned.guest.vcpus), key=int):
            notes.append(f"dropped the pin of vCPU {index}: the tuned guest has {tuned.guest.vcpus} vCPUs")
            del pins[index]
    violations = tx_ring_violation(flatten(tuned.model_dump()))
    if violations:
        for index, size, backend in violations:
            set_to = {f"guest.nics.{index}.tx_queue_size": TX_RING_CAP}
            _apply_one(data, full, set_to)
            notes.append(f"kept guest.nics.{index}.tx_queue_size {TX_RING_CAP}, not {size}: backend {backend} "
                         f"caps it at {TX_RING_CAP} (needs vhostuser)")
    name = str(data.get("name", full["name"]))
    if not name.endswith("-tuned"):
        data["name"] = name[:34].rstrip("-") + "-tuned"
    return data, notes


def write_tuned(path_in: str | Path, advice: Advice, path_out: str | Path) -> list[str]:
    """Read the profile ``path_in``, apply ``advice`` (:func:`apply_advice`) and write ``path_out`` as
    YAML with a comment header naming every applied recommendation with its gain and rationale, and the
    skipped ones. Returns the notes. The written profile is validated like any profile (rules
    included) by reading it back; ProfileError if it is not valid here."""
    import yaml

    from labctl.profile.load import load_profile
    from labctl.errors import YamlProblem
    from labctl.profile.yamlsrc import load_yaml

    source = Path(path_in)
    try:
        data, _lines = load_yaml(source.read_bytes())
    except YamlProblem as exc:
        from labctl.errors import ProfileError

        raise ProfileError(str(source), [exc.problem]) from None
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror}") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: a profile is a YAML mapping")
    tuned, notes = apply_advice(data, advice)
    header = [f"# Tuned by labctl advise from {source.name}."]
    for rec in advice.recommendations:
        header.append(f"# {rec.knob} = {show_value(rec.value)}: {rec.metric} {rec.gain_pct:+.1f}%"
                      + (f" [{rec.ci_pct[0]:+.1f}, {rec.ci_pct[1]:+.1f}]" if rec.ci_pct else ""))
        header.append(f"#   {rec.rationale}")
    header.extend(f"# {note}" for note in notes)
    for inc in advice.inconclusive:
        header.append(f"# inconclusive: {inc.knob}: {inc.reason}")
    for warning in advice.warnings:
        header.append(f"# warning: {warning}")
    text = "\n".join(header) + "\n" + yaml.safe_dump(tuned, sort_keys=False, default_flow_style=False)
    out = Path(path_out)
    out.write_text(text, encoding="utf-8")
    load_profile(out)
    return notes
