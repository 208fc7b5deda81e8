"""A user's own guest as a measured lab: their disk image and their forwarder, reached through the guest agent.

    boot:  the image probed (qemu-img info: format, chain, identity) -> the lab's host side (the vswitch's
           vhost-user servers or labgen, as for the appliance guest) -> the overlay (recorded, then made)
           -> domain recorded, defined, started -> the agent answers within ``guest.agent_timeout_s``
           -> in the guest: kernel and DPDK versions, the NICs by MAC with their PCI addresses and
           negotiated rings/queues (before binding), hugepages, the NICs bound for DPDK
    trial: live pins -> the forwarder spawned (the image's testpmd, or the user's template) -> the host side's
           links up (the forwarder's exit is caught meanwhile) -> forwarding -> counters -> the forwarder
           stopped (SIGINT, then SIGKILL): it restarts every trial, as the appliance's forwarder does
    close: power-off, else destroy; the ledger teardown removes the domain, the overlay and the sockets

In-guest counters: none are read (a DPDK telemetry socket inside the guest is not reachable from the host
without a program of labctl's in the image); a trial's guest-side counters are the host side's per-port
counters (what the host sent into each guest port and received from it), and every record says so.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from typing import Any

from labctl import signals
from labctl.dpdk.testpmd import FwdStats
from labctl.errors import AgentError, GuestForwarderError, HypervisorError, UserError
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import qemu_pid
from labctl.lab.builds import emulator_of, resolve
from labctl.lab.embedded.lab import wait_links
from labctl.lab.libvirt import hypervisor, image_setup, overlay
from labctl.lab.libvirt.agent import GuestAgent
from labctl.lab.libvirt.domain import FORWARDER_TIMEOUT_S, GuestDomain, render_context
from labctl.lab.libvirt.domxml import render
from labctl.lab.libvirt.guest import GuestLab
from labctl.lab.libvirt.negotiation import compare_nics
from labctl.lab.plan import LabPlan
from labctl.profile.userimage import ImageInfo, ImageProblem, check_qemu_reads, probe
from labctl.workload.forward import GuestCounters, Snapshot

HOST_SIDE_ONLY = ("in-guest counters: none read from the image's forwarder; the guest's counters are the host "
                  "side's per-port counters (sent into each guest port, received from it)")
STOP_TIMEOUT_S = 20.0
REPROBE_S = 60.0  # a swapped NIC shows in the guest within seconds (ACPI hot-plug, then virtio_net's probe)
RESCAN_AFTER_S = 5.0
PROBE_PPS = 10_000  # the probe that shows the forwarder forwards: low enough for any guest, TCG included


def check_image(plan: LabPlan, uri: str) -> ImageInfo:
    """A run's checks before anything is created: a real hypervisor and the image itself (field named)."""
    assert plan.image is not None
    if uri.startswith("test:"):
        raise UserError(f"uri {uri}: libvirt's test driver runs no guest (allowed: qemu:///system)")
    try:
        info = probe(plan.image.path)
        if "session" not in uri:  # the system instance's QEMU runs as its own user (qemu:///session: the caller)
            check_qemu_reads(info)
        return info
    except ImageProblem as exc:
        raise UserError(f"guest.image: {exc}") from None


