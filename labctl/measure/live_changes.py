"""What a running lab can change live, how it is changed, and what it became (read back).

``labctl reconf`` holds a paced load on a lab and makes one change while the traffic runs; this module says
which changes a lab of a given shape can make without a restart (:func:`plan_changes`, before anything starts:
a change that needs a restart, or has no live path here, is a :class:`~labctl.errors.NotLiveError` naming the
knob and the reason, exit 2), and makes them on the running lab (:meth:`LiveAction.apply`), then reads back
what the lab now runs with (:meth:`LiveAction.read_back`: from the process, the kernel or the switch, never
from the request).

=========================================  =================================  ===========================================
change                                     lab                                how, and what is read back
=========================================  =================================  ===========================================
``workload.rxd`` / ``workload.txd``        embedded (testpmd or OVS vswitch)  the guest testpmd: ``stop``, ``port stop all``,
                                                                              ``port config all rxd|txd N``, ``port start
                                                                              all``, ``start``; ``show config rxtx``
``workload.burst``                         embedded                           ``stop``, ``set burst N``, ``start``; ``show
                                                                              config rxtx`` (packets/burst)
``guest.pinning.vhost`` (OVS's PMDs)       ``vswitch.kind: ovs-dpdk``         ``other_config:pmd-cpu-mask``; the PMDs in
                                                                              ``pmd-rxq-show`` and their threads' affinity
``vswitch.pmd_rxq_rebalance=now``          ``vswitch.kind: ovs-dpdk``         ``dpif-netdev/pmd-rxq-rebalance``; the rx
                                                                              queue placement after it
``guest.pinning.vcpus.N``,                 libvirt guests                     ``virDomainPinVcpuFlags`` /
``guest.pinning.emulator``                                                    ``virDomainPinEmulator`` live (the path
                                                                              ``labctl apply`` takes); the QEMU threads'
                                                                              affinity from /proc
``workload.guest_queues``                  a kernel guest (tcp kinds)         ``QUEUES`` on the appliance's channel: ``ethtool
                                                                              -L IF combined N`` in the guest; ``ethtool -l``
                                                                              read in the guest after it
``labctl apply`` of a run's advice         libvirt guests                     :func:`labctl.domain_edit.live.apply_live` on
                                                                              the lab's domain (pins live; a change that
                                                                              needs a restart is refused); the pins from /proc
``--exec ARGV``                            any                                the argv run as is (never a shell); its exit
                                                                              code and last output lines
=========================================  =================================  ===========================================

What is not live, and why (the reasons :func:`plan_changes` gives): the guest's memory, vCPUs and hugepages and
its NICs' backend, queues and rings are set when QEMU starts (:func:`labctl.lab.plan.is_domain_knob`: a new
boot); a build is another binary (the processes restart); the vswitch's other settings and the generator are
its start-up configuration; the frame size and the rate are the traffic, not the lab. On a libvirt guest the
appliance's control channel passes testpmd commands but reads none of its settings back, so the forwarder's
rings are live only on the embedded lab here. A kernel guest carries no labgen frames (virtio_net, not a
forwarder, owns its NIC): reconf counts its loss with iperf3's numbered UDP datagrams instead
(:mod:`labctl.workload.udp`), to 0.1 s. vhost-net worker pins need ``/dev/vhost-net``, which this host lacks.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from labctl.errors import NotLiveError, ProfileError, UserError
from labctl.host.cpuset import format_cpuset, online_cpus, parse_cpuset

if TYPE_CHECKING:
    from labctl.lab.plan import LabPlan
    from labctl.profile.load import LoadedProfile

#: The live changes, by knob (``guest.pinning.vcpus.N`` stands for every vCPU index).
LIVE_KNOBS = ("workload.rxd", "workload.txd", "workload.burst", "guest.pinning.vhost", "vswitch.pmd_rxq_rebalance",
              "guest.pinning.vcpus.N", "guest.pinning.emulator", "workload.guest_queues")
#: Forwarder settings the embedded lab's guest testpmd changes on its running ports.
FORWARDER_KNOBS = ("workload.rxd", "workload.txd", "workload.burst")
REBALANCE = "vswitch.pmd_rxq_rebalance"
#: What soak cannot measure on a kernel guest, with the reason.
NOT_MEASURABLE = ("a kernel guest (workload.kind tcp_stream or tcp_rr) carries no labgen frames: its NIC is the "
                  "kernel driver's, not a forwarder's")
EXEC_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Change:
    """One ``--change KNOB=VALUE`` as asked."""

    knob: str
    value: Any

    @property
    def text(self) -> str:
        return f"{self.knob}={self.value}"


class LiveAction(Protocol):
    """One change on a running lab: what it is (``knobs``: ``knob=value`` texts, normalised, so that ``labctl
    apply --dry-run`` finds a reconf of the same change), how it is made, what it became."""

    @property
    def label(self) -> str:
        """The change in words."""

    @property
    def knobs(self) -> list[str]:
        """``knob=value`` per setting changed (``[]`` for a command)."""

    def apply(self, lab: Any) -> list[str]:
        """Make the change on the running lab; one line per step done."""

    def read_back(self, lab: Any) -> dict[str, Any]:
        """What the lab runs with now, read from it."""

    def cleanup(self, lab: Any) -> None:
        """After the trial: anything the change left outside the lab (never raises)."""


def _refuse(knob: str, value: Any, reason: str) -> NotLiveError:
    return NotLiveError(f"--change {knob}={value}: cannot be made live here: {reason} (allowed: "
                        f"{', '.join(LIVE_KNOBS)}, or --exec ARGV; a restart is a new trial: labctl run --set)")


def restart_reason(knob: str) -> str | None:
    """Why ``knob`` needs a restart on every lab (None: it may be live somewhere)."""
    if knob in ("backend", "uri", "name", "topology", "build") or knob.startswith("builds."):
        return "it names another lab or another binary: the processes restart"
    if knob.startswith("guest.nics."):
        return "a NIC's backend, queues and rings are the device's: set when QEMU (or the embedded guest) starts"
    if knob in ("guest.memory_mib", "guest.vcpus", "guest.hugepages") or knob.startswith(("guest.image", "guest.boot")):
        return "the guest's memory, vCPUs, hugepages and disk are set when it starts"
    if knob.startswith("vswitch.") and knob != REBALANCE:
        return "the vswitch's settings are its start-up configuration"
    if knob in ("workload.generator", "workload.kind", "workload.forwarder", "workload.command", "workload.mode"):
        return "the workload's kind, its generator and the forwarder's mode are chosen when they start"
    if knob in ("workload.packet_size", "workload.rate", "workload.pacing", "workload.duration_s",
                "workload.warmup_s", "workload.sessions", "workload.direction", "workload.noisy") or \
            knob.startswith("workload.noisy."):
        return "the traffic itself or the trial's timing, not a setting of the running lab"
    return None


def _parse(text: str) -> Change:
    from labctl.profile.knobs import parse_assignment

    try:
        knob, value = parse_assignment(text)
    except UserError as exc:
        raise UserError(f"--change {text}: {exc} (allowed: KNOB=VALUE)") from None
    return Change(knob, value)


def parse_changes(texts: list[str]) -> list[Change]:
    """``--change`` arguments as changes; one knob at most once."""
    changes = [_parse(text) for text in texts]
    seen: set[str] = set()
    for change in changes:
        if change.knob in seen:
            raise UserError(f"--change {change.knob}: given twice (allowed: each knob once)")
        seen.add(change.knob)
    return changes


def _validated(loaded: LoadedProfile, change: Change) -> None:
    """A profile knob's new value checked by the profile's own rules (the same one-line problems)."""
    from labctl.profile.knobs import with_knobs
    from labctl.profile.load import validate_data

    try:
        validate_data(with_knobs(loaded.profile.model_dump(), {change.knob: change.value}), loaded.source)
    except ProfileError as exc:
        first = exc.problems[0] if exc.problems else None
        reason = first.render() if first is not None else str(exc)
        raise UserError(f"--change {change.text}: {reason}") from None


def _cpus(change: Change) -> frozenset[int]:
    try:
        cpus = parse_cpuset(str(change.value))
    except (ValueError, UserError):
        raise UserError(f"--change {change.text}: not a CPU set (allowed: 0, 1, 0-1, ...)") from None
    online = online_cpus()
    if not cpus or not cpus <= online:
        raise UserError(f"--change {change.text}: CPUs not online (allowed: {format_cpuset(online)})")
    return frozenset(cpus)


def plan_changes(loaded: LoadedProfile, plan: LabPlan, changes: list[Change]) -> list[LiveAction]:
    """The actions of ``changes`` on a lab of ``plan``'s shape, every one checked before anything starts:
    a change with no live path here is a NotLiveError (exit 2) naming the knob and the reason."""
    actions: list[LiveAction] = []
    vcpus: dict[int, frozenset[int]] = {}
    emulator: frozenset[int] | None = None
    for change in changes:
        knob, value = change.knob, change.value
        reason = restart_reason(knob)
        if reason is not None:
            raise _refuse(knob, value, reason)
        if knob in FORWARDER_KNOBS:
            if plan.lab != "embedded" or plan.topology != "pvp":
                raise _refuse(knob, value, "the forwarder's rings and burst are live only on the embedded lab's pvp "
                                           "guest here (a libvirt guest's control channel passes testpmd commands "
                                           "but reads none of its settings back)")
            _validated(loaded, change)
            actions.append(_forwarder_action(plan, change))
        elif knob == "workload.guest_queues":
            if plan.tcp is None:
                raise _refuse(knob, value, "the queue count of the guest's kernel driver: a kernel guest's (workload.kind "
                                           "tcp_stream or tcp_rr); a DPDK forwarder's queues are its start-up options")
            _validated(loaded, change)
            actions.append(GuestQueues(int(value), plan.nics[0].mac))
        elif knob == "guest.pinning.vhost":
            if plan.vswitch.kind != "ovs-dpdk":
                why = ("on the testpmd vswitch labgen is the host side: its lcores are the measuring instrument"
                       if plan.lab == "embedded" or plan.vhostuser_nics else
                       "vhost-net worker threads need /dev/vhost-net, which this host lacks")
                raise _refuse(knob, value, why)
            actions.append(OvsPmdMove(_cpus(change)))
        elif knob == REBALANCE:
            if plan.vswitch.kind != "ovs-dpdk":
                raise _refuse(knob, value, "only OVS-DPDK (vswitch.kind ovs-dpdk) has PMDs to rebalance")
            if str(value).lower() not in ("now", "true", "1"):
                raise UserError(f"--change {change.text}: a rebalance has no value (allowed: {REBALANCE}=now)")
            actions.append(OvsRebalance())
        elif knob.startswith("guest.pinning.vcpus.") or knob == "guest.pinning.emulator":
            if plan.lab != "libvirt" or plan.topology != "pvp":
                raise _refuse(knob, value, "vCPU and emulator pins are QEMU threads': live on a libvirt pvp guest "
                                           "(the embedded guest's lcores are fixed when its EAL starts)")
            if knob == "guest.pinning.emulator":
                emulator = _cpus(change)
                continue
            index = knob.rsplit(".", 1)[1]
            if not index.isdigit() or int(index) >= plan.vcpus:
                raise UserError(f"--change {change.text}: no such vCPU (allowed: guest.pinning.vcpus.0.."
                                f"{plan.vcpus - 1})")
            vcpus[int(index)] = _cpus(change)
        else:
            raise _refuse(knob, value, "no live path for it on a running lab")
    if vcpus or emulator is not None:
        actions.append(GuestPins(vcpus, emulator))
    return actions


def _forwarder_action(plan: LabPlan, change: Change) -> LiveAction:
    knob, value = change.knob, int(change.value)
    if knob == "workload.burst":
        return ForwarderBurst(value)
    rings = [n.rx_ring if knob == "workload.rxd" else n.tx_ring for n in plan.nics]
    ring = "rx_queue_size" if knob == "workload.rxd" else "tx_queue_size"
    if value > min(rings):
        raise _refuse(knob, value, f"the NICs' rings hold {min(rings)} descriptors (guest.nics.*.{ring}); a larger "
                                   "ring is the device's and needs a restart")
    return ForwarderRings("rxd" if knob == "workload.rxd" else "txd", value, plan.nics)


class InLab:
    """A change that leaves nothing outside the lab (it goes with the lab's teardown)."""

    def cleanup(self, lab: Any) -> None:
        """Nothing to do."""


# ---- the embedded guest's testpmd --------------------------------------------------------------------

_PORT = re.compile(r"^\s*port (\d+): RX queue number")
_DESCRIPTORS = {"rxd": re.compile(r"RX desc=(\d+)"), "txd": re.compile(r"TX desc=(\d+)")}
_BURST = re.compile(r"packets/burst=(\d+)")


def descriptors(text: str, which: str) -> dict[int, int]:
    """Each port's descriptors of its first queue in ``show config rxtx`` (testpmd 22.11 config.c
    rxtx_config_display: the ring size the driver reports, else, as for virtio_user, whose PMD has no queue
    info (rte_eth_rx_queue_info_get: -ENOTSUP), the size testpmd set the running queue up with)."""
    found: dict[int, int] = {}
    port = None
    for line in text.splitlines():
        if (match := _PORT.match(line)) is not None:
            port = int(match.group(1))
        elif port is not None and port not in found and (match := _DESCRIPTORS[which].search(line)):
            found[port] = int(match.group(1))
    return found


def _testpmd(lab: Any) -> Any:
    guest = getattr(lab, "guest", None)
    if guest is None or not hasattr(guest, "command"):
        raise UserError("this lab has no guest testpmd to change (allowed: an embedded pvp lab)")
    return guest


def _run_all(proc: Any, commands: list[str]) -> list[str]:
    """testpmd commands in order; one line per command with what testpmd said that looks like a failure."""
    from labctl.errors import WorkloadError

    lines = []
    for command in commands:
        said = proc.command(command, timeout_s=60.0)
        trouble = [ln.strip() for ln in said.splitlines() if re.search(r"(?i)fail|error|invalid|cannot", ln)]
        if trouble:
            raise WorkloadError(f"guest testpmd: {command}: {trouble[-1]}")
        lines.append(f"guest testpmd: {command}")
    return lines


@dataclass(frozen=True)
class ForwarderRings(InLab):
    """The guest testpmd's rx or tx descriptors on its running ports (port stop, config, start)."""

    which: str  # rxd | txd
    value: int
    nics: tuple[Any, ...]

    @property
    def label(self) -> str:
        return f"workload.{self.which} -> {self.value} (guest testpmd: port stop, config, start)"

    @property
    def knobs(self) -> list[str]:
        return [f"workload.{self.which}={self.value}"]

    def apply(self, lab: Any) -> list[str]:
        return _run_all(_testpmd(lab), ["stop", "port stop all", f"port config all {self.which} {self.value}",
                                        "port start all", "start"])

    def read_back(self, lab: Any) -> dict[str, Any]:
        found = descriptors(_testpmd(lab).command("show config rxtx"), self.which)
        return {f"port{port}.{self.which}": found.get(port) for port in range(len(self.nics))}



@dataclass(frozen=True)
class ForwarderBurst(InLab):
    """The guest testpmd's burst (forwarding stopped and started around it)."""

    value: int

    @property
    def label(self) -> str:
        return f"workload.burst -> {self.value} (guest testpmd: stop, set burst, start)"

    @property
    def knobs(self) -> list[str]:
        return [f"workload.burst={self.value}"]

    def apply(self, lab: Any) -> list[str]:
        return _run_all(_testpmd(lab), ["stop", f"set burst {self.value}", "start"])

    def read_back(self, lab: Any) -> dict[str, Any]:
        match = _BURST.search(_testpmd(lab).command("show config rxtx"))
        return {"burst": int(match.group(1)) if match else None}



# ---- OVS-DPDK -----------------------------------------------------------------------------------------

def _switch(lab: Any) -> Any:
    switch = getattr(lab, "switch", None)
    if switch is None:
        raise UserError("this lab runs no OVS-DPDK (allowed: vswitch.kind ovs-dpdk)")
    return switch


def _placement(placement: dict[str, Any]) -> dict[str, list[str]]:
    """``{core: ["vm0.0", ...]}``: which PMD polls which rx queue."""
    return {core: [f"{q['port']}.{q['queue']}" for q in pmd["rxqs"]] for core, pmd in placement["pmds"].items()}


def _pmd_threads(lab: Any) -> dict[str, str]:
    """OVS's PMD threads (``pmd-c<core>/id:<n>``) and their affinity, from /proc."""
    from labctl.host.threads import named_thread_pins

    pid = _switch(lab).pid("ovs-vswitchd")
    return named_thread_pins(pid, "pmd") if pid else {}


@dataclass(frozen=True)
class OvsPmdMove(InLab):
    """OVS's PMDs moved to other cores (``pmd-cpu-mask``); labgen's own workers stay where they are."""

    cpus: frozenset[int]

    @property
    def label(self) -> str:
        return f"OVS pmd-cpu-mask -> CPUs {format_cpuset(self.cpus)}"

    @property
    def knobs(self) -> list[str]:
        return [f"guest.pinning.vhost={format_cpuset(self.cpus)}"]

    def apply(self, lab: Any) -> list[str]:
        from labctl.lab.ovs.commands import cpu_mask

        placement = _switch(lab).move_pmds(self.cpus)
        return [f"ovs-vsctl set Open_vSwitch . other_config:pmd-cpu-mask={cpu_mask(self.cpus)}",
                f"PMDs polling: cores {', '.join(sorted(placement['pmds'], key=int))}"]

    def read_back(self, lab: Any) -> dict[str, Any]:
        return {"pmd_rxqs": _placement(_switch(lab).pmd_placement()), "pmd_threads": _pmd_threads(lab)}



@dataclass(frozen=True)
class OvsRebalance(InLab):
    """``dpif-netdev/pmd-rxq-rebalance`` now."""

    @property
    def label(self) -> str:
        return "OVS dpif-netdev/pmd-rxq-rebalance"

    @property
    def knobs(self) -> list[str]:
        return [f"{REBALANCE}=now"]

    def apply(self, lab: Any) -> list[str]:
        placement = _switch(lab).rebalance()
        return ["ovs-appctl dpif-netdev/pmd-rxq-rebalance",
                "placement: " + "; ".join(f"core {c}: {', '.join(q) or 'none'}" for c, q in _placement(placement).items())]

    def read_back(self, lab: Any) -> dict[str, Any]:
        return {"pmd_rxqs": _placement(_switch(lab).pmd_placement()), "pmd_threads": _pmd_threads(lab)}



# ---- a libvirt guest's QEMU threads --------------------------------------------------------------------

def _domain(lab: Any) -> Any:
    domain = getattr(lab, "domain", None)
    if domain is None or getattr(domain, "dom", None) is None:
        raise UserError("this lab has no running libvirt domain (allowed: a libvirt guest)")
    return domain


def qemu_pins(lab: Any) -> dict[str, Any]:
    """The running QEMU's vCPU and emulator threads' affinity, from /proc."""
    from labctl.host.threads import qemu_thread_pins

    pid = _domain(lab).qemu_pid
    if not pid:
        return {}
    pins = qemu_thread_pins(pid)
    return {**{f"vcpu{n}": cpus for n, cpus in sorted(pins["vcpus"].items())}, "emulator": pins["emulator"]}


@dataclass(frozen=True)
class GuestPins(InLab):
    """vCPU and emulator pins of the running domain, live (what ``labctl apply`` does to a running domain)."""

    vcpus: dict[int, frozenset[int]] = field(default_factory=dict)
    emulator: frozenset[int] | None = None

    @property
    def label(self) -> str:
        parts = [f"vCPU {v} -> CPUs {format_cpuset(c)}" for v, c in sorted(self.vcpus.items())]
        if self.emulator is not None:
            parts.append(f"emulator -> CPUs {format_cpuset(self.emulator)}")
        return "live pins: " + ", ".join(parts)

    @property
    def knobs(self) -> list[str]:
        out = [f"guest.pinning.vcpus.{v}={format_cpuset(c)}" for v, c in sorted(self.vcpus.items())]
        return out + ([f"guest.pinning.emulator={format_cpuset(self.emulator)}"] if self.emulator is not None else [])

    def apply(self, lab: Any) -> list[str]:
        from labctl.lab.libvirt import hypervisor

        domain = _domain(lab)
        hypervisor.pin_live(domain.dom, dict(self.vcpus), self.emulator, max(online_cpus()) + 1)
        return [f"virDomainPinVcpuFlags/PinEmulator (live): {self.label.split(': ', 1)[1]}"]

    def read_back(self, lab: Any) -> dict[str, Any]:
        return qemu_pins(lab)



@dataclass(frozen=True)
class DomainChanges:
    """``labctl apply`` of a change set (a run's advice) to the lab's own running domain: the new XML defined,
    the pins applied live. The original XML ``labctl apply`` keeps is removed afterwards: the domain is the
    lab's, undefined at its teardown."""

    changes: Any  # labctl.domain_edit.changes.Changes
    uri: str
    source: str  # "the advice of run N"
    notes: list[str] = field(default_factory=list)  # what of the advice was left out, and why

    @property
    def label(self) -> str:
        return f"labctl apply of {self.source}: {', '.join(self.knobs)}"

    @property
    def knobs(self) -> list[str]:
        return list(self.changes.knobs())

    def apply(self, lab: Any) -> list[str]:
        from labctl.domain_edit.live import apply_live

        result = apply_live(_domain(lab).dom.name(), self.uri, self.changes)
        return list(self.notes) + list(result.applied_live) + [f"defined: {line}" for line in result.edit.lines] + \
            list(result.notes)

    def read_back(self, lab: Any) -> dict[str, Any]:
        return qemu_pins(lab)

    def cleanup(self, lab: Any) -> None:
        from labctl.domain_edit import originals

        with contextlib.suppress(Exception):
            originals.remove(_domain(lab).dom.UUIDString())


def check_domain_changes(changes: Any, xml: str, source: str) -> None:
    """Before anything starts: a change set whose edit of the lab's domain XML needs a restart (NIC queues or
    rings, hugepages) or pins vhost threads (labctl's qemu hook, installed host-wide) is refused."""
    from labctl.domain_edit.edit import apply_changes

    if getattr(changes, "vhostpin", None):
        raise NotLiveError(f"{source}: guest.pinning.vhost={changes.vhostpin}: cannot be made live here: vhost "
                           "threads are pinned by labctl's qemu hook at a domain's start (allowed: vCPU and "
                           "emulator pins)")
    edit = apply_changes(xml, changes, host_cpus=set(online_cpus()))
    if edit.restart_needed:
        raise NotLiveError(f"{source}: {', '.join(changes.knobs())}: cannot be made live here: the domain must be "
                           "restarted for it (NIC queues or rings, hugepages) (allowed: vCPU and emulator pins)")


@dataclass
class GuestQueues(InLab):
    """The queue pairs a kernel guest's virtio_net uses (``ethtool -L IF combined N`` in the guest, through the
    appliance's control channel: its ``QUEUES`` command); read back with ``ethtool -l`` in the guest."""

    queues: int
    mac: str
    reply: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"workload.guest_queues -> {self.queues} (ethtool -L combined {self.queues} in the guest)"

    @property
    def knobs(self) -> list[str]:
        return [f"workload.guest_queues={self.queues}"]

    def apply(self, lab: Any) -> list[str]:
        from labctl.errors import WorkloadError
        from labctl.lab.libvirt.kernel import CHANNEL_TIMEOUT_S

        channel = getattr(lab, "channel", None)
        if channel is None:
            raise UserError("this lab has no guest control channel (allowed: a kernel guest)")
        start = channel.mark()
        channel.send(f"QUEUES {self.mac} {self.queues}")
        _end, reply = channel.wait("LABCTL-QUEUES", start, CHANNEL_TIMEOUT_S, "ethtool -L in the guest")
        self.reply = reply if isinstance(reply, dict) else {"message": str(reply)}
        if self.reply.get("rc") not in (0, None):
            raise WorkloadError(f"ethtool -L combined {self.queues} in the guest: {self.reply.get('message')}")
        return [f"ethtool -L combined {self.queues}: rc {self.reply.get('rc')}"]

    def read_back(self, lab: Any) -> dict[str, Any]:
        nic = self.reply.get("nic") or {}
        return {k: nic.get(k) for k in ("ifname", "combined", "max_combined") if k in nic} or {"reply": self.reply}


# ---- the user's own command ------------------------------------------------------------------------------

def check_exec(argv: list[str]) -> list[str]:
    """``--exec ARGV``: a program found (a path, or a name on PATH) before anything starts; returned resolved."""
    if not argv or not argv[0]:
        raise UserError("--exec: an empty command (allowed: an argv, e.g. --exec /usr/local/bin/step --arg)")
    program = argv[0]
    found = program if "/" in program else shutil.which(program)
    if not found or not Path(found).is_file() or not os.access(found, os.X_OK):
        raise UserError(f"--exec {program}: not an executable file (allowed: a path, or a program on PATH)")
    return [found, *argv[1:]]


@dataclass
class ExecCommand:
    """The user's command at the change time: run as an argv (never through a shell), its output kept."""

    argv: list[str]
    timeout_s: float = EXEC_TIMEOUT_S
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return "--exec " + " ".join(self.argv)

    @property
    def knobs(self) -> list[str]:
        return []

    def apply(self, lab: Any) -> list[str]:
        t0 = time.monotonic()
        try:
            done = subprocess.run(self.argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=self.timeout_s, errors="replace")
            code, out = done.returncode, (done.stdout + done.stderr).strip().splitlines()
        except subprocess.TimeoutExpired as exc:
            code, out = None, [f"killed after {self.timeout_s:.0f} s"] + str(exc.stdout or "").splitlines()[-2:]
        self.result = {"exit_code": code, "took_s": round(time.monotonic() - t0, 4), "output": out[-5:]}
        return [f"{' '.join(self.argv)}: exit code {code} in {self.result['took_s']:.3f} s"]

    def read_back(self, lab: Any) -> dict[str, Any]:
        return dict(self.result)

    def cleanup(self, lab: Any) -> None:
        """Whatever the command did is the user's."""
