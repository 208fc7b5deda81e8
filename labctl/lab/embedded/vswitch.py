"""The host side of every lab: a testpmd "vswitch" with net_vhost ports.

Facing libvirt guests its ports are vhost-user servers (QEMU connects). In the embedded lab they are
clients, as OVS-DPDK's ``dpdkvhostuserclient`` ports are: the guest's ``net_virtio_user`` ports listen
and the vswitch connects to each once its socket exists (``port start N``). A connecting client is
served at once, while DPDK 22.11's vhost event thread only notices a listening socket added after it
began polling at its next 1 s poll timeout, which made every embedded trial wait ~1 s for nothing.

It is also the traffic generator and sink: in testpmd's ``flowgen`` mode each forwarding stream
receives (and counts, then frees) what arrives on one port and sends generated frames out of the
other, so port 0 sends to the guest's port 0 and receives, on port 1, what the guest forwarded.
Frames that cannot be placed in the guest's receive ring show as TX-dropped in its forward stats.
"""

from __future__ import annotations

import re
from pathlib import Path

from labctl.dpdk.eal import EalOptions, devarg_path, lcores_argument
from labctl.dpdk.testpmd import Testpmd, TestpmdOptions
from labctl.errors import WorkloadError
from labctl.host.sockets import unix_listening
from labctl.lab.builds import Program
from labctl.lab.plan import LabPlan, NicPlan

#: A network device name as the kernel allows it (IFNAMSIZ 16: up to 15 characters, no '/' or spaces).
TAP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")


def host_ports(plan: LabPlan, client: bool = False, ifaces: dict[int, str] | None = None,
               nics: list[NicPlan] | None = None) -> list[str]:
    """One ``--vdev`` per NIC: ``net_vhost`` for a vhost-user NIC (``client``: connect to a listening
    guest, the embedded lab; otherwise a server QEMU connects to), ``net_af_packet`` on the guest's tap
    device for a tap or network NIC (``ifaces``: NIC index -> device, for taps libvirt named)."""
    vs = plan.vswitch
    role = ",client=1" if client else ""
    vdevs = []
    for i, nic in enumerate(plan.vhostuser_nics if nics is None else nics):
        if nic.socket is not None:
            vdevs.append(f"net_vhost{i},iface={devarg_path(nic.socket)},queues={vs.queues}{role}")
        else:
            device = (ifaces or {}).get(nic.index) or nic.tap
            if not device or not TAP_NAME.match(device):
                raise WorkloadError(f"NIC {nic.index} ({nic.backend}): no tap device to attach the host side to")
            vdevs.append(f"net_af_packet{i},iface={device},qpairs={vs.queues}")
    return vdevs


def vswitch_testpmd(plan: LabPlan, hugepages_dir: Path | None, client: bool = False,
                    forward_mode: str = "flowgen", stats_period_s: int | None = None,
                    vdevs: list[str] | None = None, program: Program | None = None) -> Testpmd:
    """The vswitch of ``plan``: ``client`` (embedded lab) connects to listening guests; otherwise its
    ports are vhost-user servers that QEMU connects to. ``vdevs``: other host ports (:func:`host_ports`);
    ``program``: the vswitch's binary and environment (:func:`labctl.lab.builds.resolve`; None: the host's)."""
    vs = plan.vswitch
    vdevs = host_ports(plan, client) if vdevs is None else vdevs
    eal = EalOptions(file_prefix=f"{plan.file_prefix}-vs", lcores=lcores_argument(list(vs.pmds)), vdevs=vdevs,
                     memory_mb=vs.memory_mb(hugepages_dir is not None), hugepages_dir=hugepages_dir)
    extra = [f"--txpkts={vs.packet_size}", f"--flowgen-flows={vs.flows}"] if forward_mode == "flowgen" else []
    if client:
        # A net_vhost port connects when it is configured: leave that to connect_ports(). The
        # handshake then runs while testpmd answers commands, and its INFO lines and port events,
        # printed by another thread, would split the prompt ("testpmd" ... "> "): keep only warnings.
        extra += ["--disable-device-start", "--mask-event=intr_lsc", "--mask-event=queue_state"]
        eal.log_levels.append("lib.vhost.config:warning")
    app = TestpmdOptions(forward_mode=forward_mode, nb_cores=len(vs.pmds), rxq=vs.queues, txq=vs.queues,
                         burst=vs.burst, total_mbufs=vs.mbufs, extra=extra, stats_period_s=stats_period_s)
    return Testpmd("vswitch", eal, app, plan.dirs.log / "vswitch.log",
                   binary=program.path if program else None, env=dict(program.env) if program else None)


def connect_ports(vswitch: Testpmd, listener: Testpmd, sockets: list[Path], timeout_s: float = 60.0) -> None:
    """Client-mode vswitch: start port N as soon as the listener listens on socket N (the listener
    creates them one at a time, each after the previous one was connected)."""
    for index, sock in enumerate(sockets):
        listener.wait_paths([sock], timeout_s, ready=unix_listening)
        out = vswitch.command(f"port start {index}", timeout_s)
        if re.search(r"(?i)fail|error", out):
            raise WorkloadError(f"vswitch port {index} did not start: {out.strip().splitlines()[-1]} "
                                f"(log {vswitch.log_path})")
