"""A libvirt guest as a measured lab: booted once, its forwarder restarted for every trial.

    boot:  host side (vhost-user: the vswitch's server ports first, QEMU connects to them)
           -> define + start the domain (appliance in serve mode, a control channel)
           -> HELLO on the channel: the NICs as the guest's driver negotiated them
           -> host side on the guest's taps (tap, network: af_packet, once the taps exist)
    trial: live pins -> the plan's forwarder started in the guest (FWD) -> links -> forwarding
           -> snapshots (the vswitch's telemetry and forward stats, the guest's forward stats over the
           channel) -> stop -> the forwarder ends (END); the guest stays up for the next trial
    close: POWEROFF, else destroy; the vswitch quits; the ledger teardown removes the rest

The vswitch is the traffic generator and sink as in the embedded lab (testpmd ``flowgen``); its ports
are ``net_vhost`` servers for vhost-user NICs and ``net_af_packet`` ports on the guest's tap devices for
tap and network NICs (QEMU's userspace virtio backend on those hosts: no /dev/vhost-net here).
Every resource is recorded in the lab's ledger before it is created.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any, Callable

from labctl import signals
from labctl.dpdk.labgen import Labgen, labgen_process
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import FwdStats, Testpmd
from labctl.errors import HypervisorError, UserError, WorkloadError
from labctl.host.cpuset import online_cpus, parse_cpuset
from labctl.host.facts import kvm_status
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import dpdk_worker_pins, qemu_pid, qemu_thread_pins
from labctl.lab.embedded.lab import wait_links
from labctl.lab.embedded.vswitch import host_ports, start_recorded, vswitch_testpmd
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.channel import CHANNEL_NAME, GuestChannel
from labctl.lab.libvirt.domxml import render
from labctl.lab.libvirt.lifecycle import give_to_qemu, render_context
from labctl.lab.libvirt.negotiation import compare_nics
from labctl.lab.plan import LabPlan
from labctl.safefs import remove_stale
from labctl.workload.forward import GuestCounters, Snapshot, zero_reason
from labctl.workload.paced import PacedRunner

BOOT_TIMEOUT_S = 600.0  # TCG boots take 10-30 s here; a busy 2-CPU host can take minutes
FORWARDER_TIMEOUT_S = 300.0


def check_measurable(plan: LabPlan, uri: str) -> None:
    """Trials need a real hypervisor and one kind of host side for every NIC."""
    if uri.startswith("test:"):
        raise UserError(f"uri {uri}: libvirt's test driver runs no guest (allowed: qemu:///system)")
    if plan.vswitch.kind == "ovs-dpdk" and plan.topology == "vm2vm":
        raise UserError("vswitch.kind: vm2vm between libvirt guests runs through the testpmd vswitch "
                        "(allowed: testpmd with topology vm2vm and backend libvirt)")
    if plan.topology == "vm2vm":
        for nic in plan.nics:
            if nic.backend != "vhostuser":
                raise UserError(f"guest.nics.{nic.index}.backend: vm2vm guests meet at the vswitch over vhost-user "
                                f"(allowed: vhostuser; got {nic.backend})")
    kinds = {"vhostuser" if n.backend == "vhostuser" else "tap" for n in plan.nics}
    if len(kinds) > 1:
        raise UserError("guest.nics: a measured guest has either vhost-user NICs or tap/network NICs, not both "
                        "(the host side is one testpmd: net_vhost servers start before QEMU, af_packet ports "
                        "after it)")


def wait_for_paths(proc: Any, paths: list, timeout_s: float = 60.0) -> None:
    """Wait until the host side made its vhost-user server sockets (failing when it exits meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while not all(p.exists() for p in paths):
        if proc.proc is not None and proc.proc.poll() is not None:
            raise WorkloadError(f"the host side ({proc.role}) exited with code {proc.proc.returncode} before making "
                                f"its vhost-user sockets (log {proc.log_path})")
        if time.monotonic() > deadline:
            raise WorkloadError(f"the host side made no {paths[0].name} within {timeout_s:.0f} s (log {proc.log_path})")
        signals.sleep(0.05)


def guest_stats(data: dict[str, Any]) -> tuple[dict[int, FwdStats], dict[int, dict[str, Any]]]:
    """The guest forwarder's LABCTL-STATS as the embedded lab's guest snapshot: per-port forward stats
    and per-port/queue packet counts (testpmd's per-stream stats, one stream per rx queue)."""
    fwd, ports = {}, {}
    for p in data.get("ports", []):
        port = int(p["port"])
        fwd[port] = FwdStats(int(p["rx_packets"]), int(p["rx_dropped"]), int(p["tx_packets"]), int(p["tx_dropped"]))
        ports[port] = {"ipackets": int(p["rx_packets"]), "opackets": int(p["tx_packets"]),
                       "q_ipackets": [int(p["rx_packets"])], "q_opackets": [int(p["tx_packets"])]}
    streams = data.get("streams") or []
    if streams:
        for entry in ports.values():
            entry["q_ipackets"], entry["q_opackets"] = [], []
        for s in streams:
            for port_key, queue_key, field, counts in (("rx_port", "rx_queue", "rx_packets", "q_ipackets"),
                                                      ("tx_port", "tx_queue", "tx_packets", "q_opackets")):
                entry = ports.setdefault(int(s[port_key]), {"ipackets": 0, "opackets": 0, "q_ipackets": [],
                                                            "q_opackets": []})
                queue = int(s[queue_key])
                values = entry[counts]
                values.extend([0] * (queue + 1 - len(values)))
                values[queue] += int(s[field])
    return fwd, ports


class GuestLab:
    """One libvirt guest of ``plan`` on ``uri``, recorded in ``state``."""

    def __init__(self, plan: LabPlan, state: LabState, uri: str, warnings: list[str],
                 phase: Callable[[str], None] = lambda _text: None):
        self.plan = plan
        self.state = state
        self.uri = uri
        self.warnings = warnings
        self.phase = phase
        self.key = plan.domain_key()
        self.timings: dict[str, float] = {}
        self.hugepages = plan.hugepages
        self.vswitch: Testpmd | None = None  # flowgen: the vswitch testpmd is generator and sink
        self.generator: Labgen | None = None  # labgen: the paced generator and sink
        self.paced = PacedRunner(self)
        self.channel: GuestChannel | None = None
        self.dom: Any = None
        self.pids: dict[str, int] = {}
        self.negotiated: list[dict[str, Any]] = []
        self.ready: dict[str, Any] = {}
        self.host_side = ""
        self.boot_s = 0.0
        self.booted_now = False
        self.domain_type = ""
        self._telemetry: Telemetry | None = None
        self._pins_applied: tuple | None = None

    # -- boot ------------------------------------------------------------------------------------

    #: serve mode's extra kernel parameters (labctl.NAME=VALUE) and whether tap NICs use vhost-net:
    #: the kernel-stack lab (labctl.lab.libvirt.kernel) sets both
    serve_params: dict[str, str] = {}
    vhost_net = False
    #: whether this guest starts its own host side (False: vm2vm's two guests share one vswitch)
    own_host_side = True
    #: domains a boot starts
    domains = 1

    def boot(self) -> None:
        plan = self.plan
        t0 = self._boot_domain()
        if not plan.vhostuser_nics:
            devices = hypervisor.interface_devices(self.dom)
            ifaces = {n.index: devices.get(n.mac, n.tap or "") for n in plan.nics}
            self._start_vswitch(host_ports(plan, nics=list(plan.nics), ifaces=ifaces), [])
            self.host_side = "net_af_packet on the guest's tap devices " + ", ".join(ifaces.values())
        else:
            self.host_side = "net_vhost vhost-user server ports (QEMU connects as the client)"
        self.host_side = f"{'labgen' if self.generator else 'testpmd flowgen'} on {self.host_side}"
        self.boot_s = time.monotonic() - t0
        self.booted_now = True
        self.timings["boot_s"] = self.boot_s

    def _boot_domain(self) -> float:
        """The domain defined and started in serve mode (the vswitch's vhost-user servers first), the
        channel open and the guest's HELLO answered: ``negotiated``, ``ready`` and QEMU's pid are set.
        Returns when the boot began (after the appliance and the XML were ready)."""
        from labctl.lab.libvirt.appliance import cache as appliance

        plan, state = self.plan, self.state
        check_measurable(plan, self.uri)
        image = appliance.cached()
        if image is None:
            self.phase("building the workload appliance (first use; cached afterwards)")
            image = appliance.build()
        cmdline = image.cmdline("serve", macs=",".join(n.mac for n in plan.nics), channel=CHANNEL_NAME,
                                **self.serve_params)
        ctx = replace(render_context(self.uri, cmdline, image, control_channel=CHANNEL_NAME),
                      vhost_net=self.vhost_net)
        self.domain_type = ctx.domain_type
        xml = render(plan, ctx)
        t0 = time.monotonic()
        state.make_dirs(plan.dirs.run, plan.dirs.log)
        remove_stale(plan.dirs.serial_log)
        if plan.vhostuser_nics and self.own_host_side:
            self.phase("starting the vswitch (vhost-user servers)")
            self._start_vswitch(host_ports(plan, nics=list(plan.nics)), [n.socket for n in plan.nics])
        for nic in plan.nics:
            if nic.tap is not None:
                state.record("tap", nic.tap)
        if any(n.backend == "network" for n in plan.nics):
            state.record("network", "default", uri=self.uri, started=False)
            if hypervisor.ensure_network(self.uri, "default"):
                state.update(state.find("network")[0], started=True)
            else:
                state.forget(state.find("network")[0])  # it was running before labctl: not ours to stop
        state.record("domain", plan.domain_name, uri=self.uri)
        self.phase(f"defining and starting {plan.domain_name}")
        self.dom = hypervisor.define_and_start(self.uri, xml)
        path = hypervisor.channel_path(self.dom, CHANNEL_NAME)
        if not path:
            raise HypervisorError(f"{plan.domain_name}: libvirt made no socket for channel {CHANNEL_NAME}")
        self.channel = GuestChannel(path, plan.dirs.log / "channel.log")
        self.phase("waiting for the guest (appliance in serve mode)")
        nics, self.ready = self.channel.hello(BOOT_TIMEOUT_S)
        self.negotiated = compare_nics(plan, nics)
        pid = qemu_pid(plan.domain_name)
        if pid:
            self.pids["qemu"] = pid
        return t0

    def _start_vswitch(self, vdevs: list[str], sockets: list) -> None:
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
            self.vswitch = vswitch_testpmd(plan, None, vdevs=vdevs)
            self.pids["vswitch"] = start_recorded(self.state, self.vswitch)
            self.vswitch.wait_ready()
            self._telemetry = Telemetry.connect(self.vswitch.eal.file_prefix)
            proc = self.vswitch
        if sockets:
            wait_for_paths(proc, sockets)
            give_to_qemu(sockets)

    # -- one trial -------------------------------------------------------------------------------

    def start(self, plan: LabPlan | None = None) -> None:
        """Start the trial's forwarder (``plan``: this trial's, with the same domain) and forwarding."""
        if plan is not None:
            if plan.domain_key() != self.key:
                raise ValueError("a trial with another domain needs another guest")
            self.plan = plan
        plan = self.plan
        assert self.channel is not None
        t0 = time.monotonic()
        self._apply_pins()
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

    def _apply_pins(self) -> None:
        pins = self.plan.pins
        wanted = (tuple(sorted(pins.vcpus.items())), pins.emulator)
        if wanted == self._pins_applied or (not pins.vcpus and not pins.emulator):
            self._pins_applied = wanted
            return
        hypervisor.pin_live(self.dom, {i: parse_cpuset(c) for i, c in pins.vcpus.items()},
                            parse_cpuset(pins.emulator) if pins.emulator else None, max(online_cpus()) + 1)
        self._pins_applied = wanted

    def snapshot(self) -> Snapshot:
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
        if self.channel is not None:
            with contextlib.suppress(WorkloadError):
                self.channel.end_forwarder(timeout_s=30)
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
        if "qemu" in self.pids:
            threads = qemu_thread_pins(self.pids["qemu"])
            pins.update({f"guest.vcpu{n}": cpus for n, cpus in threads["vcpus"].items() if cpus})
            if threads.get("emulator"):
                pins["qemu.emulator"] = threads["emulator"]
        return pins

    def environment(self, pins: dict[str, str], shared: bool):
        accel = "kvm" if self.domain_type == "kvm" else "tcg"
        return fingerprint("libvirt", pins, shared, self.hugepages, accel=accel)

    def details(self) -> dict[str, Any]:
        return {"nics": self.negotiated, "host_side": self.host_side, "guest": self.ready,
                "boot": {"booted": self.booted_now, "boot_s": round(self.boot_s, 2) if self.booted_now else 0.0},
                "domain_type": self.domain_type}

    def window_started(self) -> None:
        """The measurement window opens (nothing of the host side to clear here)."""

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        return {}, {}

    def record_warnings(self) -> list[str]:
        out = []
        if self.domain_type == "qemu":
            out.append(f"the guest ran under TCG ({kvm_status().reason}): its figures are functional, "
                       "not representative")
        if any(nic["differences"] for nic in self.negotiated):
            for nic in self.negotiated:
                out.extend(f"nic{nic['index']}: {reason}" for reason in nic["differences"])
        return out

    def zero_reason(self) -> str:
        return zero_reason(self.vswitch, None, f"{self.plan.dirs.log}: the host side's log, serial.log, channel.log")

    # -- down ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Power the guest off (destroy it when it does not stop in time) and stop the vswitch; never
        raises. The ledger teardown that follows removes whatever is left."""
        if self.channel is not None:
            self.channel.poweroff()
        if self.dom is not None:
            with contextlib.suppress(Exception):
                hypervisor.shutdown_or_destroy(self.dom, timeout_s=10.0)
        if self.channel is not None:
            with contextlib.suppress(Exception):
                self.channel.close()
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        for proc in (self.vswitch, self.generator):
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.quit()
        self.channel = self.vswitch = self.generator = self._telemetry = self.dom = None
