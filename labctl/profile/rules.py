"""Every constraint on a lab profile, in one place, each with its reason and its source.

A rule looks at a validated ``Profile`` (types already checked by ``labctl.profile.schema``) and the host's
online CPUs, and yields ``Problem``s: errors stop the profile, warnings are printed and recorded.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Iterator

from labctl import platform
from labctl.host.cpuset import parse_cpuset
from labctl.errors import Problem
from labctl.profile.rates import FORMS, parse_rate
from labctl.profile.schema import Profile

NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
URI_PATTERN = re.compile(r"^(qemu|test)(\+(ssh|tcp|tls|unix|libssh|libssh2))?://[A-Za-z0-9._@:\[\]-]*/[A-Za-z0-9._/-]*(\?[A-Za-z0-9._=&/-]*)?$")
MAX_SWEEP_CONFIGS = 4096


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    source: str
    check: Callable[[Profile, frozenset[int]], Iterable[Problem]]


RULES: list[Rule] = []


def rule(rule_id: str, reason: str, source: str):
    def register(func: Callable[[Profile, frozenset[int]], Iterable[Problem]]):
        RULES.append(Rule(rule_id, reason, source, func))
        return func

    return register


def _err(path: str, message: str) -> Problem:
    return Problem(path, message)


def _warn(path: str, message: str) -> Problem:
    return Problem(path, message, severity="warning")


def _range(path: str, value: int | float, low: int | float, high: int | float, unit: str = "") -> Iterator[Problem]:
    if not low <= value <= high:
        yield _err(path, f"{value}{unit} is out of range (allowed: {low}..{high}{unit})")


@rule("name", "The name becomes a libvirt domain name, the DPDK file prefix labctl-<name> (the runtime "
      "directory /var/run/dpdk/labctl-<name>), file names under /run/labctl and XML text: lowercase letters, "
      "digits and '-' cannot break any of them.",
      "libvirt domain XML <name>, alphanumeric (https://libvirt.org/formatdomain.html#general-metadata); "
      "DPDK EAL --file-prefix (https://doc.dpdk.org/guides/linux_gsg/linux_eal_parameters.html)")
def _name(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if not NAME_PATTERN.match(p.name):
        shown = p.name if len(p.name) <= 40 else p.name[:37] + "..."
        yield _err("name", f"{shown!r} is not allowed (allowed: 1-40 of a-z, 0-9 and '-', "
                           "starting and ending with a letter or digit)")


@rule("uri", "Only the libvirt backend talks to libvirt; a URI is a plain libvirt URI without spaces "
      "or shell characters.", "libvirt URI format (https://libvirt.org/uri.html)")
def _uri(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.uri is None:
        return
    if p.backend != "libvirt":
        yield _err("uri", "only the libvirt backend takes a uri (allowed: leave it out for embedded)")
    elif not URI_PATTERN.match(p.uri):
        yield _err("uri", f"{p.uri[:60]!r} is not a libvirt URI (allowed: qemu:///system, qemu:///session, "
                          "test:///default, qemu+ssh://host/system)")


@rule("guest-size", "A guest needs at least one vCPU and enough memory for the DPDK forwarder; "
      "hugepage-backed memory comes in whole 2 MiB pages.", "QEMU -smp/-m, DPDK EAL memory")
def _guest_size(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from _range("guest.vcpus", p.guest.vcpus, 1, 64)
    yield from _range("guest.memory_mib", p.guest.memory_mib, 256, 262144, " MiB")
    if p.guest.hugepages and p.guest.memory_mib % 2:
        yield _err("guest.memory_mib", f"{p.guest.memory_mib} is not a multiple of 2 MiB "
                                       "(allowed: even values when hugepages is true)")


@rule("nic-count", "The forwarding workload needs one or two ports (io/mac forward between two, or "
      "back out of one); more NICs are allowed for provisioning.", "testpmd port topology")
def _nic_count(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from _range("guest.nics", len(p.guest.nics), 1, 8, " NICs")


@rule("queues", "virtio-net supports 1..256 queue pairs; a Linux guest enables min(queues, vcpus), so "
      "extra queues are wasted.", "virtio spec 5.1.4 (max_virtqueue_pairs), Linux virtio_net.c")
def _queues(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        path = f"guest.nics.{i}.queues"
        if not 1 <= nic.queues <= platform.MAX_QUEUE_PAIRS:
            yield _err(path, f"{nic.queues} is out of range (allowed: 1..{platform.MAX_QUEUE_PAIRS})")
        elif nic.queues > p.guest.vcpus:
            yield _warn(path, f"{nic.queues} queues on {p.guest.vcpus} vCPUs: a kernel guest enables only "
                              f"{p.guest.vcpus} (min(queues, vcpus))")


@rule("ring-size", "QEMU accepts virtio-net ring sizes that are powers of two from 256 to 1024.",
      "QEMU hw/net/virtio-net.c (VIRTIO_NET_RX_QUEUE_MIN_SIZE, VIRTQUEUE_MAX_SIZE)")
def _ring_size(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        for field in ("rx_queue_size", "tx_queue_size"):
            value = getattr(nic, field)
            if value not in platform.RING_SIZES:
                allowed = ", ".join(map(str, platform.RING_SIZES))
                yield _err(f"guest.nics.{i}.{field}", f"{value} is not allowed (allowed: {allowed})")


@rule("tx-ring-backend", "QEMU caps tx_queue_size at 256 unless the backend is vhost-user; tap, network "
      "and user backends give a 256-entry tx ring in the guest.",
      "QEMU virtio_net_max_tx_queue_size(); seen in the guest on these machines")
def _tx_ring_backend(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        cap = platform.tx_ring_cap(nic.backend)
        if cap is not None and nic.tx_queue_size > cap:
            yield _err(f"guest.nics.{i}.tx_queue_size",
                       f"{nic.tx_queue_size} needs backend {platform.UNCAPPED_TX_BACKEND}; QEMU caps {nic.backend} at "
                       f"{cap} (allowed: {cap})")


@rule("embedded-backend", "The embedded lab connects DPDK virtio_user ports to the vswitch over vhost-user; "
      "it has no tap or libvirt network.", "DPDK net_virtio_user")
def _embedded_backend(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.backend != "embedded":
        return
    for i, nic in enumerate(p.guest.nics):
        if nic.backend != "vhostuser":
            yield _err(f"guest.nics.{i}.backend", f"{nic.backend} cannot run in the embedded lab (allowed: vhostuser)")


@rule("pinning", "vcpupin names a vCPU of this guest, and every pinned cpuset must name online host CPUs, "
      "or libvirt refuses to start the domain.", "libvirt formatdomain.html#cpu-tuning")
def _pinning(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    pin = p.guest.pinning
    entries: list[tuple[str, str]] = [(f"guest.pinning.vcpus.{k}", v) for k, v in pin.vcpus.items()]
    for index in pin.vcpus:
        if not 0 <= index < p.guest.vcpus:
            yield _err(f"guest.pinning.vcpus.{index}",
                       f"vCPU {index} does not exist (allowed: 0..{p.guest.vcpus - 1})")
    for field in ("emulator", "vhost"):
        value = getattr(pin, field)
        if value is not None:
            entries.append((f"guest.pinning.{field}", value))
    online = ",".join(map(str, sorted(cpus)))
    for path, text in entries:
        try:
            chosen = parse_cpuset(text)
        except ValueError as exc:
            yield _err(path, str(exc))
            continue
        missing = sorted(chosen - cpus)
        if missing:
            yield _err(path, f"host CPU {','.join(map(str, missing))} is not online (allowed: {online})")


@rule("shared-poller", "A vswitch PMD core and a vCPU that polls (DPDK in the guest) on the same host CPU "
      "take turns instead of running: the measured rate then reflects the scheduler, not virtio.",
      "DPDK PMD busy polling; OVS-DPDK pmd-cpu-mask guidance")
def _shared_poller(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    pin = p.guest.pinning
    if pin.vhost is None or not pin.vcpus or p.workload.kind != "forward":
        return
    try:
        pmd = parse_cpuset(pin.vhost)
        shared = set()
        for text in pin.vcpus.values():
            shared |= pmd & parse_cpuset(text)
    except ValueError:
        return  # reported by the pinning rule
    if shared:
        yield _warn("guest.pinning.vhost", f"host CPU {','.join(map(str, sorted(shared)))} runs both a vswitch PMD "
                                           "and a guest vCPU: two busy pollers share a core")


@rule("workload", "testpmd bursts are 1..512 packets (MAX_PKT_BURST); descriptor counts are powers of two "
      "the PMDs accept; frames are 64..1518 bytes without jumbo support. Mode noisy emulates a VNF's work per "
      "packet (random reads/writes in a table of lkup_memory_mib MiB per port, an optional software TX buffer): "
      "its table comes from the guest's DPDK heap, so it is bounded.",
      "DPDK app/test-pmd/testpmd.h; DPDK testpmd user guide, noisy forwarding mode (noisy_vnf.c)")
def _workload(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    yield from _range("workload.burst", w.burst, 1, platform.MAX_BURST)
    yield from _range("workload.packet_size", w.packet_size, 64, 1518, " bytes")
    for field in ("rxd", "txd"):
        value = getattr(w, field)
        if value < 64 or value > 4096 or value & (value - 1):
            yield _err(f"workload.{field}", f"{value} is not allowed (allowed: powers of two 64..4096)")
    yield from _range("workload.duration_s", w.duration_s, 1, 3600, " s")
    yield from _range("workload.warmup_s", w.warmup_s, 0, 600, " s")
    if w.burst > w.rxd:
        yield _warn("workload.burst", f"burst {w.burst} is larger than rxd {w.rxd}: a receive never fills a burst")
    n = w.noisy
    for field in ("tx_sw_bufsz", "tx_sw_buf_flushtime", "lkup_memory_mib", "lkup_num_reads",
                  "lkup_num_writes", "lkup_num_reads_writes"):
        value = getattr(n, field)
        if not 0 <= value <= 1_000_000:
            yield _err(f"workload.noisy.{field}", f"{value} is out of range (allowed: 0..1000000)")
    if n.lkup_memory_mib > 4096:
        yield _err("workload.noisy.lkup_memory_mib", f"{n.lkup_memory_mib} MiB is out of range (allowed: 0..4096)")
    if w.mode != "noisy" and n != type(n)():
        yield _warn("workload.noisy", f"noisy settings have no effect in mode {w.mode} (they apply to mode noisy)")


@rule("rate", "A paced load needs the paced generator: testpmd 22.11 cannot pace on vhost or virtio ports "
      "(no queue rate limit: ENOTSUP), so flowgen only sends flat out; labgen paces on the TSC.",
      "DPDK 22.11 testpmd (set txtimes, queue rate limit); native/labgen")
def _rate(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    try:
        rate = parse_rate(w.rate)
    except ValueError as exc:
        yield _err("workload.rate", str(exc))
        return
    if rate.kind != "max" and w.generator != "labgen":
        yield _err("workload.rate", f"{w.rate}: generator {w.generator} cannot pace (allowed: max, or generator labgen)")
    if rate.kind == "pps" and rate.value > 200e6:
        yield _err("workload.rate", f"{w.rate}: above 200 Mpps (allowed: {FORMS})")


@rule("pacing", "labgen's sending CPU on a shared host stops for 0.1-10 ms, tens of times a second (measured on "
      "these 2-vCPU VMs). Catching up on an absolute schedule sends rate x pause frames back to back: a burst the "
      "asked-for traffic does not contain, which near the no-loss rate overflows the receiving ring, so the NDR "
      "measured is the generator's host's. shift (the default) moves the schedule by such a pause instead and "
      "reports it (shifts, paused_us); absolute is siitperf's schedule. Only labgen paces, so the knob is labgen's.",
      "native/labgen/src/worker.c shift_schedule; siitperf throughput.cc (absolute schedule); README 'Paced "
      "load, NDR and PDR' (workload.pacing: an interleaved sweep of both on domains/vnf.yaml)")
def _pacing(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    w = p.workload
    if w.pacing != "shift" and (w.kind != "forward" or w.generator != "labgen"):
        what = f"generator {w.generator}" if w.kind == "forward" else f"workload kind {w.kind}"
        yield _warn("workload.pacing", f"{w.pacing}: has no effect with {what} (it applies to generator labgen)")


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
                yield _err(f"vswitch.{knob}", "an Open vSwitch knob (allowed: with vswitch.kind ovs-dpdk; leave it "
                                              "out with kind testpmd)")
        return
    for i, nic in enumerate(p.guest.nics):
        if nic.backend != "vhostuser":
            yield _err(f"guest.nics.{i}.backend", f"{nic.backend} cannot be an OVS-DPDK port here "
                                                  "(allowed: vhostuser with vswitch.kind ovs-dpdk)")
    yield from _range("vswitch.socket_mem_mib", v.socket_mem_mib, 64, 8192, " MiB")
    if v.tx_flush_interval is not None:
        yield from _range("vswitch.tx_flush_interval", v.tx_flush_interval, 0, 1_000_000, " us")
    if v.emc_insert_inv_prob is not None:
        yield from _range("vswitch.emc_insert_inv_prob", v.emc_insert_inv_prob, 0, 2**32 - 1)
    pmds = parse_cpuset(p.guest.pinning.vhost) if p.guest.pinning.vhost else None
    for index, queues in v.rxq_affinity.items():
        if not 0 <= index < len(p.guest.nics):
            yield _err(f"vswitch.rxq_affinity.{index}", f"NIC {index} does not exist (allowed: 0..{len(p.guest.nics) - 1})")
            continue
        for queue, cpu in queues.items():
            if not 0 <= queue < p.guest.nics[index].queues:
                yield _err(f"vswitch.rxq_affinity.{index}.{queue}",
                           f"NIC {index} has rx queues 0..{p.guest.nics[index].queues - 1}")
            elif pmds is None or cpu not in pmds:
                yield _err(f"vswitch.rxq_affinity.{index}.{queue}",
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
            yield _err(f"{path}.model", f"{nic.model} cannot run in the embedded lab (allowed: virtio)")
        elif nic.backend == "vhostuser":
            yield _err(f"{path}.backend", f"vhostuser cannot carry a {nic.model} NIC (allowed: tap, network)")
        if nic.queues != 1:
            yield _err(f"{path}.queues", f"{nic.queues} queues on a {nic.model} NIC (allowed: 1)")
        for field in ("rx_queue_size", "tx_queue_size"):
            if getattr(nic, field) != 256:
                yield _err(f"{path}.{field}", f"{nic.model} has no virtio ring size (allowed: 256, the default)")


@rule("topology", "vm2vm has guest A send with testpmd txonly (flat out) and guest B receive with rxonly; "
      "the paced generator is not in that path.", "testpmd txonly/rxonly forwarding modes")
def _topology(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.topology == "vm2vm":
        if p.workload.rate != "max":
            yield _err("workload.rate", f"{p.workload.rate}: vm2vm guests send flat out (allowed: max)")
        if p.workload.mode != "io":
            yield _warn("workload.mode", f"{p.workload.mode} has no effect in vm2vm (guest A runs txonly, B rxonly)")


@rule("guest-setup", "Two libvirt guests meet at the testpmd vswitch over vhost-user (vm2vm); one libvirt guest "
      "behind OVS-DPDK is fed by labgen (QEMU the vhost-user server, OVS's dpdkvhostuserclient ports the clients).",
      "labctl.lab.libvirt.vm2vm, labctl.lab.libvirt.ovs_guest; OVS docs topics/dpdk/vhost-user")
def _guest_setup(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.backend != "libvirt":
        return
    if p.topology == "vm2vm":
        for i, nic in enumerate(p.guest.nics):
            if nic.backend != "vhostuser":
                yield _err(f"guest.nics.{i}.backend", f"{nic.backend}: vm2vm guests meet at the vswitch over "
                                                      "vhost-user (allowed: vhostuser)")
    if p.vswitch.kind == "ovs-dpdk":
        if p.topology == "vm2vm":
            yield _err("vswitch.kind", "vm2vm between libvirt guests runs through the testpmd vswitch "
                                       "(allowed: testpmd with topology vm2vm and backend libvirt)")
        if p.workload.generator != "labgen":
            yield _err("workload.generator", f"{p.workload.generator}: a libvirt guest behind OVS-DPDK is fed by "
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
            yield _warn("workload.sessions", f"sessions has no effect in kind {w.kind} (it applies to tcp_stream, tcp_rr)")
        if w.guest_queues is not None:
            yield _warn("workload.guest_queues", f"guest_queues has no effect in kind {w.kind} "
                                                 "(it applies to tcp_stream, tcp_rr)")
        return
    if p.backend != "libvirt":
        yield _err("workload.kind", f"{w.kind} needs a kernel guest (allowed: backend libvirt; the embedded "
                                    "lab's guest is a DPDK process)")
    yield from _range("workload.sessions", w.sessions, 1, platform.MAX_TCP_SESSIONS)
    if len(p.guest.nics) != 1:
        yield _err("guest.nics", f"{w.kind} measures one NIC; the profile has {len(p.guest.nics)} (allowed: 1 NIC)")
    for i, nic in enumerate(p.guest.nics):
        if nic.backend not in ("tap", "network"):
            yield _err(f"guest.nics.{i}.backend", f"{nic.backend} has no kernel-driven host end for {w.kind} "
                                                  "(allowed: tap, network)")
    if w.guest_queues is not None:
        queues = p.guest.nics[0].queues if p.guest.nics else 1
        if not 1 <= w.guest_queues <= queues:
            yield _err("workload.guest_queues", f"{w.guest_queues} is out of range (allowed: 1..{queues}, the "
                                                "NIC's queue pairs)")
        elif w.guest_queues > p.guest.vcpus:
            yield _warn("workload.guest_queues", f"{w.guest_queues} queues on {p.guest.vcpus} vCPUs: more queues "
                                                 "than vCPUs to serve their interrupts")


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: How long a build's binary may take to say what it is (``--version``, DPDK's ``-v -h``).
PROBE_TIMEOUT_S = 15.0


@rule("guest-image", "A user's image boots as a libvirt guest (one guest between labctl's generator and sink, the "
      "testpmd vswitch) and is reached through the QEMU guest agent; its forwarder (testpmd or a command) is a DPDK "
      "program on virtio-net PCI devices fed by vhost-user; a command template is split into an argv and only named "
      "fields are filled (never a shell). The file itself is read by qemu-img, never judged by its name.",
      "libvirt domain XML disks and direct kernel boot (https://libvirt.org/formatdomain.html#hard-drives-floppy-"
      "disks-cdroms, #direct-kernel-boot); QEMU guest agent (https://www.qemu.org/docs/master/interop/"
      "qemu-ga-ref.html); qemu-img info (https://www.qemu.org/docs/master/tools/qemu-img.html); Python shlex")
def _guest_image(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    from labctl.profile import template, userimage

    g, w = p.guest, p.workload
    if g.image is None:
        if g.boot is not None:
            yield _err("guest.boot", "direct kernel boot is for a user's image (allowed: set guest.image, or leave "
                                     "guest.boot out for the appliance)")
        if w.forwarder != "appliance":
            yield _err("workload.forwarder", f"{w.forwarder} runs the image's own forwarder (allowed: appliance "
                                             "without guest.image)")
    else:
        if p.backend != "libvirt":
            yield _err("guest.image", "a disk image boots only as a libvirt guest (allowed: backend libvirt)")
        if not os.path.isabs(g.image):
            yield _err("guest.image", f"{g.image!r} is not an absolute path (allowed: /path/to/image.qcow2)")
        elif os.path.exists(g.image):
            try:
                userimage.probe(g.image)
            except userimage.ImageProblem as exc:
                yield _err("guest.image", str(exc))
        else:
            yield _warn("guest.image", f"{g.image} does not exist yet (a run needs it; `labctl image guest --out "
                                       f"{g.image}` builds one)")
        if w.forwarder == "appliance":
            yield _err("workload.forwarder", "an image guest runs its own forwarder (allowed: testpmd, command)")
        if p.topology != "pvp" or w.kind != "forward" or p.vswitch.kind != "testpmd":
            yield _err("guest.image", "an image guest is measured as pvp forwarding through the testpmd vswitch "
                                      "(allowed: topology pvp, workload.kind forward, vswitch.kind testpmd)")
        for i, nic in enumerate(g.nics):
            if nic.backend != "vhostuser" or nic.model != "virtio":
                yield _err(f"guest.nics.{i}.backend", "the image's DPDK forwarder runs on virtio-net fed by vhost-user "
                                                      "(allowed: backend vhostuser, model virtio)")
        if not 10 <= g.agent_timeout_s <= 3600:
            yield _err("guest.agent_timeout_s", f"{g.agent_timeout_s:g} is out of range (allowed: 10..3600)")
        if g.boot is not None:
            for key in ("kernel", "initrd"):
                value = getattr(g.boot, key)
                if value is not None and not os.path.isabs(value):
                    yield _err(f"guest.boot.{key}", f"{value!r} is not an absolute path (allowed: /path/to/file)")
    if w.forwarder == "command":
        if not w.command:
            yield _err("workload.command", "forwarder command needs a template (allowed: e.g. 'dpdk-l2fwd -l {cores} "
                                           "-a {pci0} -a {pci1} -- -p 0x3')")
        else:
            try:
                template.split(w.command)
            except template.TemplateProblem as exc:
                yield _err("workload.command", str(exc))
    elif w.command is not None:
        yield _err("workload.command", "a template is for forwarder command (allowed: leave it out)")


def binary_problem(path: str) -> str | None:
    """Why ``path`` cannot be a build's binary, or None: an absolute path to an executable regular file
    (symlinks resolved), owned by root or by the user running labctl, that no other user may write."""
    if not os.path.isabs(path):
        return f"{path[:80]!r} is not an absolute path (allowed: /path/to/an/executable)"
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError as exc:
        return f"{path[:80]}: {exc.strerror.lower()} (allowed: an existing executable file)"
    shown = path[:80] if real == path else f"{path[:80]} (-> {real[:80]})"
    if not stat.S_ISREG(info.st_mode):
        return f"{shown} is not a regular file (allowed: an executable file)"
    if not info.st_mode & 0o111 or not os.access(real, os.X_OK):
        return f"{shown} is not executable (allowed: an executable file, e.g. mode 0755)"
    if info.st_uid not in (0, os.geteuid()):
        return f"{shown} is owned by uid {info.st_uid} (allowed: owned by root or by uid {os.geteuid()}, who runs labctl)"
    if info.st_mode & 0o002:
        return f"{shown} is world-writable (allowed: writable by its owner only, e.g. chmod o-w)"
    return None


def probe_output(path: str, args: tuple[str, ...], env: tuple[tuple[str, str], ...] = ()) -> str:
    """What ``path args`` prints (stdout and stderr), run with ``env`` added to the environment; empty when it
    cannot run. Cached by the file's identity (path, size, mtime) and the arguments."""
    try:
        info = os.stat(path)
    except OSError:
        return ""
    return _probe(path, info.st_size, info.st_mtime_ns, args, env)


