"""A kernel-stack libvirt guest as a measured lab: its NIC stays with the guest kernel's virtio_net driver,
and TCP sessions (iperf3 streams, sockperf request/response) run between it and the host.

    boot:  define + start the domain (appliance in serve mode, ``labctl.stack=kernel``:
           :meth:`~labctl.lab.libvirt.guest.GuestLab.boot_domain`) -> HELLO
           -> addresses: tap: this lab's /30 (``labctl.lab.plan.tcp_subnet``) on the host's tap device
           and in the guest (NET); network: the bridge's address, the guest's from DHCP
           -> vhost-net workers pinned where the host has them (``guest.pinning.vhost``)
    swap:  GuestLab's (the NIC unplugged and plugged with its new settings, REPROBE in the guest: brought up
           again), then the addresses again (libvirt made the tap anew) and the vhost-net pins
    trial: live vCPU/emulator pins -> ``ethtool -L combined N`` in the guest (QUEUES, read back)
           -> servers on the receiving side, a client per session on the sending side (host processes
           tagged in the ledger; guest jobs over the channel: RUN) -> counters (STAT) -> results
           -> every session's processes stopped (KILL); the guest stays up for the next trial
    close: as GuestLab (POWEROFF, else destroy); the host's tools are stopped first

Where the host has no /dev/vhost-net (these machines) the NIC runs QEMU's userspace virtio-net backend
in its emulator thread: every record says so (``env.virtio_backend`` and a warning).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from typing import Any, Callable

from labctl import platform
from labctl.errors import UserError, WorkloadError
from labctl.host.cpuset import parse_cpuset
from labctl.host.threads import vhost_worker_tids
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.guest import GuestLab
from labctl.lab.plan import LabPlan
from labctl.workload.tcp import TOOLS, Counters, GuestCounters, HostTools, read_host_stat

CHANNEL_TIMEOUT_S = 120.0  # one command's answer from a TCG guest on a busy 2-CPU host


def check_kernel_measurable(plan: LabPlan, uri: str) -> None:
    """The tcp kinds need a real hypervisor and a kernel-driven NIC (the rules say why)."""
    if uri.startswith("test:"):
        raise UserError(f"uri {uri}: libvirt's test driver runs no guest (allowed: qemu:///system)")
    if len(plan.nics) != 1 or plan.nics[0].backend not in ("tap", "network"):
        raise UserError(f"workload.kind {plan.workload_kind}: one tap or network NIC (allowed: guest.nics "
                        "with one NIC of backend tap or network)")


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise WorkloadError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")


class KernelGuestLab(GuestLab):
    """One kernel-stack guest of ``plan`` on ``uri``, recorded in ``state``."""

    serve_params = {"stack": "kernel"}

    def __init__(self, plan: LabPlan, state: LabState, uri: str, warnings: list[str],
                 phase: Callable[[str], None] = lambda _text: None):
        super().__init__(plan, state, uri, warnings, phase)
        assert plan.tcp is not None
        self.vhost_net = platform.VHOST_NET_DEVICE.exists()
        self.tools = HostTools(plan.tcp.tag, plan.dirs.log / "tcp")
        self.host_addr = ""
        self.guest_addr = ""
        self.host_dev = ""
        self.queues_enabled: int | None = None
        self.queue_report: dict[str, Any] = {}
        self.vhost_pins: dict[str, str] = {}
        self._jobs: dict[int, int] = {}  # guest client job id -> port
        self._next_job = 1
        self._results_from = 0

    # -- boot ------------------------------------------------------------------------------------

    def boot(self) -> None:
        plan, tcp = self.plan, self.plan.tcp
        assert tcp is not None
        check_kernel_measurable(plan, self.uri)
        self.state.record("tagged", tcp.tag, names=list(TOOLS))  # before any host-side tool starts
        t0 = self.boot_domain()
        self._address()
        self._pin_vhost()
        self.boot_s = time.monotonic() - t0
        self.booted_now = True
        self.timings["boot_s"] = self.boot_s

    def after_swap(self) -> None:
        """A swapped NIC is a new device on both sides (libvirt made the tap again, the guest's driver a new
        interface): its addresses set again, vhost-net workers pinned again."""
        self._address()
        self._pin_vhost()

    def _address(self) -> None:
        """The session's addresses: tap: this lab's /30 on the host's tap and in the guest (NET); network: the
        bridge's address, the guest's from DHCP."""
        plan, tcp = self.plan, self.plan.tcp
        assert tcp is not None
        nic = plan.nics[0]
        self.host_dev = hypervisor.interface_devices(self.dom).get(nic.mac, nic.tap or "")
        if nic.backend == "tap":
            assert tcp.host_addr and tcp.guest_addr
            _ip("addr", "replace", f"{tcp.host_addr}/{tcp.prefix}", "dev", self.host_dev)
            _ip("link", "set", self.host_dev, "up")
            self.host_addr = tcp.host_addr
            self.guest_addr = self._net(f"{tcp.guest_addr}/{tcp.prefix}")
        else:
            self.host_addr, _prefix = hypervisor.network_address(self.uri, "default")
            self.guest_addr = self._net("dhcp")
        where = self.host_dev if nic.backend == "tap" else f"network default's bridge via {self.host_dev}"
        self.host_side = (f"the host's kernel on {where} ({self.host_addr}), guest {self.guest_addr}; "
                          + ("vhost-net" if self.vhost_net else "QEMU's userspace virtio-net backend"))

    def _ask(self, command: str, tag: str, what: str, match: Callable[[Any], bool] = lambda _d: True) -> Any:
        assert self.channel is not None
        start = self.channel.mark()
        self.channel.send(command)
        return self.channel.wait(tag, start, CHANNEL_TIMEOUT_S, what, match)[1]

    def _net(self, address: str) -> str:
        reply = self._ask(f"NET {self.plan.nics[0].mac} {address}", "LABCTL-NET", "the guest's address")
        return str(reply["addr"]).split("/")[0]

    def _pin_vhost(self) -> None:
        """vhost-net workers on ``guest.pinning.vhost`` (they are QEMU's threads since Linux 6.4; libvirt has
        no element for them, and otherwise they follow the emulator pin)."""
        wanted = self.plan.pins.vhost
        if not wanted or not self.vhost_net or "qemu" not in self.pids:
            return
        cpus = parse_cpuset(wanted)
        for tid in vhost_worker_tids(self.pids["qemu"]):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)
                self.vhost_pins[f"vhost.{tid}"] = wanted

    # -- one trial -------------------------------------------------------------------------------

    def start(self, plan: LabPlan | None = None) -> None:
        """This trial's live pins and guest queues (``ethtool -L``); the sessions start in ``measure``."""
        self.use_plan(plan)
        t0 = time.monotonic()
        self.domain.apply_pins()
        self._apply_queues()
        self.timings["setup_s"] = time.monotonic() - t0

    def _apply_queues(self) -> None:
        """``ethtool -L combined N`` in the guest (live), and what the driver then reports."""
        tcp = self.plan.tcp
        assert tcp is not None
        if tcp.guest_queues is None:
            nic = self.negotiated[0].get("negotiated") or {} if self.negotiated else {}
            self.queues_enabled = nic.get("queues")
            return
        reply = self._ask(f"QUEUES {self.plan.nics[0].mac} {tcp.guest_queues}", "LABCTL-QUEUES",
                          "ethtool -L in the guest")
        self.queue_report = reply
        self.queues_enabled = (reply.get("nic") or {}).get("combined")

    def start_servers(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        if side == "host":
            for port, argv in zip(ports, argvs):
                self.tools.start("server", port, argv)
            self.tools.wait_listening(ports)
            return
        for port, argv in zip(ports, argvs):
            self._run(port, argv, listen=True)

    def start_clients(self, side: str, ports: list[int], argvs: list[list[str]]) -> None:
        assert self.channel is not None
        self._jobs = {}
        self._results_from = self.channel.mark()
        for port, argv in zip(ports, argvs):
            if side == "host":
                self.tools.start("client", port, argv)
            else:
                self._jobs[self._run(port, argv, listen=False)] = port

    def _run(self, port: int, argv: list[str], listen: bool) -> int:
        job = self._next_job
        self._next_job += 1
        self._ask(f"RUN {job} {port if listen else 0} {','.join(argv)}", "LABCTL-RUNNING",
                  f"{argv[0]} on port {port} in the guest", match=lambda d: isinstance(d, dict) and d.get("id") == job)
        return job

    def monitored(self) -> dict[str, int]:
        """What the thread monitor samples: QEMU and the host's tools of this trial."""
        return {**{k: v for k, v in self.pids.items() if k == "qemu"}, **self.tools.pids()}

    def counters(self) -> Counters:
        t = time.monotonic()
        host = read_host_stat()
        guest = self._ask(f"STAT {self.plan.nics[0].mac}", "LABCTL-STAT", "the guest's counters")
        return Counters(t, host, GuestCounters.parse(guest))

    def client_outputs(self, timeout_s: float) -> dict[int, str]:
        """Each session's client output (port -> text), from the host's files or the guest's RESULT lines."""
        if not self._jobs:
            return self.tools.results("client", timeout_s)
        assert self.channel is not None
        out: dict[int, str] = {}
        deadline = time.monotonic() + timeout_s
        for job, port in sorted(self._jobs.items()):
            try:
                _end, data = self.channel.wait("LABCTL-RESULT", self._results_from, max(deadline - time.monotonic(), 1.0),
                                               f"the result of session {port}",
                                               match=lambda d, j=job: isinstance(d, dict) and d.get("id") == j)
                out[port] = str(data.get("output", ""))
            except WorkloadError as exc:
                out[port] = str(exc)
        return out

    def stop_sessions(self) -> None:
        """Every session's processes stopped, in the guest (KILL) and on the host."""
        try:
            if self.channel is not None:
                self._ask("KILL", "LABCTL-KILLED", "the guest's jobs stopped")
        finally:
            self.tools.stop()
            self._jobs = {}

    def stop_forwarding(self) -> None:
        self.stop_sessions()

    def end_trial(self) -> None:
        self.booted_now = False
        self.timings = {}
        with contextlib.suppress(WorkloadError):
            self.stop_sessions()

    # -- what a record needs -----------------------------------------------------------------------

    @property
    def virtio_backend(self) -> str:
        return "vhost-net" if self.vhost_net else "userspace"

    @property
    def pollers(self) -> int:
        return 0  # the kernel driver does not busy-poll

    def pins(self) -> dict[str, str]:
        return {**super().pins(), **self.vhost_pins}

    def environment(self, pins: dict[str, str], shared: bool):
        env = super().environment(pins, shared)
        env.virtio_backend = self.virtio_backend  # type: ignore[assignment]
        return env

    def details(self) -> dict[str, Any]:
        tcp = self.plan.tcp
        assert tcp is not None
        out = super().details()
        out["tcp"] = {"kind": tcp.kind, "sessions": tcp.sessions, "direction": tcp.direction,
                      "host_addr": self.host_addr, "guest_addr": self.guest_addr, "host_dev": self.host_dev,
                      "ports": [tcp.ports[0], tcp.ports[-1]], "guest_queues_requested": tcp.guest_queues,
                      "guest_queues_enabled": self.queues_enabled, "ethtool_L": self.queue_report,
                      "virtio_backend": self.virtio_backend}
        return out

    def record_warnings(self) -> list[str]:
        out = super().record_warnings()
        if not self.vhost_net:
            out.append(f"no {platform.VHOST_NET_DEVICE} on this host: the NIC ran QEMU's userspace virtio-net "
                       "backend (in its emulator thread), not vhost-net")
            if self.plan.pins.vhost:
                out.append(f"guest.pinning.vhost {self.plan.pins.vhost}: no vhost-net worker to place here")
        tcp = self.plan.tcp
        if tcp is not None and tcp.guest_queues is not None and self.queues_enabled != tcp.guest_queues:
            out.append(f"ethtool -L combined {tcp.guest_queues}: the guest's driver reports {self.queues_enabled} "
                       f"({(self.queue_report or {}).get('message') or 'no message'})")
        return out

    def zero_reason(self) -> str:
        return f"no session completed (see {self.plan.dirs.log}: tcp/, serial.log, channel.log)"

    # -- down ------------------------------------------------------------------------------------

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.tools.stop()
        super().close()



