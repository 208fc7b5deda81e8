"""The lab plan: everything a lab's processes and devices take from its profile, derived once.

``derive(profile)`` turns a validated :class:`~labctl.profile.schema.Profile` into a :class:`LabPlan`:
per NIC the queues, rings, MAC, vhost-user socket and tap name; the guest forwarder's testpmd settings
(mode, burst, descriptors clamped to the rings, queues, forwarding cores, mbufs, noisy-neighbour
options, memory); the vswitch's (queues, PMD cores, mbufs, memory); the requested pins as cpusets.
Every reader takes its numbers from here and nowhere else:

- the embedded lab's guest forwarder and vswitch (``labctl.lab.embedded``) build their command lines
  from ``plan.forwarder`` and ``plan.vswitch``;
- a libvirt guest's appliance runs the *same* forwarder command line inside the guest (its kernel
  command line carries ``plan.forwarder.options().argv()``), and the host-side vswitch is ``plan.vswitch``;
- the domain XML (``labctl.lab.libvirt.domxml``) renders ``plan.nics``, the guest's size and its pins.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field, replace
from pathlib import Path

from labctl.dpdk.eal import mbuf_budget
from labctl.dpdk.testpmd import TestpmdOptions
from labctl import paths, platform
from labctl.host.cpuset import format_cpuset, parse_cpuset
from labctl.lab.recipes import RecipeBuild
from labctl.profile.rates import Rate, parse_rate
from labctl.profile.schema import Nic, Profile

#: The host-side generator: burst and flows of testpmd's flowgen mode (and labgen's defaults).
GENERATOR_BURST = 32
GENERATOR_FLOWS = 64
#: workload.pacing shift: a gap between two sending passes of labgen longer than this is a pause of its CPU,
#: and its schedule moves later by the gap (native/labgen/src/worker.c shift_schedule). A pass takes
#: microseconds; the pauses of this host's vCPUs last 0.1-10 ms; a 100 us gap caught up in a burst is at
#: most rate * 100 us frames (60 at 0.6 Mpps per port), which any ring of 256 takes.
PAUSE_SHIFT_S = 100e-6
#: The vswitch's own descriptors: DPDK's default ring of 1024 on net_vhost ports.
VSWITCH_DESCRIPTORS = 1024


def nic_mac(name: str, index: int) -> str:
    """A stable, locally administered MAC per lab and NIC, so guest interfaces map back to NICs."""
    digest = hashlib.sha1(name.encode()).digest()
    return "52:54:{:02x}:{:02x}:{:02x}:{:02x}".format(digest[0], digest[1], digest[2], index)


def tap_name(name: str, index: int) -> str:
    """A tap device name under the kernel's 15-character limit, stable per lab and NIC."""
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"lct{digest}n{index}"


@dataclass(frozen=True)
class LabDirs:
    """Where one lab keeps its sockets and mounts (``run``) and its logs (``log``)."""

    run: Path
    log: Path

    @classmethod
    def of(cls, name: str, run_root: Path | None = None, log_root: Path | None = None) -> "LabDirs":
        return cls((run_root or paths.run_dir()) / name, (log_root or paths.log_dir()) / name)

    def socket(self, nic_index: int) -> Path:
        return self.run / f"vhost-{nic_index}.sock"

    @property
    def serial_log(self) -> Path:
        return self.log / "serial.log"

    @property
    def hugetlbfs(self) -> Path:
        return self.run / "hugetlbfs"


@dataclass(frozen=True)
class NicPlan:
    index: int
    backend: str
    model: str  # virtio | e1000 | e1000e
    queues: int
    rx_ring: int
    tx_ring: int
    mac: str
    socket: Path | None  # vhost-user socket (backend vhostuser)
    tap: str | None  # tap device (backend tap)

    @property
    def virtqueue_size(self) -> int:
        """virtio_user has one queue_size for both directions: the larger ring asked for."""
        return max(self.rx_ring, self.tx_ring)

    def requested(self) -> dict[str, object]:
        return {"backend": self.backend, "model": self.model, "queues": self.queues, "rx_ring": self.rx_ring,
                "tx_ring": self.tx_ring}