@lru_cache(maxsize=64)
def _probe(path: str, size: int, mtime_ns: int, args: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> str:
    try:
        done = subprocess.run([path, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S,
                              env={**os.environ, **dict(env)}, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout + done.stderr).decode(errors="replace")


#: DPDK EAL's -v prints "EAL: RTE Version: 'DPDK 22.11.11'" and -h the usage, then it exits: no hugepages,
#: no runtime directory (seen with Debian's dpdk-testpmd 22.11).
DPDK_VERSION_ARGS = ("-v", "-h")
RTE_VERSION = re.compile(r"RTE Version: '([^']+)'")
OVS_VERSION = re.compile(r"^ovs-vswitchd \(Open vSwitch\) \S+", re.M)


def vswitch_kind_of(path: str, env: tuple[tuple[str, str], ...] = ()) -> str | None:
    """``ovs-dpdk`` when ``path --version`` says ovs-vswitchd (Open vSwitch), ``testpmd`` when DPDK's EAL
    prints its RTE version (``-v -h``), else None."""
    if OVS_VERSION.search(probe_output(path, ("--version",), env)):
        return "ovs-dpdk"
    if RTE_VERSION.search(probe_output(path, DPDK_VERSION_ARGS, env)):
        return "testpmd"
    return None


@rule("builds", "A build replaces a program labctl starts as root: its path is resolved (symlinks followed, the "
      "resolved path recorded with its sha256) and must be an executable regular file owned by root or by the "
      "user running labctl that no other user can write, or anyone could swap what runs as root mid-sweep. Its "
      "env names environment variables (given to that build's processes only).",
      "execve(2) (regular file, execute permission); POSIX.1-2017 XBD 8.1 (environment variable names); "
      "CWE-732 (incorrect permission assignment for critical resource)")
def _builds(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for name, build in p.builds.items():
        if not NAME_PATTERN.match(name):
            yield _err(f"builds.{name}", f"{name[:40]!r} is not a build name (allowed: 1-40 of a-z, 0-9 and '-')")
        for role in ("qemu", "vswitch", "forwarder"):
            path = getattr(build, role)
            if path is not None:
                problem = binary_problem(path)
                if problem:
                    yield _err(f"builds.{name}.{role}", problem)
        yield from env_problems(f"builds.{name}.env", build.env)


def env_problems(where: str, env: dict[str, str]) -> Iterator[Problem]:
    """An environment's names must be variable names and its values text without NUL (execve(2))."""
    for key, value in env.items():
        if not ENV_NAME.match(key):
            yield _err(where, f"{key[:40]!r} is not an environment variable name (allowed: letters, digits and '_', "
                              "not starting with a digit)")
        elif "\0" in value:
            yield _err(f"{where}.{key}", "contains a NUL byte (allowed: text without NUL)")


@rule("build", "The knob build picks one entry of builds: a name it does not hold would silently run the host's "
      "binaries under a patched label. The vswitch a build gives must be the vswitch.kind labctl drives "
      "(asked of the binary itself, not its name: ovs-vswitchd --version says Open vSwitch; DPDK's EAL -v prints "
      "its RTE version), since testpmd's and OVS's command lines and control sockets have nothing in common. "
      "The embedded lab has no QEMU, so a qemu build there has no effect.",
      "ovs-vswitchd(8) --version; DPDK EAL parameters -v (doc.dpdk.org/guides/linux_gsg/linux_eal_parameters.html); "
      "libvirt formatdomain.html#devices (<emulator>)")
def _build(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.build is None:
        return
    if p.build not in p.builds:
        yield _err("build", f"{p.build[:40]!r} is not a build (allowed: {', '.join(p.builds) or 'none: add builds:'})")
        return
    build = p.builds[p.build]
    if build.vswitch is not None and binary_problem(build.vswitch) is None:
        kind = vswitch_kind_of(os.path.realpath(build.vswitch), tuple(sorted(build.env.items())))
        if kind != p.vswitch.kind:
            said = {"ovs-dpdk": "ovs-vswitchd", "testpmd": "a DPDK testpmd", None: "neither ovs-vswitchd nor DPDK"}[kind]
            yield _err(f"builds.{p.build}.vswitch", f"{build.vswitch[:80]} is {said} (allowed: a binary of "
                                                    f"vswitch.kind {p.vswitch.kind})")
    if build.qemu is not None and p.backend == "embedded":
        yield _warn(f"builds.{p.build}.qemu", "the embedded lab runs no QEMU: this build's qemu has no effect")


@rule("order", "A random order within each repeat is seeded, so the run can say how to reproduce it.",
      "labctl sweep ordering (Python random.Random(seed))")
def _order(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.seed is not None and p.order != "random":
        yield _warn("seed", f"seed has no effect with order {p.order} (it applies to order random)")
    if p.seed is not None:
        yield from _range("seed", p.seed, 0, 2**32 - 1)


@rule("repeat", "Repeats give the noise estimate every comparison needs; more than 100 is a typo.",
      "labctl report statistics")
def _repeat(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from _range("repeat", p.repeat, 1, 100)


def check_profile(profile: Profile, cpus: frozenset[int], with_sweep: bool = True) -> list[Problem]:
    """Run every rule; with_sweep also validates every configuration of the sweep matrix."""
    problems: list[Problem] = []
    for item in RULES:
        problems.extend(item.check(profile, cpus))
    if with_sweep and profile.sweep and not any(p.severity == "error" for p in problems):
        # the sweep's configurations are checked once the profile itself is valid: its own errors
        # would only come back once per configuration
        problems.extend(_check_sweep(profile, cpus))
    return problems


def _check_sweep(profile: Profile, cpus: frozenset[int]) -> list[Problem]:
    from labctl.profile.knobs import crossed, with_knobs
    from labctl.errors import KnobError
    from labctl.profile.schema import Profile as ProfileModel
    from pydantic import ValidationError

    problems: list[Problem] = []
    total = 1
    for knob, values in profile.sweep.items():
        path = f"sweep.{knob}"
        if not values:
            problems.append(_err(path, "an empty list of values (allowed: one or more values)"))
        if len(values) != len(set(map(repr, values))):
            problems.append(_err(path, "a value appears twice"))
        total *= max(len(values), 1)
    if total > MAX_SWEEP_CONFIGS:
        problems.append(_err("sweep", f"{total} configurations (allowed: at most {MAX_SWEEP_CONFIGS})"))
    if problems:
        return problems
    base = profile.model_dump()
    seen: set[str] = set()
    for knobs in crossed(profile.sweep):
        try:
            data = with_knobs(base, knobs)
            candidate = ProfileModel.model_validate(data)
        except KnobError as exc:
            message = str(exc)
            knob = message.split(":", 1)[0]
            problems.append(_err(f"sweep.{knob}", message.split(": ", 1)[-1]))
            break
        except ValidationError as exc:
            for error in exc.errors():
                loc = ".".join(str(x) for x in error["loc"])
                knob = next((k for k in knobs if loc.startswith(k.replace("*", "0")) or k.endswith(loc)), loc)
                key = f"{knob}:{error['msg']}"
                if key not in seen:
                    seen.add(key)
                    problems.append(_err(f"sweep.{knob}", f"value {knobs.get(knob)!r}: {error['msg']}"))
            continue
        setting = ", ".join(f"{k}={v}" for k, v in knobs.items())
        for problem in check_profile(candidate, cpus, with_sweep=False):
            if problem.severity != "error":
                continue
            key = f"{problem.path}:{problem.message}"
            if key not in seen:
                seen.add(key)
                problems.append(_err(f"sweep ({setting}) {problem.path}", problem.message))
    return problems


from labctl.profile import recipe_rules  # noqa: E402,F401  (registers the rules of recipes: and recipe builds)
