"""The exception tree of labctl.

LabError
├── UserError            bad input from the user; the CLI prints one line and exits 2
│   ├── ProfileError     a lab profile that cannot be read or is invalid (carries every problem)
│   ├── KnobError        a --set KNOB=VALUE or sweep knob that does not exist or has a bad value
│   └── PlanError        a request the host cannot satisfy (pinning plan, missing cores)
└── LabFault             the lab misbehaved; the CLI prints one line and exits 1, results are kept
    ├── HypervisorError  libvirt or QEMU refused or failed
    ├── WorkloadError    a DPDK process failed to start, connect or forward
    │   └── ZeroForwardingError  the workload ran but forwarded nothing (e.g. vhost memory-table errors)
    ├── StateError       the state file is unreadable or locked by another labctl
    ├── StoreError       the SQLite result store failed
    └── ProbeError       the host steadiness probe failed
"""

from __future__ import annotations

from dataclasses import dataclass


class LabError(Exception):
    """Root of every error labctl raises on purpose."""

    exit_code = 1


class UserError(LabError):
    """Bad input: reported as one line, exit code 2, nothing created."""

    exit_code = 2


@dataclass(frozen=True)
class Problem:
    """One problem found in a profile: where (dotted path), what, and how bad."""

    path: str
    message: str
    severity: str = "error"  # error | warning
    line: int | None = None

    def render(self, source: str | None = None) -> str:
        where = f"{source}: " if source else ""
        line = f"line {self.line}: " if self.line else ""
        prefix = "warning: " if self.severity == "warning" else ""
        path = f"{self.path}: " if self.path else ""
        return f"{where}{line}{prefix}{path}{self.message}"


class ProfileError(UserError):
    """A profile that cannot be loaded or validated; holds every problem found."""

    def __init__(self, source: str, problems: list[Problem]):
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))


class KnobError(UserError):
    """A knob path or value that the profile schema does not allow."""


class PlanError(UserError):
    """A request the host topology cannot satisfy."""


class LabFault(LabError):
    """The lab (libvirt, QEMU, DPDK, the host) failed; results already stored are kept."""

    exit_code = 1


class HypervisorError(LabFault):
    """libvirt refused an operation or QEMU failed."""


class WorkloadError(LabFault):
    """A DPDK process failed to start, connect or forward."""


class ZeroForwardingError(WorkloadError):
    """The workload ran but forwarded no packets; recorded as a failed trial, never as zero."""


class StateError(LabFault):
    """The state file is unreadable or held by another labctl."""


class StoreError(LabFault):
    """The result store failed."""


class ProbeError(LabFault):
    """The host steadiness probe (``labctl doctor --steadiness``) failed."""
