"""The doctor's report: this host's facts (:mod:`labctl.host.facts`) and, when probed, its steadiness
(:mod:`labctl.host.steadiness`), as one object and as the (label, text) lines a face shows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labctl.host.cpuset import format_cpuset

__all__ = ["Doctor", "describe_host"]


@dataclass
class Doctor:
    facts: Any
    steadiness: Any = None

    def to_dict(self) -> dict[str, Any]:
        data = self.facts.to_dict()
        if self.steadiness is not None:
            data["steadiness"] = self.steadiness.to_dict()
        return data


def describe_host(result: Doctor) -> list[tuple[str, str]]:
    """The doctor report as (label, text) lines: cpu, numa, isolated, hugepages, kvm, kernel, each
    version, each lab backend (``lab NAME``), labctl's Debian packages (``packages``, and ``install``: the one
    apt command for every missing one) and, when probed, the steadiness verdict."""
    if not isinstance(result, Doctor):
        raise TypeError(f"describe_host: expected a Doctor, got {type(result).__name__}")
    facts = result.facts
    lines = [
        ("cpu", f"{facts.cpu_model}, {len(facts.cpus)} online ({format_cpuset(facts.cpus)})"),
        ("numa", "; ".join(f"node{n}: {format_cpuset(c)}" for n, c in facts.numa_nodes.items())),
        ("isolated", format_cpuset(facts.isolated) if facts.isolated else "none"),
        ("hugepages", ", ".join(f"{p.size_kib // 1024} MiB x {p.total} ({p.free} free)" for p in facts.hugepages)),
        ("kvm", f"{'usable' if facts.kvm.usable else 'not usable'}: {facts.kvm.reason} -> {facts.kvm.accel}"),
        ("kernel", facts.kernel),
    ]
    lines += [(name, version or "not installed") for name, version in facts.versions.items()]
    lines += [(f"lab {name}", text) for name, text in facts.backends.items()]
    packages = getattr(facts, "packages", None)
    if packages is not None:
        lines.append(("packages", packages.describe()))
        if packages.command:
            lines.append(("install", packages.command))
    if result.steadiness is not None:
        lines.append(("steadiness", result.steadiness.describe()))
    return lines
