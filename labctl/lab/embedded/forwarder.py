"""The embedded lab's guest: testpmd with ``net_virtio_user`` ports forwarding in the profile's mode.

Real split rings and the real vhost-user handshake, no VM. Its settings are the plan's
(``labctl.lab.plan.ForwarderPlan``), which a libvirt guest's appliance runs too.
"""

from __future__ import annotations

from pathlib import Path

from labctl.dpdk.eal import EalOptions, devarg_path, lcores_argument
from labctl.dpdk.testpmd import Testpmd
from labctl.lab.builds import Program
from labctl.lab.plan import LabPlan


def guest_forwarder(plan: LabPlan, hugepages_dir: Path | None, server: bool = True,
                    program: Program | None = None) -> Testpmd:
    """``server``: the virtio_user ports listen on their sockets (the vswitch connects as a client);
    ``program``: the forwarder's binary and environment (:func:`labctl.lab.builds.resolve`; None: the host's)."""
    role = ",server=1" if server else ""
    vdevs = [f"net_virtio_user{nic.index},path={devarg_path(nic.socket)},queues={nic.queues},"
             f"queue_size={nic.virtqueue_size}{role}" for nic in plan.nics if nic.socket is not None]
    eal = EalOptions(file_prefix=f"{plan.file_prefix}-guest", lcores=lcores_argument(list(plan.pins.vcpu_cpus)),
                     vdevs=vdevs, memory_mb=plan.forwarder.memory_mb(hugepages_dir is not None),
                     hugepages_dir=hugepages_dir)
    return Testpmd("guest", eal, plan.forwarder.options(), plan.dirs.log / "guest.log",
                   binary=program.path if program else None, env=dict(program.env) if program else None)