class ImageDomain(GuestDomain):
    """The domain of an image guest: the overlay, the agent instead of the appliance's channel."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.agent: GuestAgent | None = None
        self.info: ImageInfo | None = None
        self.facts: dict[str, Any] = {}
        self.pcis: list[str] = []
        self.driver = ""
        self.hugepages = 0
        self.agent_s = 0.0
        self.fwd_pid: int | None = None
        self.fwd_argv: tuple[str, ...] = ()

    def boot(self, host_side: Any = None, for_dpdk: bool = True) -> float:
        """Boot and reach the agent; read the NICs; with ``for_dpdk`` (trials) also hugepages and binding."""
        plan, state = self.plan, self.state
        assert plan.image is not None
        self.info = check_image(plan, self.uri)
        self.qemu = resolve(plan.build, "qemu")
        ctx = replace(render_context(self.uri), emulator=emulator_of(plan), image_chain=self.info.chain)
        self.domain_type = ctx.domain_type
        xml = render(plan, ctx)
        t0 = self.begin(host_side)
        self.phase(f"making the copy-on-write overlay of {self.info.path}")
        overlay.create(state, self.info, plan.image.overlay(plan.dirs))
        state.record("domain", plan.domain_name, uri=self.uri)
        self.phase(f"defining and starting {plan.domain_name} (the image's own kernel)")
        self.dom = hypervisor.define_and_start(self.uri, xml)
        self.qemu_pid = qemu_pid(plan.domain_name) or None
        self.agent = GuestAgent(self.dom, plan.domain_name)
        self.phase(f"waiting for the guest agent (at most {plan.image.agent_timeout_s:.0f} s)")
        self.agent_s = self.agent.wait_ready(plan.image.agent_timeout_s)
        self.phase("reading the guest's NICs" + (", reserving hugepages, binding the NICs for DPDK" if for_dpdk else ""))
        self.facts = image_setup.guest_facts(self.agent)
        nics = image_setup.read_nics(self.agent, plan)
        self.negotiated = compare_nics(plan, nics)
        by_mac = {n["mac"]: n for n in nics}
        missing = [f"nic{n.index} ({n.mac})" for n in plan.nics if n.mac not in by_mac]
        if missing:
            raise HypervisorError(f"{plan.domain_name}: the guest shows no network device for {', '.join(missing)} "
                                  "(check: the image has the virtio_net driver)")
        self.pcis = [by_mac[n.mac]["pci"] for n in plan.nics]
        self.ready = {"kernel": self.facts.get("kernel"), "dpdk": self.facts.get("dpdk"), "pci": self.pcis,
                      "agent_s": round(self.agent_s, 1)}
        if not for_dpdk:
            return t0
        self.hugepages = image_setup.reserve_hugepages(self.agent, plan.memory_mib)
        self.driver = image_setup.load_driver(self.agent)
        image_setup.bind(self.agent, self.pcis, self.driver)
        self.ready.update(driver=self.driver, hugepages=self.hugepages)
        return t0

    def reprobe(self) -> None:
        """After a NIC swap, through the agent: every NIC back (read by MAC until all are; a PCI bus rescan
        after :data:`RESCAN_AFTER_S` in case the guest missed the ACPI notification), what its driver
        negotiated (``ethtool -g/-l`` before binding, as at boot), then bound for DPDK again when it was
        (hugepages stay reserved). AgentError when they do not all come back within :data:`REPROBE_S`."""
        assert self.agent is not None
        plan = self.plan
        t0 = time.monotonic()
        rescanned = False
        while True:
            nics = image_setup.read_nics(self.agent, plan)
            if len(nics) == len(plan.nics):
                break
            waited = time.monotonic() - t0
            if not rescanned and waited > RESCAN_AFTER_S:
                with contextlib.suppress(AgentError):
                    self.agent.write_file("/sys/bus/pci/rescan", b"1\n")
                rescanned = True
            if waited > REPROBE_S:
                found = {n["mac"] for n in nics}
                missing = [f"nic{n.index} ({n.mac})" for n in plan.nics if n.mac not in found]
                raise AgentError(f"{plan.domain_name}: the guest shows no network device for {', '.join(missing)} "
                                 f"{REPROBE_S:.0f} s after the swap")
            signals.sleep(0.5)
        self.negotiated = compare_nics(plan, nics)
        by_mac = {n["mac"]: n for n in nics}
        self.pcis = [by_mac[n.mac]["pci"] for n in plan.nics]
        self.ready["pci"] = self.pcis
        if self.driver:
            image_setup.bind(self.agent, self.pcis, self.driver)

    # -- the forwarder ---------------------------------------------------------------------------

    def start_forwarder(self) -> tuple[str, ...]:
        assert self.agent is not None
        fwd = image_setup.forwarder_argv(self.plan, self.pcis)
        with contextlib.suppress(AgentError):
            self.agent.write_file(image_setup.FORWARDER_LOG, b"")
        self.fwd_argv = fwd.argv
        self.fwd_pid = self.agent.spawn(list(fwd.argv), image_setup.FORWARDER_LOG)
        return fwd.argv

    def forwarder_tail(self, lines: int = 8) -> str:
        if self.agent is None:
            return ""
        return self.agent.tail(image_setup.FORWARDER_LOG, lines)

    def check_forwarder(self) -> None:
        """A forwarder that exited: its exit code and last output lines."""
        if self.agent is None or self.fwd_pid is None:
            return
        code = self.agent.exited(self.fwd_pid)
        if code is not None:
            self.fwd_pid = None
            tail = " | ".join(self.forwarder_tail(6).splitlines())
            raise GuestForwarderError(f"the guest's forwarder ({self.fwd_argv[0] if self.fwd_argv else '?'}) exited "
                                      f"with code {code}: {tail or 'no output'}")

    def end_forwarder(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGINT (testpmd and l2fwd stop their ports and exit), SIGKILL after ``timeout_s``; never raises."""
        if self.agent is None or self.fwd_pid is None:
            return
        pid, self.fwd_pid = self.fwd_pid, None
        with contextlib.suppress(AgentError):
            self.agent.run(["kill", "-INT", str(pid)], timeout_s=10)
            deadline = time.monotonic() + timeout_s
            while self.agent.exited(pid) is None:
                if time.monotonic() > deadline:
                    self.agent.run(["kill", "-KILL", str(pid)], timeout_s=10)
                    break
                signals.sleep(0.5)

    def record_warnings(self) -> list[str]:
        return [*super().record_warnings(), HOST_SIDE_ONLY]

    def close(self) -> None:
        self.end_forwarder(timeout_s=5)
        self.agent = None
        super().close()