@dataclass(frozen=True)
class ForwarderPlan:
    """The guest forwarder: one testpmd forwarding between the guest's ports, in the embedded lab as a
    ``net_virtio_user`` process and in a libvirt guest on the virtio-net PCI devices."""

    mode: str
    burst: int
    rxd: int  # workload.rxd, capped at the smallest rx ring: virtio PMDs cap descriptors at the ring size
    txd: int
    queues: int
    cores: int  # forwarding lcores: one per vCPU
    ports: int
    noisy: tuple[str, ...]  # testpmd's noisy-neighbour options (mode noisy only)
    noisy_memory_mb: int
    packet_size: int = 64  # what txonly sends (vm2vm's guest A)

    @property
    def mbufs(self) -> int:
        return mbuf_budget(self.ports, self.queues, self.rxd, self.txd)[0]

    def memory_mb(self, hugepages: bool) -> int:
        """EAL memory: the mbuf pool and headroom, plus noisy mode's lookup memory."""
        return mbuf_budget(self.ports, self.queues, self.rxd, self.txd, hugepages)[1] + self.noisy_memory_mb

    def options(self, stats_period_s: int | None = None, mode: str | None = None) -> TestpmdOptions:
        """testpmd's application options; ``mode`` overrides the forwarding mode (vm2vm: txonly, rxonly)."""
        mode = mode or self.mode
        extra = list(self.noisy) if mode == "noisy" else []
        if mode == "txonly":
            extra.append(f"--txpkts={self.packet_size}")
        return TestpmdOptions(forward_mode=mode, nb_cores=self.cores, rxq=self.queues, txq=self.queues,
                              rxd=self.rxd, txd=self.txd, burst=self.burst, total_mbufs=self.mbufs,
                              extra=extra, stats_period_s=stats_period_s)


@dataclass(frozen=True)
class VswitchPlan:
    """The host side of the vhost-user NICs: a testpmd with ``net_vhost`` ports, one PMD per CPU of
    ``pinning.vhost`` (or one floating PMD), also the traffic generator and sink."""

    ports: int  # the NICs it serves (vhost-user ports, or af_packet ports on a guest's taps)
    queues: int
    pmds: tuple[frozenset[int] | None, ...]
    packet_size: int
    kind: str = "testpmd"  # testpmd | ovs-dpdk
    ovs: dict = field(default_factory=dict)  # OVS knobs set (labctl.lab.ovs.OvsSwitch.configure)
    rxq_affinity: dict = field(default_factory=dict)  # NIC index -> {rx queue: PMD CPU}
    socket_mem_mb: int = 256
    burst: int = GENERATOR_BURST
    flows: int = GENERATOR_FLOWS

    @property
    def mbufs(self) -> int:
        return mbuf_budget(self.ports, self.queues, VSWITCH_DESCRIPTORS, VSWITCH_DESCRIPTORS)[0]

    def memory_mb(self, hugepages: bool) -> int:
        return mbuf_budget(self.ports, self.queues, VSWITCH_DESCRIPTORS, VSWITCH_DESCRIPTORS, hugepages)[1]


@dataclass(frozen=True)
class GeneratorPlan:
    """The host side's traffic: ``labgen`` (paced, sequence numbers, latency) or testpmd ``flowgen`` (flat
    out). ``rate``: the offered load of all ports together; ``workers``: labgen's worker lcores (the
    vswitch PMD cores: one sends and receives, two split the roles); ``shift_s``: workload.pacing."""

    kind: str
    rate: Rate
    frame_size: int
    burst: int
    flows: int
    queues: int
    workers: tuple[frozenset[int] | None, ...]
    shift_s: float  # workload.pacing: the pause that shifts labgen's schedule (0: absolute)


@dataclass(frozen=True)
class PinPlan:
    """Requested pins, as normalised cpusets ("0-1"); ``vcpu_cpus`` per vCPU (None: unpinned)."""

    vcpus: dict[int, str]
    emulator: str | None
    vhost: str | None
    vcpu_cpus: tuple[frozenset[int] | None, ...]

    def requested(self) -> dict[str, object]:
        return {"vcpus": dict(self.vcpus), "emulator": self.emulator, "vhost": self.vhost}


