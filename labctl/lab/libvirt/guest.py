"""A libvirt guest as a measured lab: booted once, its forwarder restarted for every trial.

    boot:  host side (vhost-user: the vswitch's server ports first, QEMU connects to them)
           -> define + start the domain (appliance in serve mode, a control channel)
           -> HELLO on the channel: the NICs as the guest's driver negotiated them
           -> host side on the guest's taps (tap, network: af_packet, once the taps exist)
    trial: live pins -> the plan's forwarder started in the guest (FWD) -> links -> forwarding
           -> snapshots (the vswitch's telemetry and forward stats, the guest's forward stats over the
           channel) -> stop -> the forwarder ends (END); the guest stays up for the next trial
    swap:  a trial whose NICs differ only in settings (:meth:`LabPlan.boot_key` the same; ``swap: hotplug``):
           the NICs unplugged and plugged again with the new ``<driver>`` (:mod:`~labctl.lab.libvirt.hotplug`);
           the host side matched (vhost-user servers restarted with the new queue count while no NIC is
           plugged; af_packet ports started again on the new taps); the guest re-probes its NICs (REPROBE:
           the rings and queues it negotiated, read as at boot, then bound for DPDK again)
    close: POWEROFF, else destroy; the vswitch quits; the ledger teardown removes the rest

The vswitch is the traffic generator and sink as in the embedded lab (testpmd ``flowgen``); its ports
are ``net_vhost`` servers for vhost-user NICs and ``net_af_packet`` ports on the guest's tap devices for
tap and network NICs (QEMU's userspace virtio backend on those hosts: no /dev/vhost-net here).
Every resource is recorded in the lab's ledger before it is created. The domain itself (appliance, XML,
define, HELLO, live pins, power-off) is a :class:`~labctl.lab.libvirt.domain.GuestDomain`, which the
kernel-stack guest, the guest behind OVS and vm2vm's two guests boot the same way.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from labctl.dpdk.labgen import Labgen, labgen_process
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import Testpmd
from labctl.errors import WorkloadError
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import dpdk_worker_pins
from labctl.lab.builds import Resolved, resolve
from labctl.lab.embedded.lab import wait_links
from labctl.dpdk.runtime import start_recorded
from labctl.lab.embedded.vswitch import host_ports, vswitch_testpmd
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.channel import GuestChannel
from labctl.lab.libvirt.domain import (FORWARDER_TIMEOUT_S, GuestDomain, check_measurable, give_to_qemu,
                                       guest_stats, wait_for_paths)
from labctl.lab.plan import LabPlan
from labctl.safefs import remove_stale
from labctl.workload.forward import GuestCounters, Snapshot, zero_reason
from labctl.workload.paced import PacedRunner


class GuestLab:
    """One libvirt guest of ``plan`` on ``uri``, recorded in ``state``: its domain (:class:`GuestDomain`)
    and its host side (labgen, or the vswitch testpmd in flowgen mode)."""

    #: serve mode's extra kernel parameters (labctl.NAME=VALUE): the kernel-stack lab sets ``stack=kernel``
    serve_params: dict[str, str] = {}
    #: whether this guest starts its own vhost-user host side (OvsGuestLab's is OVS, started before)
    own_host_side = True
    #: domains a boot starts
    domains = 1

    def __init__(self, plan: LabPlan, state: LabState, uri: str, warnings: list[str],
                 phase: Callable[[str], None] = lambda _text: None):
        self.plan = plan
        self.state = state
        self.uri = uri
        self.warnings = warnings
        self.phase = phase
        self.key = plan.domain_key()
        self.domain = GuestDomain(plan, state, uri, phase, serve_params=self.serve_params)
        self.timings: dict[str, float] = {}
        self.hugepages = plan.hugepages
        self.vswitch: Testpmd | None = None  # flowgen: the vswitch testpmd is generator and sink
        self.generator: Labgen | None = None  # labgen: the paced generator and sink
        self.paced = PacedRunner(self)
        self.pids: dict[str, int] = {}
        self.host_side = ""
        self.boot_s = 0.0
        self.booted_now = False
        #: how this trial reached its configuration ({"how": boot | hotplug | kept, "s", "note"}: LabSession's)
        self.reached: dict[str, Any] = {}
        self._telemetry: Telemetry | None = None
        self.programs = Resolved()  # the binaries it runs, recorded (env.binaries)

    # -- the domain's facts, as the record and the subclasses read them ---------------------------

    @property
    def channel(self) -> GuestChannel | None:
        return self.domain.channel

    @property
    def dom(self) -> Any:
        return self.domain.dom

    @property
    def negotiated(self) -> list[dict[str, Any]]:
        return self.domain.negotiated

    @property
    def ready(self) -> dict[str, Any]:
        return self.domain.ready

    @property
    def domain_type(self) -> str:
        return self.domain.domain_type

    @property
    def vhost_net(self) -> bool:
        """Whether tap NICs use vhost-net (``<driver name='vhost'>``); the kernel-stack lab sets it."""
        return self.domain.vhost_net

    @vhost_net.setter
    def vhost_net(self, value: bool) -> None:
        self.domain.vhost_net = value

    # -- boot ------------------------------------------------------------------------------------

    def boot(self) -> None:
        """The domain up (:meth:`boot_domain`), then for tap and network NICs the host side on its taps."""
        plan = self.plan
        t0 = self.boot_domain()
        if not plan.vhostuser_nics:
            devices = hypervisor.interface_devices(self.dom)
            ifaces = {n.index: devices.get(n.mac, n.tap or "") for n in plan.nics}
            self._start_host_side(host_ports(plan, nics=list(plan.nics), ifaces=ifaces), [])
            self.host_side = "net_af_packet on the guest's tap devices " + ", ".join(ifaces.values())
        else:
            self.host_side = "net_vhost vhost-user server ports (QEMU connects as the client)"
        self.host_side = f"{'labgen' if self.generator else 'testpmd flowgen'} on {self.host_side}"
        self.boot_s = time.monotonic() - t0
        self.booted_now = True
        self.timings["boot_s"] = self.boot_s

    def boot_domain(self) -> float:
        """The plan checked (:func:`check_measurable`), the domain defined and started in serve mode (this
        lab's vhost-user servers first, unless ``own_host_side`` is False), the guest's HELLO answered:
        ``negotiated``, ``ready`` and ``pids["qemu"]`` are set. Returns when the boot began."""
        plan = self.plan
        check_measurable(plan, self.uri)

        def vhost_user_servers() -> None:
            self.phase("starting the vswitch (vhost-user servers)")
            self._start_host_side(host_ports(plan, nics=list(plan.nics)), [n.socket for n in plan.nics])

        t0 = self.domain.boot(vhost_user_servers if plan.vhostuser_nics and self.own_host_side else None)
        if self.domain.qemu is not None:
            self.programs.add(self.domain.qemu)
        if plan.stack == "dpdk":  # the testpmd the appliance carries: the build's (domain.appliance_forwarder) or Debian's
            self.programs.add(resolve(plan.build, "forwarder"))
        if self.domain.qemu_pid:
            self.pids["qemu"] = self.domain.qemu_pid
        return t0

    def _start_host_side(self, vdevs: list[str], sockets: list) -> None:
        """The host side: labgen (paced) or the vswitch testpmd (flowgen) on ``vdevs``."""
        plan = self.plan
        for sock in sockets:
            self.state.record("path", str(sock))
            remove_stale(sock)
        if plan.generator.kind == "labgen":
            self.generator = labgen_process(vdevs, plan.generator.queues, f"{plan.file_prefix}-gen",
                                            list(plan.generator.workers), None, plan.dirs.log / "labgen.log")
            self.pids["generator"] = self.generator.start_recorded(self.state)
            self.generator.connect()
            proc: Any = self.generator
        else:
            program = self.programs.add(resolve(plan.build, "vswitch"))
            self.vswitch = vswitch_testpmd(plan, None, vdevs=vdevs, program=program)
            self.pids["vswitch"] = start_recorded(self.state, self.vswitch)
            self.vswitch.wait_ready()
            self._telemetry = Telemetry.connect(self.vswitch.eal.file_prefix)
            proc = self.vswitch
        if sockets:
            wait_for_paths(proc, sockets)
            give_to_qemu(sockets)

    def _stop_host_side(self) -> None:
        """The host side quits (before it starts again for another queue count, or on new taps); its process
        record is forgotten once it has gone (its runtime directory and sockets stay recorded: the next one
        makes the same)."""
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        for role, proc in (("vswitch", self.vswitch), ("generator", self.generator)):
            if proc is None:
                continue
            proc.quit()
            pid = self.pids.pop(role, None)
            for resource in self.state.find("process"):
                if pid is not None and resource.ident == str(pid):
                    self.state.forget(resource)
        self.vswitch = self.generator = self._telemetry = None

    # -- a NIC swap ------------------------------------------------------------------------------

    def swap_refusal(self, plan: LabPlan) -> str | None:
        """Why this guest boots for ``plan`` instead of swapping its NICs (None: it swaps)."""
        return None

    def swap(self, plan: LabPlan) -> float:
        """The running guest's NICs swapped for ``plan``'s (its boot key is this guest's; the forwarder ended at
        the last trial's end); the host side matched; ``key`` and the negotiated NICs are ``plan``'s after it.
        Returns the seconds it took (``timings["swap_s"]`` and its steps). SwapError, or the guest's
        WorkloadError/AgentError: not swapped (the session boots instead)."""
        t0 = time.monotonic()
        old = self.plan
        host_side = self.generator is not None or self.vswitch is not None
        on_taps = host_side and not plan.vhostuser_nics  # af_packet ports: on the taps, which are new devices
        queues = (old.vswitch.queues, old.generator.queues) != (plan.vswitch.queues, plan.generator.queues)
        def restart_servers() -> None:  # the servers QEMU connects to, with the new queue count, before any attach
            self.phase(f"restarting the host side's vhost-user servers with {plan.vswitch.queues} queue(s)")
            self._stop_host_side()
            self.plan = plan
            self._start_host_side(host_ports(plan, nics=list(plan.nics)), [n.socket for n in plan.nics])

        between = restart_servers if host_side and plan.vhostuser_nics and self.own_host_side and queues else None
        if on_taps:
            self._stop_host_side()
        steps = self.domain.swap_nics(plan, between)
        self.plan = plan
        self.key = plan.domain_key()
        if on_taps:
            devices = hypervisor.interface_devices(self.dom)
            ifaces = {n.index: devices.get(n.mac, n.tap or "") for n in plan.nics}
            self._start_host_side(host_ports(plan, nics=list(plan.nics), ifaces=ifaces), [])
        self.after_swap()
        swap_s = time.monotonic() - t0
        self.timings.update({f"swap_{k}": round(v, 3) for k, v in steps.items()}, swap_s=swap_s)
        return swap_s

    def after_swap(self) -> None:
        """What a variant of this lab redoes once the guest has its new NICs (the kernel stack's addresses)."""

    # -- one trial -------------------------------------------------------------------------------

    def use_plan(self, plan: LabPlan | None) -> None:
        """This trial's plan (``None``: the boot's), which must have the same domain (:meth:`LabPlan.domain_key`):
        its workload and live pins may differ."""
        if plan is not None:
            if plan.domain_key() != self.key:
                raise ValueError("a trial with another domain needs another guest")
            self.plan = self.domain.plan = plan

    def start(self, plan: LabPlan | None = None) -> None:
        """Start the trial's forwarder (``plan``: this trial's, with the same domain) and forwarding."""
        self.use_plan(plan)
        plan = self.plan
        assert self.channel is not None
        t0 = time.monotonic()
        self.domain.apply_pins()
        if self.vswitch is not None:
            self.vswitch.command(f"set txpkts {plan.packet_size}")
        self.phase("starting the guest's forwarder")
        self.channel.start_forwarder(plan.forwarder.options().argv(), FORWARDER_TIMEOUT_S)
        if self.vswitch is not None:
            assert self._telemetry is not None
            wait_links(self._telemetry, len(plan.nics), self.vswitch, timeout_s=FORWARDER_TIMEOUT_S)
        else:
            assert self.generator is not None
            self.generator.wait_links(timeout_s=FORWARDER_TIMEOUT_S)
        self.channel.testpmd("start")
        if self.vswitch is not None:
            self.vswitch.command("start")  # labgen sends per trial, when asked
        self.timings["setup_s"] = time.monotonic() - t0

    def snapshot(self) -> Snapshot:
        """The vswitch's telemetry and forward stats, the guest's over the channel (flowgen trials)."""
        assert self.vswitch and self.channel and self._telemetry
        t = time.monotonic()
        vswitch_ports = self._telemetry.snapshot()
        vswitch_fwd = self.vswitch.fwd_stats()
        guest_fwd, guest_ports = guest_stats(self.channel.stats())
        return Snapshot(t, vswitch_fwd, guest_fwd, vswitch_ports, guest_ports)

    def guest_counters(self) -> GuestCounters:
        """The guest forwarder's counters now, over the channel (labgen trials)."""
        assert self.channel is not None
        t = time.monotonic()
        fwd, ports = guest_stats(self.channel.stats())
        return GuestCounters(t, fwd, ports)

    def stop_forwarding(self) -> None:
        assert self.channel is not None
        t0 = time.monotonic()
        if self.vswitch is not None:
            self.vswitch.command("stop")
        self.channel.end_forwarder()
        self.timings["stop_s"] = time.monotonic() - t0

    def end_trial(self) -> None:
        """After a trial (also a failed one): the guest's forwarder is ended; the guest stays up."""
        self.booted_now = False
        self.timings = {}
        self.domain.end_forwarder(timeout_s=30)
        if self.vswitch is not None:
            with contextlib.suppress(WorkloadError):
                self.vswitch.command("stop")
        if self.generator is not None:
            with contextlib.suppress(WorkloadError):
                self.generator.stop_trial()

    @property
    def host_kind(self) -> str:
        return "vhost-user" if self.plan.vhostuser_nics else "af_packet"

    # -- what a record needs -----------------------------------------------------------------------

    @property
    def pollers(self) -> int:
        """Busy-polling cores: the vswitch's PMDs and the guest's vCPUs (its DPDK forwarder polls)."""
        host = self.vswitch.app.nb_cores if self.vswitch else len(self.plan.generator.workers)
        return host + self.plan.vcpus

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        """Host CPU seconds of the guest's vCPU threads in the window (they run the forwarder)."""
        return sum(t.cpu_pct for t in report.threads if t.role == "qemu" and t.name.startswith("CPU ")) \
            / 100.0 * window_s

    def pins(self) -> dict[str, str]:
        host = self.pids.get("vswitch") or self.pids.get("generator")
        pins = dpdk_worker_pins("vswitch", host) if host else {}  # the host side's workers, named alike
        pins.update(self.domain.thread_pins("guest.vcpu", "qemu.emulator"))
        return pins

    def environment(self, pins: dict[str, str], shared: bool):
        accel = "kvm" if self.domain_type == "kvm" else "tcg"
        return fingerprint("libvirt", pins, shared, self.hugepages, accel=accel, binaries=self.programs.record())

    def details(self) -> dict[str, Any]:
        return {"nics": self.negotiated, "host_side": self.host_side, "guest": self.ready,
                "boot": {"booted": self.booted_now, "boot_s": round(self.boot_s, 2) if self.booted_now else 0.0},
                "reached": dict(self.reached), "domain_type": self.domain_type}

    def window_started(self) -> None:
        """The measurement window opens (nothing of the host side to clear here)."""

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        return {}, {}

    def record_warnings(self) -> list[str]:
        return self.domain.record_warnings()

    def zero_reason(self) -> str:
        return zero_reason(self.vswitch, None, f"{self.plan.dirs.log}: the host side's log, serial.log, channel.log")

    # -- down ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Power the guest off (destroy it when it does not stop in time) and stop the vswitch; never
        raises. The ledger teardown that follows removes whatever is left."""
        self.domain.close()
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        for proc in (self.vswitch, self.generator):
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.quit()
        self.vswitch = self.generator = self._telemetry = None
