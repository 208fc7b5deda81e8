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
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import Testpmd
from labctl.errors import WorkloadError
from labctl.host.fingerprint import fingerprint
from labctl.host.threads import dpdk_worker_pins
from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.lab.embedded.vswitch import connect_ports, start_recorded, vswitch_testpmd
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import LabState
from labctl.lab.plan import LabPlan
from labctl.workload.forward import Snapshot, take_snapshot, zero_reason

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
        self.vswitch: Testpmd | None = None
        self.guest: Testpmd | None = None
        self.pids: dict[str, int] = {}
        self._telemetry: list[Telemetry] = []

    def start(self) -> None:
        plan, state = self.plan, self.state
        t0 = time.monotonic()
        state.record("dir", str(plan.dirs.run))
        plan.dirs.run.mkdir(parents=True, exist_ok=True)
        plan.dirs.log.mkdir(parents=True, exist_ok=True)
        hugedir = None
        if plan.hugepages:
            grant = reserve(state, plan.dirs.hugetlbfs, plan.embedded_hugepage_mb())
            if grant is None:
                self.warnings.append("hugepages could not be reserved: ran with --no-huge")
            else:
                hugedir = grant.mount
        self.hugepages = hugedir is not None
        # the guest's ports listen and the vswitch connects to them (see labctl.lab.embedded.vswitch)
        self.vswitch = vswitch = vswitch_testpmd(plan, hugedir, client=True)
        self.guest = guest = guest_forwarder(plan, hugedir, server=True)
        sockets = [nic.socket for nic in plan.nics if nic.socket is not None]
        for sock in sockets:
            state.record("path", str(sock))
            sock.unlink(missing_ok=True)  # the guest binds it; a stale file would fail (or fool) that
        self.timings["prepare_s"] = time.monotonic() - t0
        # both start at once: the guest waits in its first socket's accept() until the vswitch connects
        self.pids["guest"] = start_recorded(state, guest)
        self.pids["vswitch"] = start_recorded(state, vswitch)
        vswitch.wait_ready()
        self.timings["vswitch_ready_s"] = time.monotonic() - t0
        connect_ports(vswitch, guest, sockets)
        guest.wait_ready()
        self.timings["guest_ready_s"] = time.monotonic() - t0
        self._telemetry = [Telemetry.connect(vswitch.eal.file_prefix), Telemetry.connect(guest.eal.file_prefix)]
        wait_links(self._telemetry[0], len(sockets), vswitch)
        self.timings["links_up_s"] = time.monotonic() - t0
        guest.command("start")
        vswitch.command("start")
        self.timings["setup_s"] = time.monotonic() - t0

    def snapshot(self) -> Snapshot:
        assert self.vswitch and self.guest
        return take_snapshot(self.vswitch, self.guest, *self._telemetry)

    def stop_forwarding(self) -> None:
        assert self.vswitch and self.guest
        t0 = time.monotonic()
        self.vswitch.command("stop")
        self.guest.command("stop")
        self.timings["stop_s"] = time.monotonic() - t0

    @property
    def pollers(self) -> int:
        """Busy-polling cores of both processes."""
        return sum(p.app.nb_cores for p in (self.vswitch, self.guest) if p is not None)

    def forwarding_cpu_s(self, report: Any, window_s: float) -> float:
        """CPU seconds of the guest forwarder's worker threads in the window."""
        return sum(t.cpu_pct for t in report.threads
                   if t.role == "guest" and t.name.startswith(FORWARDING_THREADS)) / 100.0 * window_s

    def pins(self) -> dict[str, str]:
        return {**dpdk_worker_pins("vswitch", self.pids["vswitch"]), **dpdk_worker_pins("guest", self.pids["guest"])}

    def environment(self, pins: dict[str, str], shared: bool):
        return fingerprint("embedded", pins, shared, self.hugepages)

    def details(self) -> dict[str, Any]:
        return {"host_side": "net_vhost vhost-user client ports (the guest's virtio_user ports listen)"}

    def record_warnings(self) -> list[str]:
        return []

    def zero_reason(self) -> str:
        assert self.vswitch is not None
        return zero_reason(self.vswitch, self.guest)

    def close(self) -> None:
        """Stop both processes (the guest first); never raises."""
        for tel in self._telemetry:
            with contextlib.suppress(Exception):
                tel.close()
        self._telemetry = []
        for proc in (self.guest, self.vswitch):  # the guest closes its vhost-user ports, then the vswitch
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.quit()