#: tcp workloads on tap NICs: a /30 per lab out of 198.18.0.0/15, the range set aside for benchmarking
#: network devices (RFC 2544 appendix C.2.2, RFC 6890): never routed, so it cannot shadow a real network.
TCP_NET = ipaddress.ip_network("198.18.0.0/15")
#: Server ports of a tcp workload: a block of MAX_TCP_SESSIONS per lab between these (one per session).
TCP_PORTS = (20000, 60000)


@dataclass(frozen=True)
class TcpPlan:
    """The kernel-stack workload (``workload.kind`` tcp_stream / tcp_rr) on NIC 0 of a kernel guest."""

    kind: str  # tcp_stream | tcp_rr
    sessions: int
    direction: str  # guest_to_host | host_to_guest: the side whose clients send (streams) or ask (RR)
    guest_queues: int | None  # ethtool -L combined N in the guest (None: leave the driver's choice)
    port_base: int  # session i's server listens on port_base + i
    host_addr: str | None  # tap: this lab's /30 (host end, guest end); network: learnt at boot (DHCP)
    guest_addr: str | None
    prefix: int
    tag: str  # LABCTL_TAG of every host-side workload process (the ledger's "tagged" kind)

    @property
    def ports(self) -> tuple[int, ...]:
        return tuple(self.port_base + i for i in range(self.sessions))

    @property
    def clients_in_guest(self) -> bool:
        return self.direction == "guest_to_host"


def tcp_subnet(name: str) -> tuple[str, str, int]:
    """(host address, guest address, prefix) of lab ``name``'s /30 on its tap: stable per lab."""
    slots = TCP_NET.num_addresses // 4
    index = int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % slots
    base = TCP_NET.network_address + 4 * index
    return str(base + 1), str(base + 2), 30


def tcp_port_base(name: str) -> int:
    slots = (TCP_PORTS[1] - TCP_PORTS[0]) // platform.MAX_TCP_SESSIONS
    return TCP_PORTS[0] + (int(hashlib.sha1(name.encode()).hexdigest()[8:16], 16) % slots) * platform.MAX_TCP_SESSIONS


def _tcp(profile: Profile) -> TcpPlan | None:
    w = profile.workload
    if w.kind == "forward":
        return None
    host, guest, prefix = tcp_subnet(profile.name)
    on_tap = profile.guest.nics[0].backend == "tap"
    return TcpPlan(kind=w.kind, sessions=w.sessions, direction=w.direction, guest_queues=w.guest_queues,
                   port_base=tcp_port_base(profile.name), host_addr=host if on_tap else None,
                   guest_addr=guest if on_tap else None, prefix=prefix if on_tap else 24,
                   tag=f"labctl-{profile.name}-tcp")


@dataclass(frozen=True)
class BuildPlan:
    """The build a trial runs (``build`` of ``builds``): its label and, per role, the binary it gives (None:
    the host's) as the profile wrote it; ``labctl.lab.builds`` resolves, checks, hashes and versions them.
    ``env`` goes to the processes of the roles it gives a binary for (to every DPDK role when it gives none)."""

    label: str | None = None
    qemu: str | None = None
    vswitch: str | None = None
    forwarder: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    recipe: RecipeBuild | None = None  # a build made by a recipe: its output is the recipe's role's binary

    def path(self, role: str) -> str | None:
        return getattr(self, role)

    def gives(self, role: str) -> bool:
        """True when this build replaces ``role``'s binary (a path, or its recipe's output)."""
        return bool(getattr(self, role)) or (self.recipe is not None and self.recipe.role == role)

    def env_for(self, role: str) -> dict[str, str]:
        """The environment this build adds to ``role``'s process (QEMU's: none, libvirt starts it)."""
        if role == "qemu" or not self.env:
            return {}
        gives_any = any(self.gives(r) for r in ("vswitch", "forwarder", "qemu"))
        return dict(self.env) if not gives_any or self.gives(role) else {}


