"""What a measured lab provides: the one interface ``measure/`` and ``workload/`` type against.

Every lab a trial runs on (the embedded labs: pvp, OVS-DPDK, vm2vm; the libvirt guests: the DPDK
forwarder, behind OVS, two guests, the kernel stack) is up and forwarding when
:meth:`labctl.measure.labs.LabSession.acquire` hands it out. A trial then reads it through these
members only, as MLRsearch's ``AbstractMeasurer`` names the one call a search makes of a measurer.

Narrower interfaces extend it for what only some labs do:

- :class:`PacedLab`: labgen can be its host side (``generator`` not None): paced trials and NDR/PDR searches.
- :class:`SnapshotLab`: testpmd can be its host side (flowgen), or two guests: counters before and after
  a window.
- :class:`PairLab`: two guests (vm2vm): the lab computes the window's metrics (what guest B received).
- :class:`KernelLab`: a kernel-stack guest (``workload.kind`` tcp_stream / tcp_rr): sessions and counters.
- :class:`BootedLab`: a libvirt lab, booted once and kept up across the trials of one domain
  (:meth:`labctl.lab.plan.LabPlan.domain_key`), its NICs swapped in place between trials whose NIC settings
  differ (:meth:`labctl.lab.plan.LabPlan.boot_key` the same).

Which lab provides which (``tests/unit/lab/test_interface.py`` checks every member and its signature):

==================  =====  ========  ====  ======  ======
lab                 Paced  Snapshot  Pair  Kernel  Booted
==================  =====  ========  ====  ======  ======
EmbeddedLab         yes    yes
OvsEmbeddedLab      yes    yes
Vm2vmLab                   yes       yes
GuestLab            yes    yes                     yes
OvsGuestLab         yes                            yes
KernelGuestLab                             yes     yes
Vm2vmGuestLab              yes       yes           yes
ImageGuestLab       yes    yes                     yes
==================  =====  ========  ====  ======  ======

OvsGuestLab and KernelGuestLab inherit GuestLab's ``snapshot`` and ``paced`` but never use them: a
guest behind OVS is always fed by labgen, a kernel guest by tcp sessions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from labctl.dpdk.labgen import Labgen
    from labctl.lab.plan import LabPlan
    from labctl.results.record import Environment, Metrics
    from labctl.workload.forward import GuestCounters
    from labctl.workload.paced import PacedRunner
    from labctl.workload.tcp import Counters


@runtime_checkable
class MeasuredLab(Protocol):
    """A lab up and forwarding for its plan."""

    @property
    def plan(self) -> LabPlan:
        """This trial's plan."""

    @property
    def pids(self) -> dict[str, int]:
        """The lab's processes by role (vswitch, generator, guest, guestb, qemu, qemub): the thread
        monitor and the busy watch read them."""

    @property
    def timings(self) -> dict[str, float]:
        """Set-up timings of this trial (seconds by phase), stored in the record's details."""

    @property
    def generator(self) -> Labgen | None:
        """labgen's driver when labgen is the host side, else None."""

    @property
    def host_kind(self) -> str:
        """The host side's port kind: vhost-user, af_packet or ovs."""

    @property
    def pollers(self) -> int:
        """Busy-polling cores of the lab (host side and guest)."""

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        """CPU seconds the guest's forwarding threads used in the window (``report``: the thread monitor's)."""

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
    """A lab whose host side can be labgen: ``paced`` runs a trial at a rate when ``generator`` is set."""

    @property
    def paced(self) -> PacedRunner:
        """The paced trials' runner (:class:`labctl.workload.paced.PacedRunner`) over this lab."""

    def guest_counters(self) -> GuestCounters:
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

    @property
    def host_addr(self) -> str:
        """The host's address of the sessions."""

    @property
    def guest_addr(self) -> str:
        """The guest's address of the sessions."""

    @property
    def queues_enabled(self) -> int | None:
        """The queue pairs the guest's driver reports enabled (``ethtool -l``), None when unknown."""

    def start_servers(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        """Start one server per session on ``side`` (host or guest)."""

    def start_clients(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        """Start one client per session on ``side``."""

    def client_outputs(self, timeout_s: float) -> dict[int, str]:
        """Each session's client output (server port -> text), once they end (or ``timeout_s``)."""

    def stop_sessions(self) -> None:
        """Stop every server and client."""

    def monitored(self) -> dict[str, int]:
        """The processes the thread monitor watches over the window."""

    def counters(self) -> Counters:
        """Host and guest counters (CPU, interrupts, per-queue packets) now."""


@runtime_checkable
class BootedLab(MeasuredLab, Protocol):
    """A libvirt lab: booted once (``boot``), then kept up while the trials' domain stays the same
    (``key``: the boot's :meth:`~labctl.lab.plan.LabPlan.domain_key`); ``start`` begins a trial."""

    #: the trial's warnings list, handed in by the session before ``start`` (appended to as they happen)
    warnings: list[str]
    #: how this trial reached its configuration, set by the session before ``start``: ``{"how": "boot" |
    #: "hotplug" | "kept", "s": seconds}`` and, when a swap booted instead, ``"note"`` (``details()`` carries it)
    reached: dict[str, Any]

    @property
    def key(self) -> tuple:
        """The domain key of the boot: a plan with another needs another boot."""

    @property
    def domains(self) -> int:
        """libvirt domains a boot starts (vm2vm: 2)."""

    @property
    def boot_s(self) -> float:
        """Seconds the boot took."""

    def boot(self) -> None:
        """Define and start the domain(s) and the host side."""

    def swap_refusal(self, plan: LabPlan) -> str | None:
        """Why a swap of the NICs to ``plan``'s (same boot key) cannot be tried on this lab (None: it can)."""

    def swap(self, plan: LabPlan) -> float:
        """The running guest(s)' NICs swapped for ``plan``'s (same boot key, another domain key), the host side
        matched, the guest's view read back; ``key`` is ``plan``'s after it. Returns the seconds it took; a
        SwapError (or the guest side's LabFault) when it did not happen."""

    def start(self, plan: LabPlan | None = None) -> None:
        """Begin a trial of ``plan`` (same domain key; None: the boot's plan): live pins, forwarding."""

    def end_trial(self) -> None:
        """After a trial (also a failed one): forwarding stopped, the guest(s) stay up."""
