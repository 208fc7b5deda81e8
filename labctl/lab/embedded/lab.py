"""The embedded lab, up and forwarding: the vswitch (generator + sink) and the guest forwarder.

    reserve hugepages -> start both testpmds (guest listens, vswitch connects port by port)
    -> vhost-user links up -> forwarding, and back down again

Every process, socket, runtime directory, hugetlbfs mount and hugepage reservation is recorded in the
lab's ledger before it is created; :meth:`EmbeddedLab.close` stops the processes (the guest first: its
close talks to the vswitch) and the caller's ledger teardown removes the rest.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from labctl import signals
from labctl.dpdk.labgen import Labgen, vhost_client_labgen
from labctl.dpdk.labgen import connect_ports as labgen_connect_ports
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import Testpmd
from labctl.errors import WorkloadError
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import dpdk_worker_pins
from labctl.lab.builds import Resolved, resolve
from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.dpdk.runtime import start_recorded
from labctl.lab.embedded.vswitch import connect_ports, vswitch_testpmd
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import LabState
from labctl.lab.plan import LabPlan
from labctl.safefs import remove_stale
from labctl.workload.forward import GuestCounters, Snapshot, take_snapshot, zero_reason
from labctl.workload.paced import PacedRunner

LINK_TIMEOUT_S = 30.0
FORWARDING_THREADS = ("rte-worker", "lcore-worker")  # DPDK 22.11 names its worker lcores' threads so


def wait_links(tel: Telemetry, ports: int, proc: Testpmd, timeout_s: float = LINK_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        states = [tel.command(f"/ethdev/link_status,{p}") or {} for p in range(ports)]
        if all(s.get("status") == "UP" for s in states):
            return
        if proc.proc and proc.proc.poll() is not None:
            raise WorkloadError(f"vswitch exited before the guest connected: {proc.last_error()}")
        if time.monotonic() > deadline:
            raise WorkloadError(f"vhost-user links not up after {timeout_s:.0f} s (log {proc.log_path})")
        signals.sleep(0.05)


class EmbeddedLab:
    """One embedded lab of ``plan``, recorded in ``state``; ``start()`` brings it up to forwarding."""

    host_kind = "vhost-user"

    def __init__(self, plan: LabPlan, state: LabState, warnings: list[str] | None = None):
        self.plan = plan
        self.state = state
        self.warnings: list[str] = [] if warnings is None else warnings  # appended to as they happen
        self.timings: dict[str, float] = {}
        self.hugepages = False
        self.vswitch: Testpmd | None = None  # flowgen: the vswitch testpmd is generator and sink
        self.generator: Labgen | None = None  # labgen: the paced generator and sink
        self.guest: Testpmd | None = None
        self.pids: dict[str, int] = {}
        self._telemetry: list[Telemetry] = []
        self.paced = PacedRunner(self)
        self.programs = Resolved()  # the binaries it runs (the plan's build, else the host's), recorded

    def start(self) -> None:
        plan, state = self.plan, self.state
        t0 = time.monotonic()
        # resolved before anything is created: a build's path that went bad since validation stops here
        forwarder = self.programs.add(resolve(plan.build, "forwarder"))
        host = self.programs.add(resolve(plan.build, "vswitch")) if plan.generator.kind != "labgen" else None
        state.make_dirs(plan.dirs.run, plan.dirs.log)
        hugedir = None
        if plan.hugepages:
            grant = reserve(state, plan.dirs.hugetlbfs, plan.embedded_hugepage_mb())
            if grant is None:
                self.warnings.append("hugepages could not be reserved: ran with --no-huge")
            else:
                hugedir = grant.mount
        self.hugepages = hugedir is not None
        # the guest's ports listen and the host side connects to them (see labctl.lab.embedded.vswitch)
        self.guest = guest = guest_forwarder(plan, hugedir, server=True, program=forwarder)
        sockets = [nic.socket for nic in plan.nics if nic.socket is not None]
        if plan.generator.kind == "labgen":
            self.generator = vhost_client_labgen(sockets, plan.generator.queues, f"{plan.file_prefix}-gen",
                                                 list(plan.generator.workers), hugedir, plan.dirs.log / "labgen.log")
        else:
            self.vswitch = vswitch_testpmd(plan, hugedir, client=True, program=host)
        for sock in sockets:
            state.record("path", str(sock))
            remove_stale(sock)  # the guest binds it; a stale file (or a planted symlink) would fail or fool that
        self.timings["prepare_s"] = time.monotonic() - t0
        # both start at once: the guest waits in its first socket's accept() until the host side connects
        self.pids["guest"] = start_recorded(state, guest)
        if self.generator is not None:
            self.pids["generator"] = self.generator.start_recorded(state)
            self.generator.connect()
            self.timings["host_ready_s"] = time.monotonic() - t0
            labgen_connect_ports(self.generator, guest, sockets)
        else:
            assert self.vswitch is not None
            self.pids["vswitch"] = start_recorded(state, self.vswitch)
            self.vswitch.wait_ready()
            self.timings["host_ready_s"] = time.monotonic() - t0
            connect_ports(self.vswitch, guest, sockets)
        guest.wait_ready()
        self.timings["guest_ready_s"] = time.monotonic() - t0
        self._telemetry = [Telemetry.connect(guest.eal.file_prefix)]
        if self.vswitch is not None:
            self._telemetry.insert(0, Telemetry.connect(self.vswitch.eal.file_prefix))
            wait_links(self._telemetry[0], len(sockets), self.vswitch)
        else:
            assert self.generator is not None
            self.generator.wait_links()
        self.timings["links_up_s"] = time.monotonic() - t0
        guest.command("start")
        if self.vswitch is not None:
            self.vswitch.command("start")  # labgen sends per trial, when asked
        self.timings["setup_s"] = time.monotonic() - t0

    def snapshot(self) -> Snapshot:
        assert self.vswitch and self.guest
        return take_snapshot(self.vswitch, self.guest, *self._telemetry)

    def guest_counters(self) -> GuestCounters:
        """The guest forwarder's counters now (labgen trials: the host side counts for itself)."""
        assert self.guest
        return GuestCounters(time.monotonic(), self.guest.fwd_stats(), self._telemetry[-1].snapshot())

    def stop_forwarding(self) -> None:
        assert self.guest
        t0 = time.monotonic()
        if self.vswitch is not None:
            self.vswitch.command("stop")
        self.guest.command("stop")
        self.timings["stop_s"] = time.monotonic() - t0

    @property
    def pollers(self) -> int:
        """Busy-polling cores of both processes."""
        host = len(self.plan.generator.workers) if self.generator is not None else 0
        return host + sum(p.app.nb_cores for p in (self.vswitch, self.guest) if p is not None)

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        """CPU seconds of the guest forwarder's worker threads in the window."""
        return sum(t.cpu_pct for t in report.threads
                   if t.role == "guest" and t.name.startswith(FORWARDING_THREADS)) / 100.0 * window_s

    def pins(self) -> dict[str, str]:
        host = "vswitch" if "vswitch" in self.pids else "generator"
        # labgen's workers are the vswitch PMD cores: named vswitch.* so pinning layouts read alike
        return {**dpdk_worker_pins("vswitch", self.pids[host]), **dpdk_worker_pins("guest", self.pids["guest"])}

    def environment(self, pins: dict[str, str], shared: bool):
        return fingerprint("embedded", pins, shared, self.hugepages, binaries=self.programs.record())

    def details(self) -> dict[str, Any]:
        who = "labgen" if self.generator is not None else "testpmd flowgen"
        return {"host_side": f"{who} on net_vhost vhost-user client ports (the guest's virtio_user ports listen)",
                "generator": self.plan.generator.kind}

    def record_warnings(self) -> list[str]:
        return []

    def window_started(self) -> None:
        """The measurement window opens (a vswitch with counters of its own clears them here)."""

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        """(details, scalar metrics) the host side adds when the window closes."""
        return {}, {}

    def zero_reason(self) -> str:
        return zero_reason(self.vswitch, self.guest, str(self.plan.dirs.log))

    def close(self) -> None:
        """Stop both processes (the guest first); never raises."""
        for tel in self._telemetry:
            with contextlib.suppress(Exception):
                tel.close()
        self._telemetry = []
        for proc in (self.guest, self.vswitch, self.generator):  # the guest closes its vhost-user ports first
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.quit()