def _build(profile: Profile) -> BuildPlan:
    if profile.build is None:
        return BuildPlan()
    b = profile.builds[profile.build]
    recipe = RecipeBuild.of(b.recipe, profile.recipes[b.recipe], b.rev) if b.recipe and b.rev else None
    return BuildPlan(label=profile.build, qemu=b.qemu, vswitch=b.vswitch, forwarder=b.forwarder,
                     env=tuple(sorted(b.env.items())), recipe=recipe)


@dataclass(frozen=True)
class ImagePlan:
    """A user's image guest (``guest.image``): the image booted through labctl's copy-on-write overlay (in the
    lab's run directory), direct kernel boot when ``kernel`` is set, the agent's bound, and the forwarder
    (``testpmd``: the image's dpdk-testpmd; ``command``: the filled template). ``identity``: size plus the
    sha256 of its first MiB when the plan was derived (a rebuilt image is another domain)."""

    path: str
    identity: str
    kernel: str | None
    initrd: str | None
    cmdline: str
    access: str
    agent_timeout_s: float
    forwarder: str  # testpmd | command
    command: str | None

    def overlay(self, dirs: LabDirs) -> Path:
        return dirs.run / "overlay.qcow2"


def _image(profile: Profile) -> ImagePlan | None:
    g = profile.guest
    if g.image is None:
        return None
    from labctl.profile.userimage import identity_of

    boot = g.boot
    return ImagePlan(path=g.image, identity=identity_of(g.image), kernel=boot.kernel if boot else None,
                     initrd=boot.initrd if boot else None, cmdline=boot.cmdline if boot else "", access=g.access,
                     agent_timeout_s=g.agent_timeout_s, forwarder=profile.workload.forwarder,
                     command=profile.workload.command)


@dataclass(frozen=True)
class LabPlan:
    name: str
    lab: str  # embedded | libvirt
    domain_name: str
    vcpus: int
    memory_mib: int
    hugepages: bool
    nics: tuple[NicPlan, ...]
    forwarder: ForwarderPlan
    vswitch: VswitchPlan
    generator: GeneratorPlan
    pins: PinPlan
    dirs: LabDirs
    packet_size: int
    warmup_s: float
    duration_s: float
    topology: str = "pvp"  # pvp: generator -> guest -> sink; vm2vm: guest A (txonly) -> guest B (rxonly)
    peer_nics: tuple[NicPlan, ...] = ()  # vm2vm: guest B's NICs (its sockets beside A's)
    workload_kind: str = "forward"  # forward | tcp_stream | tcp_rr
    tcp: TcpPlan | None = None  # the tcp kinds' sessions, direction, addresses and ports
    build: BuildPlan = field(default_factory=BuildPlan)  # the binaries it runs (builds: / build)
    image: ImagePlan | None = None  # a user's image guest (guest.image); None: the appliance

    @property
    def file_prefix(self) -> str:
        """DPDK --file-prefix stem of this lab's processes (``-vs``, ``-guest`` appended)."""
        return f"labctl-{self.name}"

    @property
    def vhostuser_nics(self) -> tuple[NicPlan, ...]:
        return tuple(n for n in self.nics if n.backend == "vhostuser")

    @property
    def needs_shared_memory(self) -> bool:
        """vhost-user backends map the guest's memory: it must be shared (memfd or hugepages)."""
        return bool(self.vhostuser_nics)

    def domain_key(self) -> tuple:
        """What a libvirt guest must be booted (or its host side restarted) to change: its size, its NICs
        and the vswitch PMD cores, and its stack (DPDK forwarder or kernel driver). vCPU and emulator pins
        are applied live, the workload per trial. A build's binaries too: its QEMU is the domain's
        <emulator> (re-defined), its vswitch the host side (restarted), its forwarder the appliance's
        (another image); a plan without a build keeps the key it had before builds existed. The embedded
        lab has no guest memory to size (its forwarder's memory follows its NICs and noisy lookup table,
        :meth:`embedded_hugepage_mb`), so ``guest.memory_mib`` restarts nothing there."""
        memory = None if self.lab == "embedded" else self.memory_mib
        key = (self.lab, self.vcpus, memory, self.hugepages,
               tuple((n.backend, n.model, n.queues, n.rx_ring, n.tx_ring) for n in self.nics), self.pins.vhost,
               self.generator.kind, self.vswitch.kind, self.topology, self.stack)
        binaries = replace(self.build, label=None)  # the label alone changes no process
        key = key if binaries == BuildPlan() else (*key, binaries)
        if self.image is not None:  # the image (path and identity) and how it boots; not its forwarder
            i = self.image
            key = (*key, ("image", i.path, i.identity, i.kernel, i.initrd, i.cmdline))
        return key

    @property
    def stack(self) -> str:
        """What drives the guest's NICs: ``dpdk`` (the forwarder) or ``kernel`` (virtio_net, tcp kinds)."""
        return "dpdk" if self.tcp is None else "kernel"

    def peer(self) -> "LabPlan":
        """vm2vm's guest B: the peer NICs (MACs and sockets of the lab's name + "-b") in a domain of its own
        (the domain's name + "-b"), a pvp plan of one guest whose logs are in ``guest-b/`` beside A's.
        The same pins, forwarder and durations as guest A (the trial starts B's forwarder in rxonly mode)."""
        if self.topology != "vm2vm":
            raise ValueError(f"topology {self.topology}: only a vm2vm plan has a guest B")
        return replace(self, name=f"{self.name}-b", domain_name=f"{self.domain_name}-b", nics=self.peer_nics,
                       peer_nics=(), topology="pvp", dirs=LabDirs(self.dirs.run, self.dirs.log / "guest-b"))

    def embedded_hugepage_mb(self) -> int:
        """2 MiB-page memory both embedded processes need (the vswitch and the guest forwarder)."""
        return self.vswitch.memory_mb(True) + self.forwarder.memory_mb(True)


