"""The embedded lab through labctl's own OVS-DPDK: generator -> OVS -> guest -> OVS -> sink.

    hugepages -> OVS (private DB and daemons, netdev bridge) -> dpdkvhostuserclient ports
    (gen{i} for the generator's NIC i, vm{i} for the guest's) -> port-to-port flows gen{i} <-> vm{i}
    -> knobs -> guest forwarder and generator, each with net_virtio_user server ports (OVS connects to
    them by itself) -> connected -> forwarding

The generator is labgen (paced) or a testpmd in flowgen mode (flat out), both on virtio_user ports
attached to the same bridge. OVS's own statistics (per PMD: processing cycles per packet, idle share,
rx queues and their usage; per port: packets and drops) are cleared when the measurement window opens
and read when it closes, beside the generator's and the guest's counters.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from labctl.dpdk.eal import EalOptions, devarg_path, lcores_argument
from labctl.dpdk.labgen import labgen_process
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import Testpmd, TestpmdOptions
from labctl.errors import WorkloadError
from labctl.lab.builds import resolve
from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.lab.embedded.lab import EmbeddedLab
from labctl.dpdk.runtime import start_recorded
from labctl.lab.hugepages import reserve
from labctl.lab.ovs.switch import OvsPvpHostSide


class OvsEmbeddedLab(OvsPvpHostSide, EmbeddedLab):
    """The embedded lab of ``plan`` with OVS-DPDK as its vswitch (``vswitch.kind: ovs-dpdk``)."""

    host_kind = "ovs"

    def start(self) -> None:
        plan, state = self.plan, self.state
        t0 = time.monotonic()
        state.make_dirs(plan.dirs.run, plan.dirs.log)
        mount = plan.dirs.hugetlbfs
        gen_sockets = self.start_switch(mount)  # OVS reserves its own hugepages (it cannot run without them)
        # the guest and the generator share the mount; their memory is reserved beside OVS's
        if reserve(state, mount, plan.embedded_hugepage_mb()) is None:
            raise WorkloadError("hugepages for the guest and the generator could not be reserved beside OVS's")
        self.hugepages = True
        self.timings["host_ready_s"] = time.monotonic() - t0
        self.guest = guest = guest_forwarder(plan, mount, server=True,
                                             program=self.programs.add(resolve(plan.build, "forwarder")))
        vdevs = [f"net_virtio_user{i},path={devarg_path(sock)},queues={plan.generator.queues},queue_size=1024,server=1"
                 for i, sock in enumerate(gen_sockets)]
        self.pids["guest"] = start_recorded(state, guest)
        if plan.generator.kind == "labgen":
            self.generator = labgen_process(vdevs, plan.generator.queues, f"{plan.file_prefix}-gen",
                                            list(plan.generator.workers), mount, plan.dirs.log / "labgen.log")
            self.pids["generator"] = self.generator.start_recorded(state)
            self.generator.connect(timeout_s=60)
        else:
            self.vswitch = self._flowgen(vdevs, mount)  # a testpmd generator in the vswitch's place
            self.pids["vswitch"] = start_recorded(state, self.vswitch)
            self.vswitch.wait_ready()
        guest.wait_ready()
        self.switch.wait_connected()
        self.timings["guest_ready_s"] = time.monotonic() - t0
        self._telemetry = [Telemetry.connect(guest.eal.file_prefix)]
        if self.vswitch is not None:
            self._telemetry.insert(0, Telemetry.connect(self.vswitch.eal.file_prefix))
        else:
            assert self.generator is not None
            self.generator.wait_links()
        self.timings["links_up_s"] = time.monotonic() - t0
        guest.command("start")
        if self.vswitch is not None:
            self.vswitch.command("start")
        self.timings["setup_s"] = time.monotonic() - t0

    def _flowgen(self, vdevs: list[str], mount) -> Testpmd:
        plan = self.plan
        vs = plan.vswitch
        eal = EalOptions(file_prefix=f"{plan.file_prefix}-vs", lcores=lcores_argument(list(vs.pmds)), vdevs=vdevs,
                         memory_mb=vs.memory_mb(True), hugepages_dir=mount)
        app = TestpmdOptions(forward_mode="flowgen", nb_cores=len(vs.pmds), rxq=plan.generator.queues,
                             txq=plan.generator.queues, burst=vs.burst, total_mbufs=vs.mbufs,
                             extra=[f"--txpkts={vs.packet_size}", f"--flowgen-flows={vs.flows}"])
        return Testpmd("vswitch", eal, app, plan.dirs.log / "flowgen.log")

    @property
    def pollers(self) -> int:
        pmds = sum(1 for p in self.plan.vswitch.pmds if p) or 1
        return super().pollers + pmds

    def details(self) -> dict[str, Any]:
        who = "labgen" if self.plan.generator.kind == "labgen" else "testpmd flowgen"
        return {"host_side": f"OVS-DPDK (netdev bridge, dpdkvhostuserclient ports) between {who} and the guest, "
                             "both on net_virtio_user server ports", "generator": self.plan.generator.kind,
                "vswitch": "ovs-dpdk"}

    def close(self) -> None:
        super().close()
        if self.switch is not None:
            with contextlib.suppress(Exception):
                self.switch.stop()
            self.switch = None
