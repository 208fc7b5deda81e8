"""Which lab setups go together: the vswitch (testpmd or OVS-DPDK and its knobs), NIC models, the topology, two
libvirt guests or one behind OVS, and the kernel stack of the tcp kinds."""

from __future__ import annotations

from typing import Iterator

from labctl import platform
from labctl.errors import Problem
from labctl.host.cpuset import parse_cpuset
from labctl.profile.rules.registry import err, out_of_range, rule, warn
from labctl.profile.schema import Profile


OVS_KNOBS = ("tx_flush_interval", "emc_insert_inv_prob", "smc", "rxq_assign", "rxq_affinity")


@rule("vswitch", "Open vSwitch's knobs exist only in Open vSwitch; OVS-DPDK's vhost-user ports are all it "
      "can give a guest here (dpdkvhostuserclient: the guest side listens), and it needs hugepages for its "
      "packet memory (it adds --in-memory, which --no-huge refuses).",
      "ovs-vswitchd.conf.db(5); OVS docs topics/dpdk/vhost-user; seen on these machines (OVS 3.1, DPDK 22.11)")
def _vswitch(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    v = p.vswitch
    if v.kind == "testpmd":
        for knob in OVS_KNOBS:
            if getattr(v, knob) not in (None, {}):
                yield err(f"vswitch.{knob}", "an Open vSwitch knob (allowed: with vswitch.kind ovs-dpdk; leave it "
                                              "out with kind testpmd)")
        return
    for i, nic in enumerate(p.guest.nics):
        if nic.backend != "vhostuser":
            yield err(f"guest.nics.{i}.backend", f"{nic.backend} cannot be an OVS-DPDK port here "
                                                  "(allowed: vhostuser with vswitch.kind ovs-dpdk)")
    yield from out_of_range("vswitch.socket_mem_mib", v.socket_mem_mib, 64, 8192, " MiB")
    if v.tx_flush_interval is not None:
        yield from out_of_range("vswitch.tx_flush_interval", v.tx_flush_interval, 0, 1_000_000, " us")
    if v.emc_insert_inv_prob is not None:
        yield from out_of_range("vswitch.emc_insert_inv_prob", v.emc_insert_inv_prob, 0, 2**32 - 1)
    pmds = parse_cpuset(p.guest.pinning.vhost) if p.guest.pinning.vhost else None
    for index, queues in v.rxq_affinity.items():
        if not 0 <= index < len(p.guest.nics):
            yield err(f"vswitch.rxq_affinity.{index}", f"NIC {index} does not exist (allowed: 0..{len(p.guest.nics) - 1})")
            continue
        for queue, cpu in queues.items():
            if not 0 <= queue < p.guest.nics[index].queues:
                yield err(f"vswitch.rxq_affinity.{index}.{queue}",
                           f"NIC {index} has rx queues 0..{p.guest.nics[index].queues - 1}")
            elif pmds is None or cpu not in pmds:
                yield err(f"vswitch.rxq_affinity.{index}.{queue}",
                           f"CPU {cpu} runs no PMD (allowed: a CPU of guest.pinning.vhost: "
                           f"{','.join(map(str, sorted(pmds))) if pmds else 'none pinned'})")


@rule("nic-model", "QEMU's e1000 and e1000e have one queue pair, no virtio ring size knob and no vhost-user "
      "backend (vhost-user speaks virtio only); the embedded lab's guest is a virtio_user port.",
      "QEMU hw/net/e1000.c, e1000e.c; libvirt formatdomain.html#setting-the-nic-model; DPDK net_e1000_em")
def _nic_model(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        if nic.model == "virtio":
            continue
        path = f"guest.nics.{i}"
        if p.backend == "embedded":
            yield err(f"{path}.model", f"{nic.model} cannot run in the embedded lab (allowed: virtio)")
        elif nic.backend == "vhostuser":
            yield err(f"{path}.backend", f"vhostuser cannot carry a {nic.model} NIC (allowed: tap, network)")
        if nic.queues != 1:
            yield err(f"{path}.queues", f"{nic.queues} queues on a {nic.model} NIC (allowed: 1)")
        for field in ("rx_queue_size", "tx_queue_size"):
            if getattr(nic, field) != 256:
                yield err(f"{path}.{field}", f"{nic.model} has no virtio ring size (allowed: 256, the default)")


@rule("topology", "vm2vm has guest A send with testpmd txonly (flat out) and guest B receive with rxonly; "
      "the paced generator is not in that path.", "testpmd txonly/rxonly forwarding modes")
def _topology(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.topology == "vm2vm":
        if p.workload.rate != "max":
            yield err("workload.rate", f"{p.workload.rate}: vm2vm guests send flat out (allowed: max)")
        if p.workload.mode != "io":
            yield warn("workload.mode", f"{p.workload.mode} has no effect in vm2vm (guest A runs txonly, B rxonly)")


@rule("guest-setup", "Two libvirt guests meet at the testpmd vswitch over vhost-user (vm2vm); one libvirt guest "
      "behind OVS-DPDK is fed by labgen (QEMU the vhost-user server, OVS's dpdkvhostuserclient ports the clients).",
      "labctl.lab.libvirt.vm2vm, labctl.lab.libvirt.ovs_guest; OVS docs topics/dpdk/vhost-user")
def _guest_setup(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.backend != "libvirt":
        return
    if p.topology == "vm2vm":
        for i, nic in enumerate(p.guest.nics):
            if nic.backend != "vhostuser":
                yield err(f"guest.nics.{i}.backend", f"{nic.backend}: vm2vm guests meet at the vswitch over "
                                                      "vhost-user (allowed: vhostuser)")
    if p.vswitch.kind == "ovs-dpdk":
        if p.topology == "vm2vm":
            yield err("vswitch.kind", "vm2vm between libvirt guests runs through the testpmd vswitch "
                                       "(allowed: testpmd with topology vm2vm and backend libvirt)")
        if p.workload.generator != "labgen":
            yield err("workload.generator", f"{p.workload.generator}: a libvirt guest behind OVS-DPDK is fed by "
                                             "labgen (allowed: labgen)")


TCP_KINDS = ("tcp_stream", "tcp_rr")


@rule("tcp-workload", "The tcp kinds measure the guest's kernel virtio-net driver: a libvirt guest with one "
      "NIC that the kernel drives on a tap or the libvirt network (vhost-user NICs are served by a DPDK "
      "vswitch, which has no TCP stack); one iperf3/sockperf client-server pair and port per session; "
      "`ethtool -L combined N` enables at most the NIC's queue pairs.",
      "iperf3 3.12 (single-threaded), sockperf 3.7 ping-pong, Linux virtio_net set_channels")
def _tcp_workload(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    if w.kind not in TCP_KINDS:
        if w.sessions != 1:
            yield warn("workload.sessions", f"sessions has no effect in kind {w.kind} (it applies to tcp_stream, tcp_rr)")
        if w.guest_queues is not None:
            yield warn("workload.guest_queues", f"guest_queues has no effect in kind {w.kind} "
                                                 "(it applies to tcp_stream, tcp_rr)")
        return
    if p.backend != "libvirt":
        yield err("workload.kind", f"{w.kind} needs a kernel guest (allowed: backend libvirt; the embedded "
                                    "lab's guest is a DPDK process)")
    yield from out_of_range("workload.sessions", w.sessions, 1, platform.MAX_TCP_SESSIONS)
    if len(p.guest.nics) != 1:
        yield err("guest.nics", f"{w.kind} measures one NIC; the profile has {len(p.guest.nics)} (allowed: 1 NIC)")
    for i, nic in enumerate(p.guest.nics):
        if nic.backend not in ("tap", "network"):
            yield err(f"guest.nics.{i}.backend", f"{nic.backend} has no kernel-driven host end for {w.kind} "
                                                  "(allowed: tap, network)")
    if w.guest_queues is not None:
        queues = p.guest.nics[0].queues if p.guest.nics else 1
        if not 1 <= w.guest_queues <= queues:
            yield err("workload.guest_queues", f"{w.guest_queues} is out of range (allowed: 1..{queues}, the "
                                                "NIC's queue pairs)")
        elif w.guest_queues > p.guest.vcpus:
            yield warn("workload.guest_queues", f"{w.guest_queues} queues on {p.guest.vcpus} vCPUs: more queues "
                                                 "than vCPUs to serve their interrupts")