#: Knob paths that change a libvirt guest's domain (LabPlan.domain_key): a new value needs a boot.
LIVE_PIN_KNOBS = ("guest.pinning.vcpus", "guest.pinning.emulator")


def is_domain_knob(path: str) -> bool:
    """Whether a knob (``guest.nics.*.rx_queue_size``, ``workload.burst``) needs a guest boot to change.
    Other ``workload.*`` knobs are applied per trial: the forwarder's settings, and the tcp kinds' sessions,
    direction and ``guest_queues`` (``ethtool -L`` in the running guest)."""
    if path in ("backend", "uri", "name", "topology", "workload.generator", "build") or path.startswith("vswitch."):
        # the generator and the vswitch are the guest's host side (workload.kind between tcp_stream and
        # tcp_rr is live; to or from forward it changes the guest's stack, which domain_key() holds)
        return True
    return path.startswith("guest.") and not path.startswith(LIVE_PIN_KNOBS)


def noisy_arguments(profile: Profile) -> tuple[str, ...]:
    if profile.workload.mode != "noisy":
        return ()
    n = profile.workload.noisy
    return (f"--noisy-tx-sw-buffer-size={n.tx_sw_bufsz}", f"--noisy-tx-sw-buffer-flushtime={n.tx_sw_buf_flushtime}",
            f"--noisy-lkup-memory={n.lkup_memory_mib}", f"--noisy-lkup-num-reads={n.lkup_num_reads}",
            f"--noisy-lkup-num-writes={n.lkup_num_writes}",
            f"--noisy-lkup-num-reads-writes={n.lkup_num_reads_writes}")


