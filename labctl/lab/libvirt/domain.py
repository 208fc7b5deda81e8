"""One libvirt domain running the workload appliance in serve mode, and what every measured guest shares.

The three measured libvirt labs (:class:`~labctl.lab.libvirt.guest.GuestLab` and its kernel-stack and
OVS-DPDK variants, and :class:`~labctl.lab.libvirt.vm2vm.Vm2vmGuestLab` with two of these) boot their
domains through :class:`GuestDomain`:

    boot:  the appliance (built on first use; with a build's forwarder, the image carrying it:
           :func:`appliance_forwarder`) -> the domain XML (``domxml.render``) -> the lab's host
           side (the caller's, before QEMU connects) -> taps, network, domain recorded in the ledger
           -> define + start -> the control channel's HELLO: the NICs as the guest's driver negotiated them
    trial: vCPU and emulator pins applied live (``virDomainPinVcpuFlags``/``virDomainPinEmulator`` with
           ``VIR_DOMAIN_AFFECT_LIVE``, libvirt's domain API), the forwarder over the channel
    close: POWEROFF on the channel, else ``virDomainDestroy``; the ledger teardown removes the rest

Also here, for the lab's up/down (``lifecycle``) and the measured guests alike: :func:`render_context`
(the host facts a domain XML depends on) and :func:`give_to_qemu` (vhost-user sockets handed to QEMU's
group); for the measured guests: :func:`check_measurable`, :func:`wait_for_paths` (the host side's
vhost-user servers ready) and :func:`guest_stats` (the guest forwarder's counters over the channel).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.dpdk.testpmd import FwdStats
from labctl.errors import HypervisorError, PlanError, UserError, WorkloadError
from labctl.host.cpuset import online_cpus, parse_cpuset
from labctl.host.facts import kvm_status
from labctl.host.threads import qemu_pid, qemu_thread_pins
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.channel import CHANNEL_NAME, GuestChannel
from labctl.lab.builds import Program, emulator_of, resolve
from labctl.lab.libvirt.domxml import RenderContext, render
from labctl.lab.libvirt.negotiation import compare_nics
from labctl.lab.plan import LabPlan
from labctl.safefs import give_socket, qemu_gid, remove_stale

BOOT_TIMEOUT_S = 600.0  # TCG boots take 10-30 s here; a busy 2-CPU host can take minutes
FORWARDER_TIMEOUT_S = 300.0
REPROBE_TIMEOUT_S = 120.0  # the guest's own wait for swapped NICs is 60 s (init.sh REPROBE), then binding


def _settings(nic: Any) -> str:
    """A NIC's swappable settings in a phase line: ``virtio queues 2 rx 1024 tx 256``."""
    return f"{nic.model} queues {nic.queues} rx {nic.rx_ring} tx {nic.tx_ring}"


def check_measurable(plan: LabPlan, uri: str) -> None:
    """Trials need a real hypervisor, one kind of host side for every NIC, and a build's forwarder the
    appliance can carry (:func:`appliance_forwarder`)."""
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
    appliance_forwarder(plan)  # a build's forwarder the appliance cannot carry: refused before anything starts


def appliance_forwarder(plan: LabPlan) -> str | None:
    """The build's forwarder the guest's appliance carries as its dpdk-testpmd (resolved, checked), or None
    for Debian's. Refused (one line, before anything is created): a build env for it, which would be a host
    path in the guest (the appliance runs it with its own LD_LIBRARY_PATH: Debian's DPDK libraries and the
    plugin directory), and a library it needs that the appliance does not carry."""
    if not plan.build.gives("forwarder") or plan.stack != "dpdk":
        return None
    from labctl.lab.libvirt.appliance.image import missing_libraries

    program = resolve(plan.build, "forwarder")
    if program.env:
        raise PlanError(f"builds.{plan.build.label}.env: a libvirt guest's forwarder runs in the appliance with "
                        "its own environment, where a host build tree's variables mean nothing (allowed: no env "
                        "in a build whose forwarder runs in a libvirt guest)")
    missing = missing_libraries(Path(program.path))
    if missing:
        raise PlanError(f"builds.{plan.build.label}.forwarder: {program.path} needs {', '.join(missing)}, which "
                        "the guest appliance does not carry (allowed: a testpmd linking Debian's DPDK 22.11 "
                        "libraries, or a static build)")
    return program.path


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


