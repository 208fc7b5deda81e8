"""Knob paths ("guest.nics.0.queues", "guest.nics.*.queues"): reading, setting and crossing them."""

from __future__ import annotations

import copy
import itertools
from typing import Any, Iterable, Iterator

import yaml

from labctl.errors import KnobError


def _child_key(container: Any, part: str, path: str) -> Any:
    if isinstance(container, list):
        if not part.isdigit():
            raise KnobError(f"{path}: '{part}' is not a list index (use 0..{len(container) - 1} or *)")
        index = int(part)
        if index >= len(container):
            raise KnobError(f"{path}: index {index} out of range (the list has {len(container)} items)")
        return index
    if isinstance(container, dict):
        if part in container:
            return part
        if part.isdigit() and int(part) in container:
            return int(part)
        raise KnobError(f"{path}: no such knob '{part}' (allowed: {', '.join(map(str, container)) or 'none'})")
    raise KnobError(f"{path}: '{part}' goes below a value that has no fields")


def set_knob(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``path`` in the plain-dict profile ``data`` in place; ``*`` sets every list item."""
    parts = path.split(".")
    if not path or any(not p for p in parts):
        raise KnobError(f"{path!r}: a knob is a dotted path such as guest.nics.0.queues")
    if parts[0] == "sweep":
        raise KnobError(f"{path}: the sweep matrix itself cannot be a knob")

    def assign(container: Any, rest: list[str]) -> None:
        part = rest[0]
        if part == "*" and isinstance(container, list):
            if not container:
                raise KnobError(f"{path}: '*' over an empty list")
            for item in container:
                if len(rest) == 1:
                    raise KnobError(f"{path}: '*' must be followed by a field")
                assign(item, rest[1:])
            return
        if (
            isinstance(container, dict)
            and len(rest) == 1
            and part.isdigit()
            and all(isinstance(k, int) for k in container)
        ):
            # an index-keyed map (guest.pinning.vcpus): a new entry may be added
            container[int(part)] = value
            return
        key = _child_key(container, part, path)
        if len(rest) == 1:
            container[key] = value
        else:
            assign(container[key], rest[1:])

    assign(data, parts)


def get_knob(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if part == "*":
            raise KnobError(f"{path}: '*' cannot be read; name one index")
        node = node[_child_key(node, part, path)]
    return node


def parse_assignment(text: str) -> tuple[str, Any]:
    """Parse ``KNOB=VALUE`` from the command line; VALUE is read as a YAML scalar."""
    if "=" not in text:
        raise KnobError(f"--set {text!r}: expected KNOB=VALUE, e.g. guest.nics.0.queues=2")
    path, raw = text.split("=", 1)
    path = path.strip()
    try:
        value = yaml.safe_load(raw) if raw.strip() else raw
    except yaml.YAMLError:
        value = raw
    if isinstance(value, (dict, list)) or value is None:
        raise KnobError(f"--set {path}: value {raw!r} must be a number, true/false or a word")
    return path, value


def parse_selection(assignments: Iterable[str] | None, option: str = "--config") -> dict[str, Any]:
    """``["workload.burst=32", ...]`` (a selection of configurations, ``--config``) as knob -> value."""
    out = {}
    for text in assignments or []:
        if "=" not in text:
            raise KnobError(f"{option} {text!r}: expected KNOB=VALUE, e.g. workload.burst=32")
        try:
            knob, value = parse_assignment(text)
        except KnobError as exc:
            raise KnobError(str(exc).replace("--set", option, 1)) from None
        out[knob] = value
    return out


def crossed(sweep: dict[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """Every combination of the sweep matrix, in a stable order (first knob varies slowest)."""
    if not sweep:
        yield {}
        return
    names = list(sweep)
    for values in itertools.product(*(sweep[n] for n in names)):
        yield dict(zip(names, values))


def with_knobs(data: dict[str, Any], knobs: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``data`` with every knob applied."""
    result = copy.deepcopy(data)
    for path, value in knobs.items():
        set_knob(result, path, value)
    return result


#: Top-level profile fields that are not a trial's configuration: the sweep matrix, the table of builds
#: (each trial's binaries are recorded in its environment, ``env.binaries``), the recipes those are built by,
#: and the sweep's order.
NOT_CONFIG = ("sweep", "builds", "recipes", "order", "seed")


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """{'guest': {'vcpus': 2}} -> {'guest.vcpus': 2}; lists by index. The sweep, the builds table and the
    order are left out, and so is ``build`` when no build is chosen (the host's binaries: configurations
    recorded before builds existed pair with it)."""
    out: dict[str, Any] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if not prefix and (key in NOT_CONFIG or (key == "build" and value is None)):
                continue
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out.update(flatten(value, f"{prefix}{index}."))
    else:
        out[prefix[:-1]] = data
    return out


def short_label(items: Iterable[tuple[str, Any]], sep: str = ", ") -> str:
    """Knob settings by their last path part: ``rx_queue_size=1024, burst=64``."""
    return sep.join(f"{k.split('.')[-1]}={v}" for k, v in items)