def noisy_memory_mb(profile: Profile) -> int:
    """noisy mode allocates its lookup memory (and a software TX ring) from DPDK's heap once per
    port (testpmd 22.11 noisy_fwd_begin)."""
    if profile.workload.mode != "noisy":
        return 0
    noisy = profile.workload.noisy
    ring_mb = -(-noisy.tx_sw_bufsz * 8 // (1 << 20)) + 1
    memory_mb = len(profile.guest.nics) * (noisy.lkup_memory_mib + ring_mb)
    return memory_mb + memory_mb % 2  # whole 2 MiB pages


def _nic(profile: Profile, index: int, nic: Nic, dirs: LabDirs, peer: bool = False) -> NicPlan:
    """NIC ``index`` of the guest (``peer``: of vm2vm's guest B, whose identity is the lab's name + "-b")."""
    name = f"{profile.name}-b" if peer else profile.name
    return NicPlan(index=index, backend=nic.backend, model=nic.model, queues=nic.queues, rx_ring=nic.rx_queue_size,
                   tx_ring=nic.tx_queue_size, mac=nic_mac(name, index),
                   socket=(dirs.run / f"vhost-b{index}.sock" if peer else dirs.socket(index))
                   if nic.backend == "vhostuser" else None,
                   tap=tap_name(name, index) if nic.backend == "tap" else None)


def _pins(profile: Profile) -> PinPlan:
    pin = profile.guest.pinning
    vcpu_cpus = tuple(parse_cpuset(pin.vcpus[i]) if i in pin.vcpus else None for i in range(profile.guest.vcpus))
    return PinPlan(vcpus={i: format_cpuset(parse_cpuset(c)) for i, c in sorted(pin.vcpus.items())},
                   emulator=format_cpuset(parse_cpuset(pin.emulator)) if pin.emulator else None,
                   vhost=format_cpuset(parse_cpuset(pin.vhost)) if pin.vhost else None, vcpu_cpus=vcpu_cpus)


def derive(profile: Profile, dirs: LabDirs | None = None) -> LabPlan:
    """The plan of a validated profile (rules already checked: rings and cpusets are valid)."""
    dirs = dirs or LabDirs.of(profile.name)
    nics = tuple(_nic(profile, i, nic, dirs) for i, nic in enumerate(profile.guest.nics))
    w = profile.workload
    queues = max(n.queues for n in nics)
    forwarder = ForwarderPlan(mode=w.mode, burst=w.burst, rxd=min(w.rxd, min(n.rx_ring for n in nics)),
                              txd=min(w.txd, min(n.tx_ring for n in nics)), queues=queues,
                              cores=profile.guest.vcpus, ports=len(nics), noisy=noisy_arguments(profile),
                              noisy_memory_mb=noisy_memory_mb(profile), packet_size=w.packet_size)
    pins = _pins(profile)
    pmds: tuple[frozenset[int] | None, ...] = (None,) if pins.vhost is None else \
        tuple(frozenset({cpu}) for cpu in sorted(parse_cpuset(pins.vhost)))
    v = profile.vswitch
    ovs_knobs = {"tx_flush_interval": v.tx_flush_interval, "emc_insert_inv_prob": v.emc_insert_inv_prob,
                 "smc_enable": v.smc, "pmd_rxq_assign": v.rxq_assign}
    peers = tuple(_nic(profile, i, nic, dirs, peer=True) for i, nic in enumerate(profile.guest.nics)) \
        if profile.topology == "vm2vm" else ()
    vswitch = VswitchPlan(ports=len(nics) + len(peers), queues=queues, pmds=pmds, packet_size=w.packet_size,
                          kind=v.kind, ovs={k: x for k, x in ovs_knobs.items() if x is not None},
                          rxq_affinity={i: dict(q) for i, q in v.rxq_affinity.items()}, socket_mem_mb=v.socket_mem_mib)
    generator = GeneratorPlan(kind=w.generator, rate=parse_rate(w.rate), frame_size=w.packet_size,
                              burst=GENERATOR_BURST, flows=GENERATOR_FLOWS, queues=queues, workers=pmds[:2],
                              shift_s=PAUSE_SHIFT_S if w.pacing == "shift" else 0.0)
    return LabPlan(name=profile.name, lab=profile.backend, domain_name=profile.domain_name,
                   vcpus=profile.guest.vcpus, memory_mib=profile.guest.memory_mib,
                   hugepages=profile.guest.hugepages, nics=nics, forwarder=forwarder, vswitch=vswitch, generator=generator,
                   pins=pins, dirs=dirs, packet_size=w.packet_size, warmup_s=w.warmup_s, duration_s=w.duration_s,
                   topology=profile.topology, peer_nics=peers, workload_kind=w.kind, tcp=_tcp(profile),
                   build=_build(profile), image=_image(profile))