class ImageGuestLab(GuestLab):
    """A user's image guest (``guest.image``) with its own forwarder (``workload.forwarder`` testpmd or
    command), fed by labctl's host side (labgen or the testpmd vswitch in flowgen mode) over vhost-user."""

    def __init__(self, plan: LabPlan, *args: Any, **kwargs: Any):
        super().__init__(plan, *args, **kwargs)
        self.domain = ImageDomain(plan, self.state, self.uri, self.phase)

    @property
    def image_domain(self) -> ImageDomain:
        assert isinstance(self.domain, ImageDomain)
        return self.domain

    def boot_domain(self) -> float:
        plan = self.plan

        def vhost_user_servers() -> None:
            self.phase("starting the host side (vhost-user servers)")
            self._start_host_side(self._host_ports(), [n.socket for n in plan.nics])

        t0 = self.domain.boot(vhost_user_servers)
        if self.domain.qemu is not None:
            self.programs.add(self.domain.qemu)
        if self.domain.qemu_pid:
            self.pids["qemu"] = self.domain.qemu_pid
        return t0

    def swap_refusal(self, plan: LabPlan) -> str | None:
        """An image booted by its own loader under TCG with vhost-user NICs gets ``vectors=0`` per NIC through
        ``<qemu:override>`` (domxml ``_no_msix``), which libvirt applies to the devices QEMU starts with, not to
        a hot-plugged one (and QEMU 7.2 crashes with vhost-user and MSI-X under TCG): such a guest boots."""
        image = plan.image
        if image is not None and not image.kernel and self.domain_type == "qemu" and plan.needs_shared_memory:
            return ("the image boots by its own loader under TCG, where each vhost-user NIC needs vectors=0 "
                    "(qemu:override), which libvirt gives only to the devices a domain starts with")
        return None

    def _host_ports(self) -> list[str]:
        from labctl.lab.embedded.vswitch import host_ports

        return host_ports(self.plan, nics=list(self.plan.nics))

    # -- one trial -------------------------------------------------------------------------------

    def start(self, plan: LabPlan | None = None) -> None:
        self.use_plan(plan)
        plan = self.plan
        dom = self.image_domain
        t0 = time.monotonic()
        dom.apply_pins()
        if self.vswitch is not None:
            self.vswitch.command(f"set txpkts {plan.packet_size}")
        self.phase(f"starting the guest's forwarder ({plan.image.forwarder if plan.image else '?'})")
        dom.start_forwarder()
        self._wait_forwarding(FORWARDER_TIMEOUT_S)
        if self.vswitch is not None:
            self.vswitch.command("start")
        self.timings["setup_s"] = time.monotonic() - t0

    def _wait_forwarding(self, timeout_s: float) -> None:
        """Until the forwarder forwards: the host side's links up (the guest's queues ready), then with labgen
        short probes at a low rate until frames come back (a forwarder still waiting on its own link checks
        forwards nothing yet); its exit is caught meanwhile. Bounded; its last output lines when it never gets
        there. (flowgen: the links only.)"""
        dom = self.image_domain
        deadline = time.monotonic() + timeout_s
        what = "bring its ports up"
        while True:
            dom.check_forwarder()
            if self._links_up():
                what = "forward the probe frames"
                if self.generator is None or self._probe_forwarded():
                    return
            if time.monotonic() > deadline:
                tail = " | ".join(dom.forwarder_tail(6).splitlines())
                raise GuestForwarderError(f"the guest's forwarder did not {what} within {timeout_s:.0f} s "
                                          f"(its last output: {tail or 'none'})")
            signals.sleep(1.0)

    def _probe_forwarded(self) -> bool:
        """A 0.5 s labgen trial at PROBE_PPS per port: did any frame come back through the guest?"""
        from labctl.workload.paced import trial_spec

        assert self.generator is not None
        spec = trial_spec(self.plan.generator, PROBE_PPS, 0.5, 0.0)
        return self.generator.run_trial(spec).received > 0

    def _links_up(self) -> bool:
        if self.generator is not None:
            ports = self.generator.ports()
            return all(p.get("started") and p.get("link") for p in ports.values())
        assert self._telemetry is not None and self.vswitch is not None
        try:
            wait_links(self._telemetry, len(self.plan.nics), self.vswitch, timeout_s=0.5)
            return True
        except Exception:  # noqa: BLE001 - not yet
            return False

    def _host_ports_stats(self) -> dict[int, dict[str, Any]]:
        tel = self.generator.tel if self.generator is not None else self._telemetry
        if tel is None:
            return {}
        return tel.snapshot()

    def guest_counters(self) -> GuestCounters:
        """The guest's side from the host side's per-port counters (:data:`HOST_SIDE_ONLY`)."""
        t = time.monotonic()
        fwd, ports = host_side_counters(self._host_ports_stats())
        return GuestCounters(t, fwd, ports)

    def snapshot(self) -> Snapshot:
        assert self.vswitch is not None and self._telemetry is not None
        t = time.monotonic()
        vswitch_ports = self._telemetry.snapshot()
        vswitch_fwd = self.vswitch.fwd_stats()
        guest_fwd, guest_ports = host_side_counters(vswitch_ports)
        return Snapshot(t, vswitch_fwd, guest_fwd, vswitch_ports, guest_ports)

    def stop_forwarding(self) -> None:
        t0 = time.monotonic()
        if self.vswitch is not None:
            self.vswitch.command("stop")
        self.image_domain.end_forwarder()
        self.timings["stop_s"] = time.monotonic() - t0

    # -- what a record needs -----------------------------------------------------------------------

    def environment(self, pins: dict[str, str], shared: bool):
        accel = "kvm" if self.domain_type == "kvm" else "tcg"
        dom = self.image_domain
        image = dict(dom.info.record()) if dom.info else {}
        image.update(guest_kernel=dom.facts.get("kernel"), guest_dpdk=dom.facts.get("dpdk"))
        return fingerprint("libvirt", pins, shared, self.hugepages, accel=accel, binaries=self.programs.record(),
                           image=image)

    def details(self) -> dict[str, Any]:
        dom = self.image_domain
        out = super().details()
        out["image"] = {**(dom.info.record() if dom.info else {}), "overlay": str(self.plan.image.overlay(self.plan.dirs))
                        if self.plan.image else None}
        out["forwarder"] = {"kind": self.plan.image.forwarder if self.plan.image else None, "argv": list(dom.fwd_argv),
                            "log": image_setup.FORWARDER_LOG}
        out["guest_counters"] = "host-side"
        return out

    def zero_reason(self) -> str:
        tail = " | ".join(self.image_domain.forwarder_tail(6).splitlines())
        return (f"the guest's forwarder forwarded nothing (its last output: {tail or 'none'}; logs in "
                f"{self.plan.dirs.log}, the forwarder's at {image_setup.FORWARDER_LOG} in the guest)")


def host_side_counters(ports: dict[int, dict[str, Any]]) -> tuple[dict[int, FwdStats], dict[int, dict[str, Any]]]:
    """Guest port p's counters as the host side's port p saw them: what it sent in (the guest received) and what
    it received (the guest sent). Drops inside the guest are not visible here."""
    fwd, out = {}, {}
    for port, stats in ports.items():
        rx, tx = int(stats.get("opackets", 0)), int(stats.get("ipackets", 0))
        fwd[port] = FwdStats(rx, 0, tx, 0)
        out[port] = {"ipackets": rx, "opackets": tx, "q_ipackets": [rx], "q_opackets": [tx]}
    return fwd, out
