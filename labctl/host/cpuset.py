"""Host CPU sets in the kernel's list syntax ("0-3,6,^2"), as libvirt's cpuset attribute uses."""

from __future__ import annotations

import re

_ITEM = re.compile(r"^(\^)?(\d{1,4})(?:-(\d{1,4}))?$")


def parse_cpuset(text: str) -> frozenset[int]:
    """Parse "0-3,^2,6" into {0, 1, 3, 6}; raise ValueError with a one-line reason."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty cpuset (expected a list such as '0', '1-3' or '0,2')")
    included: set[int] = set()
    excluded: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        match = _ITEM.match(item)
        if not match:
            raise ValueError(f"bad cpuset item {item!r} (expected N, N-M or ^N)")
        negate, start, end = match.group(1), int(match.group(2)), match.group(3)
        stop = int(end) if end is not None else start
        if stop < start:
            raise ValueError(f"bad cpuset range {item!r} (end before start)")
        (excluded if negate else included).update(range(start, stop + 1))
    cpus = included - excluded
    if not cpus:
        raise ValueError(f"cpuset {text!r} selects no CPU")
    return frozenset(cpus)


def format_cpuset(cpus: frozenset[int] | set[int] | list[int]) -> str:
    """Format {0, 1, 2, 5} as "0-2,5"."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def online_cpus() -> frozenset[int]:
    """The host CPUs that are online now."""
    try:
        with open("/sys/devices/system/cpu/online", encoding="ascii") as handle:
            return parse_cpuset(handle.read().strip())
    except (OSError, ValueError):
        import os

        return frozenset(range(os.cpu_count() or 1))
