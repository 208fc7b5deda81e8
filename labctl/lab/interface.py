"""What a measured lab provides: the one interface ``measure/`` and ``workload/`` type against.

Every lab a trial runs on (the embedded labs: pvp, OVS-DPDK, vm2vm; the libvirt guests: the DPDK
forwarder, behind OVS, two guests, the kernel stack) is up and forwarding when
:meth:`labctl.measure.labs.LabSession.acquire` hands it out. A trial then reads it through these
members only, as MLRsearch's ``AbstractMeasurer`` names the one call a search makes of a measurer.

Three narrower interfaces extend it for what only some labs do:

- :class:`PacedLab`: labgen is its host side (``generator`` not None): paced trials and NDR/PDR searches.
- :class:`SnapshotLab`: a testpmd host side (or vm2vm's two guests): counters before and after a window.
- :class:`KernelLab`: a kernel-stack guest (``workload.kind`` tcp_stream / tcp_rr): sessions and counters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from labctl.results.record import Environment, Metrics
    from labctl.lab.plan import LabPlan


@runtime_checkable
class MeasuredLab(Protocol):
    """A lab up and forwarding for its plan."""

    plan: LabPlan
    #: the lab's processes by role (vswitch, generator, guest, qemu, ...): the thread monitor and the
    #: busy watch read them
    pids: dict[str, int]
    #: set-up timings of this trial (seconds by phase), stored in the record's details
    timings: dict[str, float]
    #: labgen's driver when labgen is the host side, else None
    generator: Any
    #: the host side's port kind: vhost-user or af_packet
    host_kind: str

    @property
    def pollers(self) -> int:
        """Busy-polling cores of the lab (host side and guest)."""

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        """CPU seconds the guest's forwarding threads used in the window."""

    def pins(self) -> dict[str, str]:
        """The pins read back from the running threads (role.thread -> cpuset)."""

    def environment(self, pins: dict[str, str], shared: bool) -> Environment:
        """The record's environment (host, versions, accelerator, pins, sharing)."""

    def details(self) -> dict[str, Any]:
        """What the record's details say about the lab (host side, negotiated NICs, boot)."""

    def record_warnings(self) -> list[str]:
        """Warnings every record of this lab carries (TCG, negotiated differences)."""

    def window_started(self) -> None:
        """The measurement window opens (a host side with counters of its own clears them)."""

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        """(details, scalar metrics) the host side adds when the window closes."""

    def stop_forwarding(self) -> None:
        """Stop sending and forwarding at the window's end."""

    def zero_reason(self) -> str:
        """Where to look when the guest forwarded nothing."""

    def close(self) -> None:
        """Stop everything the lab started; never raises."""


@runtime_checkable
class PacedLab(MeasuredLab, Protocol):
    """A lab whose host side is labgen: ``paced`` runs a trial at a rate (:class:`labctl.workload.paced.PacedRunner`)."""

    paced: Any

    def guest_counters(self) -> Any:
        """The guest forwarder's counters now."""


@runtime_checkable
class SnapshotLab(MeasuredLab, Protocol):
    """A lab measured by two snapshots of its counters (testpmd host side, or vm2vm)."""

    def snapshot(self) -> Any:
        """Every counter the metrics need, now."""


@runtime_checkable
class PairLab(SnapshotLab, Protocol):
    """Two guests (vm2vm): the metrics come from the lab, what guest B received."""

    def metrics(self, before: Any, after: Any) -> tuple[Metrics, dict[str, Any]]:
        """Metrics and details of the window between two snapshots."""


@runtime_checkable
class KernelLab(MeasuredLab, Protocol):
    """A kernel-stack guest: tcp sessions between the host's tap and the guest (:mod:`labctl.workload.tcp`)."""

    host_addr: str
    guest_addr: str
    queues_enabled: int | None

    def start_servers(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        """Start one server per session on ``side`` (host or guest)."""

    def start_clients(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        """Start one client per session on ``side``."""

    def client_outputs(self, timeout_s: float) -> list[str]:
        """The clients' outputs, once they end (or ``timeout_s``)."""

    def stop_sessions(self) -> None:
        """Stop every server and client."""

    def monitored(self) -> dict[str, int]:
        """The processes the thread monitor watches over the window."""

    def counters(self) -> Any:
        """Host and guest counters (CPU, interrupts, per-queue packets) now."""
