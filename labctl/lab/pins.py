"""Pins as requested by a profile (``LabPlan.pins``) against the pins applied, read back from the threads."""

from __future__ import annotations

from typing import Any

from labctl.host.cpuset import parse_cpuset


def pin_mismatches(requested: dict[str, Any], applied: dict[str, Any]) -> list[str]:
    """Requested pins that the threads do not have (an unpinned thread may run anywhere)."""
    problems = []
    for vcpu, want in requested.get("vcpus", {}).items():
        have = applied.get("threads", {}).get("vcpus", {}).get(int(vcpu))
        if have is not None and have != want:
            problems.append(f"vCPU {vcpu}: asked {want}, thread runs on {have}")
    want = requested.get("emulator")
    have = applied.get("threads", {}).get("emulator")
    if want and have is not None and have != want:
        problems.append(f"emulator: asked {want}, thread runs on {have}")
    want = requested.get("vhost")
    for name, have in applied.get("vswitch", {}).items():
        if want and not set(parse_cpuset(have)) <= set(parse_cpuset(want)):
            problems.append(f"{name}: asked {want}, runs on {have}")
    return problems
