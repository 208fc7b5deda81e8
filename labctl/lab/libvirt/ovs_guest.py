"""A libvirt guest behind labctl's own OVS-DPDK: generator -> OVS -> guest -> OVS -> generator.

    boot:  OVS (private DB and daemons, netdev bridge, its own hugepages) -> dpdkvhostuserclient ports
           vm{i} for the guest's NIC i (QEMU is the vhost-user server: ``mode='server'``, libvirt holds
           the guest's CPUs until OVS has connected) and gen{i} for the generator's -> flows
           gen{i} <-> vm{i} -> knobs -> labgen on net_virtio_user server ports -> define + start the
           domain -> the guest's HELLO -> OVS's ports connected -> labgen's links up
    trial: as any guest (the plan's forwarder started in the guest over the channel, paced by labgen);
           OVS's per-PMD statistics cleared when the window opens and read when it closes

The socket directory is handed to QEMU's group (0770): QEMU creates the vm{i} sockets there, OVS
(root) connects to them. OVS's PMDs run on ``guest.pinning.vhost`` like the testpmd vswitch's.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from labctl.dpdk.eal import devarg_path
from labctl.dpdk.labgen import labgen_process
from labctl.errors import WorkloadError
from labctl.safefs import qemu_gid
from labctl.lab.hugepages import reserve
from labctl.lab.libvirt.domain import check_measurable
from labctl.lab.libvirt.guest import GuestLab
from labctl.lab.ovs.switch import OvsPvpHostSide

LINK_TIMEOUT_S = 300.0  # TCG guests bring their ports up slowly


def _open_to_qemu(directory) -> None:
    """QEMU (user and group libvirt-qemu) creates its server sockets in ``directory`` (made by
    LabState.make_dirs, never a symlink): its group may write there."""
    gid = qemu_gid()
    if gid is not None:
        os.chown(directory, 0, gid, follow_symlinks=False)
    os.chmod(directory, 0o770)  # make_dirs refused a symlink there; chmod cannot skip one on Linux


class OvsGuestLab(OvsPvpHostSide, GuestLab):
    """One libvirt guest of ``plan`` with OVS-DPDK and labgen as its host side."""

    own_host_side = False  # OVS and labgen are started here, not by GuestLab.boot_domain

    def boot(self) -> None:
        plan, state = self.plan, self.state
        if plan.generator.kind != "labgen":
            raise WorkloadError("workload.generator: a guest behind OVS-DPDK is fed by labgen (allowed: labgen)")
        check_measurable(plan, self.uri)
        state.make_dirs(plan.dirs.run, plan.dirs.log)
        _open_to_qemu(plan.dirs.run)
        mount = plan.dirs.hugetlbfs
        self.phase("starting OVS-DPDK")
        gen_sockets = self.start_switch(mount)
        vdevs = [f"net_virtio_user{i},path={devarg_path(sock)},queues={plan.generator.queues},queue_size=1024,"
                 "server=1" for i, sock in enumerate(gen_sockets)]
        generator = labgen_process(vdevs, plan.generator.queues, f"{plan.file_prefix}-gen",
                                   list(plan.generator.workers), mount, plan.dirs.log / "labgen.log")
        if reserve(state, mount, generator.eal.memory_mb) is None:
            raise WorkloadError("hugepages for labgen could not be reserved beside OVS's")
        self.generator = generator
        self.pids["generator"] = generator.start_recorded(state)
        generator.connect(timeout_s=60)
        t0 = self.boot_domain()  # QEMU makes the vm{i} sockets; OVS connects to them by itself
        self.phase("waiting for OVS's ports to labgen")
        self.switch.wait_connected(timeout_s=LINK_TIMEOUT_S, ports=[f"gen{nic.index}" for nic in plan.nics])
        self.host_side = ("labgen on net_virtio_user server ports -> OVS-DPDK (netdev bridge, dpdkvhostuserclient "
                          "ports; QEMU the vhost-user server) -> the guest")
        self.boot_s = self.timings["boot_s"] = time.monotonic() - t0
        self.booted_now = True

    def swap_refusal(self, plan) -> str | None:
        """Behind OVS-DPDK the generator's ports to OVS (net_virtio_user servers of gen{i}) are made for the
        boot's queue count: a queue change boots. Rings swap (OVS's dpdkvhostuserclient ports reconnect to the
        new NIC's socket by themselves)."""
        if plan.generator.queues != self.plan.generator.queues:
            return ("behind OVS-DPDK the generator's ports to OVS are made for the boot's queue count "
                    f"({self.plan.generator.queues}, asked {plan.generator.queues})")
        return None

    # -- OVS's part of a trial -------------------------------------------------------------------

    def start(self, plan=None) -> None:
        """The guest's forwarder started (GuestLab.start), then OVS polling every queue of its ports (the
        guest's are enabled once its PMD set them up)."""
        super().start(plan)
        assert self.switch is not None
        self.switch.wait_connected(timeout_s=LINK_TIMEOUT_S)

    @property
    def pollers(self) -> int:
        """OVS's PMDs, labgen's workers and the guest's vCPUs."""
        return (sum(1 for p in self.plan.vswitch.pmds if p) or 1) + super().pollers

    def details(self) -> dict[str, Any]:
        return {**super().details(), "vswitch": "ovs-dpdk"}

    def close(self) -> None:
        super().close()
        if self.switch is not None:
            with contextlib.suppress(Exception):
                self.switch.stop()
            self.switch = None
