"""VM-to-VM on the embedded lab: guest A sends (testpmd txonly), guest B receives (rxonly), through the vswitch.

    guest A: net_virtio_user ports (listening) --+            +-- guest B: net_virtio_user ports (listening)
                                                  vswitch: a testpmd in io mode whose net_vhost client ports
                                                  are interleaved A0, B0, A1, B1 ... so that its paired port
                                                  topology forwards A_i <-> B_i; or OVS-DPDK with flows
                                                  a{i} <-> b{i} between dpdkvhostuserclient ports

The rate is what B received; the loss is what A's driver took and B did not get, and A's TX-dropped
(its transmit ring full: the vswitch did not drain it) is counted beside it. Mailing-list numbers of this
shape: "vhost (vm1) -> vhost (vm2), testpmd txonly in vm1 and rxonly in vm2".
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from labctl.dpdk.eal import EalOptions, devarg_path, lcores_argument
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import FwdStats, Testpmd, TestpmdOptions
from labctl.errors import WorkloadError
from labctl.host.fingerprint import fingerprint
from labctl.host.sockets import unix_listening
from labctl.host.threads import dpdk_worker_pins
from labctl.safefs import remove_stale
from labctl.lab.builds import Program, Resolved, resolve
from labctl.lab.embedded.lab import FORWARDING_THREADS
from labctl.dpdk.runtime import start_recorded
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import LabState
from labctl.lab.plan import LabPlan, NicPlan
from labctl.results.record import Metrics
from labctl.workload.forward import queue_details
from labctl.lab.ovs.switch import OvsWindow

LINK_TIMEOUT_S = 30.0


def vm2vm_guest(plan: LabPlan, role: str, hugedir, program: Program | None = None) -> Testpmd:
    """Guest A (role ``guest``: txonly on the plan's NICs) or guest B (``guestb``: rxonly on the peer NICs);
    ``program``: the forwarder's binary and environment (a build's runs both guests; None: the host's)."""
    nics, mode = (plan.nics, "txonly") if role == "guest" else (plan.peer_nics, "rxonly")
    vdevs = [f"net_virtio_user{n.index},path={devarg_path(n.socket)},queues={n.queues},"
             f"queue_size={n.virtqueue_size},server=1" for n in nics]
    suffix = "guest" if role == "guest" else "guestb"
    eal = EalOptions(file_prefix=f"{plan.file_prefix}-{suffix}", lcores=lcores_argument(list(plan.pins.vcpu_cpus)),
                     vdevs=vdevs, memory_mb=plan.forwarder.memory_mb(hugedir is not None), hugepages_dir=hugedir)
    return Testpmd(role, eal, plan.forwarder.options(mode=mode), plan.dirs.log / f"{suffix}.log",
                   binary=program.path if program else None, env=dict(program.env) if program else None)


def vm2vm_vswitch(plan: LabPlan, hugedir, program: Program | None = None) -> Testpmd:
    """The testpmd vswitch: io mode, its net_vhost client ports interleaved A0, B0, A1, B1 so that testpmd's
    paired port topology forwards A_i <-> B_i; ``program``: a build's vswitch (None: the host's testpmd)."""
    vs = plan.vswitch
    ports = [nic for pair in zip(plan.nics, plan.peer_nics) for nic in pair]
    vdevs = [f"net_vhost{i},iface={devarg_path(n.socket)},queues={vs.queues},client=1" for i, n in enumerate(ports)]
    eal = EalOptions(file_prefix=f"{plan.file_prefix}-vs", lcores=lcores_argument(list(vs.pmds)), vdevs=vdevs,
                     memory_mb=vs.memory_mb(hugedir is not None), hugepages_dir=hugedir,
                     log_levels=["lib.vhost.config:warning"])
    app = TestpmdOptions(forward_mode="io", nb_cores=len(vs.pmds), rxq=vs.queues, txq=vs.queues, burst=vs.burst,
                         total_mbufs=vs.mbufs, extra=["--disable-device-start", "--mask-event=intr_lsc",
                                                      "--mask-event=queue_state"])
    return Testpmd("vswitch", eal, app, plan.dirs.log / "vswitch.log",
                   binary=program.path if program else None, env=dict(program.env) if program else None)


def vm2vm_metrics(a0: dict[int, FwdStats], a1: dict[int, FwdStats], b0: dict[int, FwdStats],
                  b1: dict[int, FwdStats], window_s: float, frame_size: int, vswitch_tx_dropped: int,
                  b_ports: tuple[dict, dict]) -> tuple[Metrics, dict[str, Any]]:
    """A's and B's forward statistics at the window's two ends as metrics."""
    zero = FwdStats(0, 0, 0, 0)
    a = {p: a1[p].minus(a0.get(p, zero)) for p in a1}
    b = {p: b1[p].minus(b0.get(p, zero)) for p in b1}
    sent = sum(s.tx_packets for s in a.values())
    a_dropped = sum(s.tx_dropped for s in a.values())
    received = sum(s.rx_packets for s in b.values())
    offered = sent + a_dropped
    window = max(window_s, 1e-9)
    metrics = Metrics(mpps=received / window / 1e6, gbps=received * frame_size * 8 / window / 1e9,
                      offered_mpps=offered / window / 1e6, achieved_mpps=sent / window / 1e6,
                      loss_ratio=(1 - received / offered) if offered else None, rx_packets=received,
                      tx_packets=sent, tx_dropped=a_dropped, window_s=window_s)
    metrics.drops = {"guest_a_tx_ring_full": a_dropped, "guest_b_rx_ring_full": vswitch_tx_dropped,
                     "unaccounted": max(sent - received - vswitch_tx_dropped, 0)}
    metrics.queue_shares, per_queue = queue_details(*b_ports)
    details = {"guest_a_fwd": {p: s.__dict__ for p, s in a.items()}, "guest_fwd": {p: s.__dict__ for p, s in b.items()},
               "per_queue": per_queue}
    return metrics, details


class Vm2vmLab(OvsWindow):
    """Two embedded guests of ``plan`` (A: ``plan.nics``, B: ``plan.peer_nics``) and the vswitch between."""

    host_kind = "vhost-user"

    def __init__(self, plan: LabPlan, state: LabState, warnings: list[str] | None = None):
        self.plan = plan
        self.state = state
        self.warnings = [] if warnings is None else warnings
        self.timings: dict[str, float] = {}
        self.pids: dict[str, int] = {}
        self.hugepages = False
        self.generator = None  # no paced generator in this path: A sends flat out
        self.vswitch: Testpmd | None = None
        self.switch: Any = None  # OVS-DPDK
        self.a: Testpmd | None = None
        self.b: Testpmd | None = None
        self._telemetry: dict[str, Telemetry] = {}
        self.programs = Resolved()  # the binaries it runs (the plan's build, else the host's), recorded

    def start(self) -> None:
        plan, state = self.plan, self.state
        t0 = time.monotonic()
        ovs = plan.vswitch.kind == "ovs-dpdk"
        # resolved before anything is created: a build's path that went bad since validation stops here
        forwarder = self.programs.add(resolve(plan.build, "forwarder"))  # guests A and B alike
        vswitch = self.programs.add(resolve(plan.build, "vswitch", plan.vswitch.kind))
        state.make_dirs(plan.dirs.run, plan.dirs.log)
        mount = plan.dirs.hugetlbfs
        hugedir = None
        if ovs:
            from labctl.lab.ovs.switch import OvsSwitch

            pmds = frozenset().union(*(p for p in plan.vswitch.pmds if p)) or None
            self.switch = OvsSwitch(plan.name, state, plan.dirs.run.parent, plan.dirs.log, pmds, mount,
                                    socket_mem_mb=plan.vswitch.socket_mem_mb, vswitchd=vswitch.path,
                                    vswitchd_env=dict(vswitch.env))
            self.switch.start()
        if ovs or plan.hugepages:
            need = 2 * plan.forwarder.memory_mb(True) + (0 if ovs else plan.vswitch.memory_mb(True))
            grant = reserve(state, mount, need)
            if grant is None and ovs:
                raise WorkloadError("hugepages for the two guests could not be reserved beside OVS's")
            if grant is None:
                self.warnings.append("hugepages could not be reserved: ran with --no-huge")
            else:
                hugedir = grant.mount
        self.hugepages = hugedir is not None
        pairs = list(zip(plan.nics, plan.peer_nics))
        for a_nic, b_nic in pairs:
            for sock in (a_nic.socket, b_nic.socket):
                state.record("path", str(sock))
                remove_stale(sock)
        if ovs:
            for a_nic, b_nic in pairs:
                self.switch.add_vhostuser_client(f"a{a_nic.index}", a_nic.socket, n_rxq=a_nic.queues)
                self.switch.add_vhostuser_client(f"b{b_nic.index}", b_nic.socket, n_rxq=b_nic.queues)
                self.switch.connect(f"a{a_nic.index}", f"b{b_nic.index}")
            if plan.vswitch.ovs:
                self.switch.configure(**plan.vswitch.ovs)
        self.a = vm2vm_guest(plan, "guest", hugedir, forwarder)
        self.b = vm2vm_guest(plan, "guestb", hugedir, forwarder)
        self.pids["guest"] = start_recorded(state, self.a)
        self.pids["guestb"] = start_recorded(state, self.b)
        if ovs:
            self.a.wait_ready()
            self.b.wait_ready()
            self.switch.wait_connected()
        else:
            self._start_testpmd_vswitch(pairs, hugedir, vswitch)
        self.timings["guests_ready_s"] = time.monotonic() - t0
        self._telemetry = {"guest": Telemetry.connect(self.a.eal.file_prefix),
                           "guestb": Telemetry.connect(self.b.eal.file_prefix)}
        self.b.command("start")
        if self.vswitch is not None:
            self.vswitch.command("start")
        self.a.command("start")
        self.timings["setup_s"] = time.monotonic() - t0

    def _start_testpmd_vswitch(self, pairs: list[tuple[NicPlan, NicPlan]], hugedir, program: Program) -> None:
        plan = self.plan
        ports = [nic for pair in pairs for nic in pair]
        self.vswitch = vm2vm_vswitch(plan, hugedir, program)
        self.pids["vswitch"] = start_recorded(self.state, self.vswitch)
        self.vswitch.wait_ready()
        for index, nic in enumerate(ports):
            listener = self.a if nic in plan.nics else self.b
            listener.wait_paths([nic.socket], 60.0, ready=unix_listening)
            out = self.vswitch.command(f"port start {index}")
            if "fail" in out.lower():
                raise WorkloadError(f"vswitch port {index} did not start: {out.strip().splitlines()[-1]}")
        self.a.wait_ready()
        self.b.wait_ready()

    # -- one trial -----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        assert self.a and self.b
        return {"t": time.monotonic(), "a": self.a.fwd_stats(), "b": self.b.fwd_stats(),
                "vs": self.vswitch.fwd_stats() if self.vswitch else {},
                "b_ports": self._telemetry["guestb"].snapshot()}

    def metrics(self, before: dict[str, Any], after: dict[str, Any]) -> tuple[Metrics, dict[str, Any]]:
        if self.vswitch is not None:  # its TX-dropped toward B's ports: B's rx ring full
            b_ports = range(1, 2 * len(self.plan.nics), 2)
            dropped = sum(after["vs"][p].tx_dropped - before["vs"].get(p, FwdStats(0, 0, 0, 0)).tx_dropped
                          for p in b_ports if p in after["vs"])
        else:
            dropped = 0
        return vm2vm_metrics(before["a"], after["a"], before["b"], after["b"], after["t"] - before["t"],
                             self.plan.packet_size, dropped, (before["b_ports"], after["b_ports"]))


    def stop_forwarding(self) -> None:
        t0 = time.monotonic()
        for proc in (self.a, self.vswitch, self.b):
            if proc is not None:
                proc.command("stop")
        self.timings["stop_s"] = time.monotonic() - t0

    @property
    def pollers(self) -> int:
        host = sum(1 for p in self.plan.vswitch.pmds if p) or 1
        return host + 2 * self.plan.forwarder.cores

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        return sum(t.cpu_pct for t in report.threads
                   if t.role in ("guest", "guestb") and t.name.startswith(FORWARDING_THREADS)) / 100.0 * window_s

    def pins(self) -> dict[str, str]:
        pins = dpdk_worker_pins("guest", self.pids["guest"])
        pins.update({k.replace("guest.", "guestb.", 1): v for k, v in dpdk_worker_pins("guest", self.pids["guestb"]).items()})
        if "vswitch" in self.pids:
            pins.update(dpdk_worker_pins("vswitch", self.pids["vswitch"]))
        return pins

    def environment(self, pins: dict[str, str], shared: bool):
        return fingerprint("embedded", pins, shared, self.hugepages, binaries=self.programs.record())

    def details(self) -> dict[str, Any]:
        via = "OVS-DPDK flows a_i <-> b_i" if self.switch is not None else "a testpmd vswitch in io mode"
        return {"host_side": f"vm2vm: guest A (txonly) -> {via} -> guest B (rxonly)", "topology": "vm2vm",
                "vswitch": self.plan.vswitch.kind}

    def record_warnings(self) -> list[str]:
        return []

    def zero_reason(self) -> str:
        return f"guest B received nothing (see the logs in {self.plan.dirs.log})"

    def close(self) -> None:
        for tel in self._telemetry.values():
            with contextlib.suppress(Exception):
                tel.close()
        self._telemetry = {}
        for proc in (self.a, self.b, self.vswitch):
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.quit()
        if self.switch is not None:
            with contextlib.suppress(Exception):
                self.switch.stop()
            self.switch = None
