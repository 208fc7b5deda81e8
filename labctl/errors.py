"""Every exception labctl raises on purpose, in one tree.

LabError
├── UserError               bad input from the user; the CLI prints one line and exits 2, nothing is created
│   ├── ProfileError        a lab profile that cannot be read or is invalid (carries every problem)
│   ├── YamlProblem         a profile's text is not a small, plain YAML document (carries one problem)
│   ├── KnobError           a --set KNOB=VALUE or sweep knob that does not exist or has a bad value
│   ├── NotLiveError        a labctl reconf change the running lab cannot make live (knob and reason)
│   ├── PlanError           a request the host cannot satisfy (pinning plan, missing cores)
│   ├── NotAStoreError      --db names a file that is not a labctl result store (or a corrupted, newer one)
│   ├── ReadOnlyStoreError  --db names a store that cannot be written (a read-only file system)
│   ├── UnknownRunError     a run id the store does not hold
│   ├── RunBusyError        --resume of a run another labctl (alive) is still running
│   ├── ImportFormatError   an import file or line that is not a valid trial record
│   └── DomainXmlError      a domain XML (labctl apply) that is malformed, not a <domain>, or declares entities
└── LabFault                the lab misbehaved; the CLI prints one line and exits 1, results are kept
    ├── HypervisorError     libvirt or QEMU refused or failed
    ├── ApplianceError      the guest appliance could not be built (apt, dpkg, cpio, a missing file)
    ├── WorkloadError       a DPDK process failed to start, connect or forward
    │   └── ZeroForwardingError  the workload ran but forwarded nothing (e.g. vhost memory-table errors)
    ├── StateError          the ledger (state file) is unreadable or locked by another labctl
    ├── CpusBusyError       --no-wait: another trial is measuring on some of this trial's CPUs
    ├── StoreError          the SQLite result store failed
    ├── ProbeError          the host steadiness probe failed
    ├── GitFailed           git itself failed on a recipe's repository (not a revision that is missing)
    └── BuildError          a recipe's build of a commit failed (names the commit and its kept log)

Interrupted (a BaseException, like KeyboardInterrupt, so that no ``except Exception`` in clean-up
code swallows it; it is not a LabError: nothing went wrong, somebody asked labctl to stop)
├── Terminated              SIGTERM: the CLI says so in one line and exits 143
└── Cancelled               a face cancelled the work (the TUI's cancel key): exit 130
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


class YamlProblem(UserError):
    """A profile's text that is not a small, plain YAML document; ``problem`` says where and what."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(problem.render())


class KnobError(UserError):
    """A knob path or value that the profile schema does not allow."""


class NotLiveError(UserError):
    """A change ``labctl reconf`` cannot make on a running lab (it needs a restart, or this lab has no live
    path for it): refused before anything starts, naming the knob and the reason."""


class PlanError(UserError):
    """A request the host topology cannot satisfy."""


class NotAStoreError(UserError):
    """--db names a file that is not a labctl result store."""


class ReadOnlyStoreError(UserError):
    """A write to a store that is read-only (reports still read it)."""


class UnknownRunError(UserError):
    """The user named a run id that the store does not hold."""


class RunBusyError(UserError):
    """``--resume`` of a run that a live labctl is still running (its pid is in the message)."""


class ImportFormatError(UserError):
    """An import file that cannot be read, or a line that is not a valid trial record.

    The message is one line, ``FILE:LINE: field: problem``; ``source``, ``line`` and ``field`` carry
    the same facts for callers."""

    def __init__(self, source: str, line: int | None, field: str | None, problem: str):
        self.source, self.line, self.field, self.problem = source, line, field, problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


class DomainXmlError(UserError):
    """The domain XML given (``--xml FILE`` or a defined domain) is malformed, not a ``<domain>``, or declares
    entities; the message is one line naming the source."""


class LabFault(LabError):
    """The lab (libvirt, QEMU, DPDK, the host) failed; results already stored are kept."""

    exit_code = 1


class HypervisorError(LabFault):
    """libvirt refused an operation or QEMU failed."""


class ApplianceError(LabFault):
    """The appliance could not be built (apt, dpkg, a missing host file, cpio)."""


class GuestImageError(LabFault):
    """The guest disk image could not be built (mmdebstrap, a loop device, the file system, extlinux)."""


class WorkloadError(LabFault):
    """A DPDK process failed to start, connect or forward."""


class ZeroForwardingError(WorkloadError):
    """The workload ran but forwarded no packets; recorded as a failed trial, never as zero."""


class SwapError(HypervisorError):
    """A running guest's NICs could not be swapped in place (QEMU refused the device, the guest did not release
    the old NIC or show the new one within the bound): the run boots the guest instead, and says so."""


class AgentError(HypervisorError):
    """The QEMU guest agent of a user's image did not answer, or a command run through it failed."""


class GuestForwarderError(WorkloadError):
    """The user's guest forwarder (its testpmd or command) exited or never forwarded; the message carries
    its last output lines."""


class StateError(LabFault):
    """The state file is unreadable or held by another labctl."""


class CpusBusyError(LabFault):
    """``--no-wait``: CPUs of this trial are held by another trial measuring on this host."""


class StoreError(LabFault):
    """The result store failed."""


class ProbeError(LabFault):
    """The host steadiness probe (``labctl doctor --steadiness``) failed."""


class GitFailed(LabFault):
    """git itself failed on a repository (not a revision that is missing: those are answers, not failures)."""


class BuildError(LabFault):
    """A recipe's build of one commit failed or left no output; the message names the commit and the log
    kept (``commit`` and ``log`` carry them for a bisect, which skips such a commit)."""

    def __init__(self, message: str, commit: str = "", log: str = ""):
        super().__init__(message)
        self.commit = commit
        self.log = log


class Interrupted(BaseException):
    """labctl was asked to stop (a signal, or a face's cancel); clean-up runs, then the face exits."""

    exit_code = 130
    message = "interrupted"


class Terminated(Interrupted):
    """labctl received SIGTERM; the CLI reports it in one line and exits 143."""

    exit_code = 143
    message = "terminated by SIGTERM (cleaned up)"


class Cancelled(Interrupted):
    """A face cancelled the work in flight (the trial is torn down; a sweep can be resumed)."""

    exit_code = 130
    message = "cancelled (cleaned up)"