def render_context(uri: str, cmdline: str | None = None, appliance: Any = None,
                   control_channel: str | None = None) -> RenderContext:
    """The host facts a domain XML depends on: the domain type (``kvm`` where KVM is usable, else
    ``qemu``: TCG), the appliance's kernel and initrd, its command line and the control channel's name."""
    kvm = kvm_status()
    extra: dict[str, Any] = {"control_channel": control_channel}
    if appliance is not None:
        extra.update(kernel=str(appliance.kernel), initrd=str(appliance.initrd))
    if cmdline is not None:
        extra["cmdline"] = cmdline
    return RenderContext(domain_type=hypervisor.domain_type_for(uri, kvm.usable), **extra)


def give_to_qemu(sockets: list[Path]) -> None:
    """vhost-user sockets testpmd made (root, 0755) handed to QEMU's group, mode 0660, not to the world."""
    gid = qemu_gid()
    for sock in sockets:
        give_socket(sock, gid, 0o660)  # a symlink planted there is refused, never followed


class GuestDomain:
    """The domain of ``plan`` on ``uri`` (recorded in ``state``) with the appliance in serve mode.

    ``serve_params``: extra ``labctl.NAME=VALUE`` kernel parameters (the kernel-stack guest's
    ``stack=kernel``); ``vhost_net``: tap NICs use ``<driver name='vhost'>`` (only where /dev/vhost-net
    exists). After :meth:`boot`: ``dom``, ``channel``, ``negotiated`` (requested vs negotiated per NIC),
    ``ready`` (the guest's HELLO), ``domain_type`` and ``qemu_pid``."""

    def __init__(self, plan: LabPlan, state: LabState, uri: str,
                 phase: Callable[[str], None] = lambda _text: None,
                 serve_params: dict[str, str] | None = None, vhost_net: bool = False):
        self.plan = plan
        self.state = state
        self.uri = uri
        self.phase = phase
        self.serve_params = dict(serve_params or {})
        self.vhost_net = vhost_net
        self.dom: Any = None
        self.channel: GuestChannel | None = None
        self.negotiated: list[dict[str, Any]] = []
        self.ready: dict[str, Any] = {}
        self.domain_type = ""
        self.qemu_pid: int | None = None
        self._pins_applied: tuple | None = None
        self.qemu: Program | None = None  # the emulator it ran (a build's <emulator>, else the host's)

    def boot(self, host_side: Callable[[], None] | None = None) -> float:
        """Define and start the domain and answer the guest's HELLO. ``host_side`` runs once the domain's
        directories exist and before anything of the domain is recorded: the vhost-user servers QEMU
        connects to as the client. Returns when the boot began (the appliance and the XML ready)."""
        from labctl.lab.libvirt.appliance import cache as appliance

        plan, state = self.plan, self.state
        self.qemu = resolve(plan.build, "qemu")  # a build's path checked again before anything is created
        carried = appliance_forwarder(plan)
        image = appliance.cached(forwarder=carried)
        if image is None:
            self.phase("building the workload appliance " + (f"carrying {carried} (build {plan.build.label}; "
                       "cached by its sha256)" if carried else "(first use; cached afterwards)"))
            image = appliance.build(forwarder=carried)
        cmdline = image.cmdline("serve", macs=",".join(n.mac for n in plan.nics), channel=CHANNEL_NAME,
                                **self.serve_params)
        ctx = replace(render_context(self.uri, cmdline, image, control_channel=CHANNEL_NAME),
                      vhost_net=self.vhost_net, emulator=emulator_of(plan))
        self.domain_type = ctx.domain_type
        xml = render(plan, ctx)
        t0 = self.begin(host_side)
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
        self.qemu_pid = qemu_pid(plan.domain_name) or None
        return t0

    # -- a NIC swap (hot-unplug, hot-plug with new settings) -----------------------------------------

    def swap_nics(self, plan: LabPlan, between: Callable[[], None] | None = None) -> dict[str, float]:
        """The running domain's NICs swapped for ``plan``'s (same boot key: :meth:`LabPlan.boot_key`; the
        forwarder ended before), ``between`` run while none is plugged (the host side restarted), then the
        guest's view read back (:meth:`reprobe`): ``negotiated`` and ``ready`` are ``plan``'s after it. Returns
        the seconds of each step. SwapError (or a WorkloadError/AgentError of the guest's side) when it did not
        happen: the caller boots instead."""
        from labctl.lab.libvirt import hotplug

        assert self.dom is not None
        if plan.boot_key() != self.plan.boot_key():
            raise ValueError("a swap changes NIC settings only: this plan needs a boot")
        self.phase(f"hot-swapping {plan.domain_name}'s NICs: "
                   + "; ".join(f"nic{n.index} {_settings(n)}" for n in plan.nics))
        steps = hotplug.swap_nics(self.uri, self.dom, self.plan, plan, RenderContext(vhost_net=self.vhost_net),
                                  between)
        self.plan = plan
        t0 = time.monotonic()
        self.phase("waiting for the guest to find its new NICs")
        self.reprobe()
        steps["guest_s"] = time.monotonic() - t0
        for step, hundredths in (self.ready.get("reprobe_cs") or {}).items():  # the appliance's own split of it
            if isinstance(hundredths, int):
                steps[f"guest_{step}_s"] = hundredths / 100
        return steps

    def reprobe(self) -> None:
        """After a swap: the guest's own view of its NICs (the appliance's REPROBE: found again, negotiated
        rings and queues read as at boot, bound for DPDK or brought up), compared with the plan."""
        assert self.channel is not None
        nics, ready = self.channel.reprobe(REPROBE_TIMEOUT_S)
        self.negotiated = compare_nics(self.plan, nics)
        self.ready = ready

    def begin(self, host_side: Callable[[], None] | None) -> float:
        """The boot's start, once its XML is ready: the domain's directories, a stale serial log gone, then
        ``host_side`` (before anything of the domain is recorded). Returns when it began."""
        t0 = time.monotonic()
        self.state.make_dirs(self.plan.dirs.run, self.plan.dirs.log)
        remove_stale(self.plan.dirs.serial_log)
        if host_side is not None:
            host_side()
        return t0

    def apply_pins(self) -> None:
        """The plan's vCPU and emulator pins applied to the running domain, when they changed since the
        last call (pins are live knobs: a trial changes them without a boot)."""
        pins = self.plan.pins
        wanted = (tuple(sorted(pins.vcpus.items())), pins.emulator)
        if wanted == self._pins_applied or (not pins.vcpus and not pins.emulator):
            self._pins_applied = wanted
            return
        hypervisor.pin_live(self.dom, {i: parse_cpuset(c) for i, c in pins.vcpus.items()},
                            parse_cpuset(pins.emulator) if pins.emulator else None, max(online_cpus()) + 1)
        self._pins_applied = wanted

    def thread_pins(self, vcpu_prefix: str, emulator_key: str) -> dict[str, str]:
        """QEMU's threads as they are pinned now: ``{vcpu_prefix}{n}`` per vCPU, ``emulator_key``."""
        if not self.qemu_pid:
            return {}
        threads = qemu_thread_pins(self.qemu_pid)
        pins = {f"{vcpu_prefix}{n}": cpus for n, cpus in threads["vcpus"].items() if cpus}
        if threads.get("emulator"):
            pins[emulator_key] = threads["emulator"]
        return pins

    def end_forwarder(self, timeout_s: float = 30.0) -> None:
        """The guest's forwarder ended, if one runs (after a failed trial too); the guest stays up."""
        if self.channel is not None:
            with contextlib.suppress(WorkloadError):
                self.channel.end_forwarder(timeout_s=timeout_s)

    def record_warnings(self) -> list[str]:
        """TCG (KVM not usable) and every NIC whose negotiated settings differ from the plan's."""
        out = []
        if self.domain_type == "qemu":
            out.append(f"the guest ran under TCG ({kvm_status().reason}): its figures are functional, "
                       "not representative")
        for nic in self.negotiated:
            out.extend(f"nic{nic['index']}: {reason}" for reason in nic["differences"])
        return out

    def close(self) -> None:
        """POWEROFF on the channel, the domain destroyed when it does not stop within 10 s, the channel
        closed; never raises (the ledger teardown that follows removes whatever is left)."""
        if self.channel is not None:
            with contextlib.suppress(Exception):
                self.channel.poweroff()
        if self.dom is not None:
            with contextlib.suppress(Exception):
                hypervisor.shutdown_or_destroy(self.dom, timeout_s=10.0)
        if self.channel is not None:
            with contextlib.suppress(Exception):
                self.channel.close()
        self.channel = self.dom = None
