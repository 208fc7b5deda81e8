"""VM-to-VM on libvirt guests: guest A (testpmd txonly) -> the vswitch -> guest B (testpmd rxonly).

    boot:  the vswitch first (testpmd in io mode; its ``net_vhost`` server ports interleaved A0, B0, A1,
           B1 ... so that its paired port topology forwards A_i <-> B_i), then guest A and guest B,
           each the appliance in serve mode, QEMU connecting to the vswitch's sockets as the client
    swap:  both guests' NICs unplugged, the vswitch restarted when the queue count changes, both plugged with the
           new settings at their PCI addresses, both guests re-probing (REPROBE)
    trial: live pins of both -> B's forwarder (rxonly) and A's (txonly) started over their channels ->
           links -> B, the vswitch, then A start -> snapshots (both guests' forward stats over their
           channels, the vswitch's forward stats) -> stop; both guests stay up for the next trial
    close: both guests powered off, the vswitch quits; the ledger teardown removes the rest

Guest B is the plan's peer (:meth:`labctl.lab.plan.LabPlan.peer`: its ``peer_nics``, MACs and sockets of
the lab's name + "-b", in a domain of its own, the lab's domain name + "-b"). Each guest is a
:class:`~labctl.lab.libvirt.domain.GuestDomain`; both domains, the vswitch and its sockets are in the one
lab's ledger.
The rate is what B received; the drops are A's transmit ring full, the vswitch's transmit toward B
refused (B's receive ring full) and the rest. The mailing-list shape: "vhost (vm1) -> vhost (vm2),
testpmd txonly in vm1 and rxonly in vm2".
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import FwdStats, Testpmd
from labctl.errors import WorkloadError
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import dpdk_worker_pins
from labctl.lab.embedded.lab import wait_links
from labctl.lab.embedded.vm2vm import vm2vm_metrics
from labctl.dpdk.runtime import start_recorded
from labctl.lab.embedded.vswitch import host_ports, vswitch_testpmd
from labctl.lab.ledger import LabState
from labctl.lab.builds import Resolved, resolve
from labctl.lab.libvirt.domain import (FORWARDER_TIMEOUT_S, GuestDomain, check_measurable,
                                       give_to_qemu, guest_stats, wait_for_paths)
from labctl.lab.plan import LabPlan
from labctl.results.record import Metrics
from labctl.safefs import make_dir, remove_stale


class Vm2vmGuestLab:
    """Guests A and B of ``plan`` on ``uri`` and the testpmd vswitch between them, recorded in ``state``."""

    host_kind = "vhost-user"
    generator = None  # no paced generator in this path: A sends flat out
    domains = 2  # a boot starts guests A and B

    def __init__(self, plan: LabPlan, state: LabState, uri: str, warnings: list[str],
                 phase: Callable[[str], None] = lambda _text: None):
        self.plan = plan
        self.state = state
        self.uri = uri
        self.phase = phase
        self.key = plan.domain_key()
        self.a = GuestDomain(plan, state, uri, phase)
        self.b = GuestDomain(plan.peer(), state, uri, phase)
        self.warnings = warnings
        self.vswitch: Testpmd | None = None
        self._telemetry: Telemetry | None = None
        self.timings: dict[str, float] = {}
        self.boot_s = 0.0
        self.booted_now = False
        self.reached: dict[str, Any] = {}  # how this trial reached its configuration (LabSession's)
        self.hugepages = plan.hugepages
        self.programs = Resolved()  # the binaries it runs (the plan's build, else the host's), recorded

    @property
    def pids(self) -> dict[str, int]:
        pids = {}
        if self.a.qemu_pid:
            pids["qemu"] = self.a.qemu_pid
        if self.b.qemu_pid:
            pids["qemub"] = self.b.qemu_pid
        if self.vswitch is not None and self.vswitch.proc is not None:
            pids["vswitch"] = self.vswitch.proc.pid
        return pids

    def _ports(self) -> list:
        """The vswitch's ports in order: A0, B0, A1, B1 ... (paired topology: A_i <-> B_i)."""
        return [nic for pair in zip(self.plan.nics, self.plan.peer_nics) for nic in pair]

    # -- boot ------------------------------------------------------------------------------------

    def boot(self) -> None:
        """The vswitch's vhost-user servers for both guests, then guest A and guest B."""
        t0 = time.monotonic()
        plan = self.plan
        check_measurable(plan, self.uri)  # with the forwarder both appliances carry (appliance_forwarder)
        # a build's binaries checked before anything is created (GuestDomain.boot checks its QEMU again)
        vswitch = self.programs.add(resolve(plan.build, "vswitch"))
        resolve(plan.build, "qemu")
        ports = self._ports()
        sockets = [nic.socket for nic in ports]
        self.state.make_dirs(plan.dirs.run, plan.dirs.log)
        make_dir(self.b.plan.dirs.log, qemu=True)
        for sock in sockets:
            self.state.record("path", str(sock))
            remove_stale(sock)
        self.phase("starting the vswitch (vhost-user servers for guests A and B)")
        self._start_vswitch(vswitch)
        for name, guest in (("A", self.a), ("B", self.b)):
            self.phase(f"guest {name}")
            guest.boot()
        if self.a.qemu is not None:
            self.programs.add(self.a.qemu)
        self.programs.add(resolve(plan.build, "forwarder"))  # what both appliances carry
        self.boot_s = time.monotonic() - t0
        self.booted_now = True
        self.timings["boot_s"] = self.boot_s

    # -- a NIC swap ------------------------------------------------------------------------------

    def swap_refusal(self, plan: LabPlan) -> str | None:
        return None

    def swap(self, plan: LabPlan) -> float:
        """Both guests' NICs swapped for ``plan``'s (guest B's for ``plan.peer()``): A's and B's unplugged, the
        vswitch restarted with the new queue count while none is plugged (when it changed), both plugged again
        at their PCI addresses, both guests re-probing their NICs. Returns the seconds it took."""
        from labctl.lab.libvirt import hotplug
        from labctl.lab.libvirt.domxml import RenderContext

        t0 = time.monotonic()
        old = self.plan
        hotplug.check_same_nics(old, plan)
        self.phase("hot-swapping both guests' NICs")
        olds = {id(g): hotplug.unplug(self.uri, g.dom, g.plan) for g in (self.a, self.b)}
        t1 = time.monotonic()
        if old.vswitch.queues != plan.vswitch.queues:
            self.phase(f"restarting the vswitch with {plan.vswitch.queues} queue(s)")
            self._stop_vswitch()
            self.plan = plan
            self._start_vswitch()
        t2 = time.monotonic()
        for guest, new in ((self.a, plan), (self.b, plan.peer())):
            hotplug.plug(guest.dom, new, olds[id(guest)], RenderContext())
            guest.plan = new
        t3 = time.monotonic()
        for guest in (self.a, self.b):
            guest.reprobe()
        self.plan = plan
        self.key = plan.domain_key()
        swap_s = time.monotonic() - t0
        self.timings.update(swap_detach_s=round(t1 - t0, 3), swap_between_s=round(t2 - t1, 3),
                            swap_attach_s=round(t3 - t2, 3), swap_guest_s=round(time.monotonic() - t3, 3),
                            swap_s=swap_s)
        return swap_s

    def _start_vswitch(self, program: Any = None) -> None:
        """The testpmd vswitch in io mode with a net_vhost server per NIC of A and B (ports A0, B0, A1, B1 ...),
        its sockets handed to QEMU's group."""
        plan = self.plan
        ports = self._ports()
        sockets = [nic.socket for nic in ports]
        program = program or self.programs.add(resolve(plan.build, "vswitch"))
        for sock in sockets:
            remove_stale(sock)  # a server that quit may leave its socket file
        self.vswitch = vswitch_testpmd(plan, None, forward_mode="io", vdevs=host_ports(plan, nics=ports),
                                       program=program)
        start_recorded(self.state, self.vswitch)
        self.vswitch.wait_ready()
        self._telemetry = Telemetry.connect(self.vswitch.eal.file_prefix)
        wait_for_paths(self.vswitch, sockets)
        give_to_qemu(sockets)

    def _stop_vswitch(self) -> None:
        """The vswitch quits (its process record forgotten once it has gone; its sockets stay recorded)."""
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        if self.vswitch is not None:
            pid = self.vswitch.proc.pid if self.vswitch.proc is not None else None
            self.vswitch.quit()
            for resource in self.state.find("process"):
                if pid is not None and resource.ident == str(pid):
                    self.state.forget(resource)
        self.vswitch = self._telemetry = None

    # -- one trial -------------------------------------------------------------------------------

    def start(self, plan: LabPlan | None = None) -> None:
        if plan is not None:
            if plan.domain_key() != self.key:
                raise ValueError("a trial with another domain needs other guests")
            self.plan = self.a.plan = plan
            self.b.plan = plan.peer()
        plan = self.plan
        t0 = time.monotonic()
        assert self.vswitch is not None and self._telemetry is not None
        assert self.a.channel is not None and self.b.channel is not None
        for guest in (self.a, self.b):
            guest.apply_pins()
        self.phase("starting guest B's receiver and guest A's sender")
        self.b.channel.start_forwarder(plan.forwarder.options(mode="rxonly").argv(), FORWARDER_TIMEOUT_S)
        self.a.channel.start_forwarder(plan.forwarder.options(mode="txonly").argv(), FORWARDER_TIMEOUT_S)
        wait_links(self._telemetry, 2 * len(plan.nics), self.vswitch, timeout_s=FORWARDER_TIMEOUT_S)
        self.b.channel.testpmd("start")
        self.vswitch.command("start")
        self.a.channel.testpmd("start")
        self.timings["setup_s"] = time.monotonic() - t0

    def snapshot(self) -> dict[str, Any]:
        assert self.vswitch and self.a.channel and self.b.channel
        t = time.monotonic()
        a_fwd, _a_ports = guest_stats(self.a.channel.stats())
        b_fwd, b_ports = guest_stats(self.b.channel.stats())
        return {"t": t, "a": a_fwd, "b": b_fwd, "vs": self.vswitch.fwd_stats(), "b_ports": b_ports}

    def metrics(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[Metrics, dict[str, Any]]:
        zero = FwdStats(0, 0, 0, 0)
        b_ports = range(1, 2 * len(self.plan.nics), 2)  # the vswitch's TX-dropped toward B: B's rx ring full
        dropped = sum(after["vs"][p].tx_dropped - before["vs"].get(p, zero).tx_dropped
                      for p in b_ports if p in after["vs"])
        return vm2vm_metrics(before["a"], after["a"], before["b"], after["b"], after["t"] - before["t"],
                             self.plan.packet_size, dropped, (before["b_ports"], after["b_ports"]))

    def window_started(self) -> None:
        """The measurement window opens (nothing of the host side to clear)."""

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        return {}, {}

    def stop_forwarding(self) -> None:
        t0 = time.monotonic()
        assert self.a.channel and self.b.channel and self.vswitch
        self.a.channel.end_forwarder()
        self.vswitch.command("stop")
        self.b.channel.end_forwarder()
        self.timings["stop_s"] = time.monotonic() - t0

    def end_trial(self) -> None:
        """After a trial (also a failed one): both forwarders ended; the guests stay up."""
        self.booted_now = False
        self.timings = {}
        for guest in (self.a, self.b):
            guest.end_forwarder(timeout_s=30)
        if self.vswitch is not None:
            with contextlib.suppress(WorkloadError):
                self.vswitch.command("stop")

    # -- what a record needs -----------------------------------------------------------------------

    @property
    def pollers(self) -> int:
        """The vswitch's PMDs and both guests' vCPUs (their testpmds poll)."""
        return (self.vswitch.app.nb_cores if self.vswitch else 1) + 2 * self.plan.vcpus

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        return sum(t.cpu_pct for t in report.threads if t.role in ("qemu", "qemub") and t.name.startswith("CPU ")) \
            / 100.0 * window_s

    def pins(self) -> dict[str, str]:
        pins = dpdk_worker_pins("vswitch", self.vswitch.proc.pid) if self.vswitch and self.vswitch.proc else {}
        for prefix, guest in (("guest", self.a), ("guestb", self.b)):
            pins.update(guest.thread_pins(f"{prefix}.vcpu", f"{prefix}.emulator"))
        return pins

    def environment(self, pins: dict[str, str], shared: bool):
        accel = "kvm" if self.a.domain_type == "kvm" else "tcg"
        return fingerprint("libvirt", pins, shared, self.hugepages, accel=accel, binaries=self.programs.record())

    def details(self) -> dict[str, Any]:
        return {"nics": self.a.negotiated, "nics_b": self.b.negotiated, "topology": "vm2vm", "vswitch": "testpmd",
                "host_side": "vm2vm: guest A (txonly) -> a testpmd vswitch in io mode (net_vhost servers) -> "
                             "guest B (rxonly)",
                "guest": self.a.ready, "guest_b": self.b.ready, "domain_type": self.a.domain_type,
                "boot": {"booted": self.booted_now, "boot_s": round(self.boot_s, 2) if self.booted_now else 0.0},
                "reached": dict(self.reached)}

    def record_warnings(self) -> list[str]:
        out = self.a.record_warnings()
        out += [f"guest B: {w}" for w in self.b.record_warnings() if "TCG" not in w]
        return out

    def zero_reason(self) -> str:
        return f"guest B received nothing (see {self.plan.dirs.log}: vswitch.log, serial.log, guest-b/)"

    # -- down ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Both guests off, the vswitch gone; never raises (the ledger teardown removes the rest)."""
        for guest in (self.a, self.b):
            with contextlib.suppress(Exception):
                guest.close()
        if self._telemetry is not None:
            with contextlib.suppress(Exception):
                self._telemetry.close()
        if self.vswitch is not None:
            with contextlib.suppress(Exception):
                self.vswitch.quit()
        self.vswitch = self._telemetry = None
