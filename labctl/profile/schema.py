"""The lab profile schema (the user's contract), declared once with pydantic v2.

Types and structure live here; every value constraint lives in ``labctl.profile.rules``. Every field has
its description as an attribute docstring below it (pydantic's ``use_attribute_docstrings``): the docs'
profile reference is made from them, and ``tests/unit/docs/test_help_texts.py`` fails on a field without one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

Scalar = Union[bool, int, float, str]


def _cpuset_text(value: Any) -> Any:
    """Accept a bare integer as a one-CPU cpuset ("1"); everything else stays for validation."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


CpuSet = Annotated[str, BeforeValidator(_cpuset_text)]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=False, use_attribute_docstrings=True)


class Nic(Model):
    backend: Literal["vhostuser", "tap", "network"] = "vhostuser"
    """How the NIC reaches the host: vhostuser (a vhost-user socket served by the host-side vswitch, the DPDK path), tap (a host tap device, the kernel path) or network (libvirt's default network)."""
    model: Literal["virtio", "e1000", "e1000e"] = "virtio"
    """The NIC QEMU emulates (libvirt guests): virtio-net, or an emulated Intel e1000/e1000e for comparison."""
    queues: int = 1
    """Queue pairs of the NIC (virtio-net multiqueue; libvirt `<driver queues>`); the guest's forwarder polls each."""
    rx_queue_size: int = 256
    """Descriptors in each receive virtqueue: 256, 512 or 1024 (libvirt `<driver rx_queue_size>`; the embedded lab's virtio_user `queue_size`)."""
    tx_queue_size: int = 256
    """Descriptors in each transmit virtqueue: 256, 512 or 1024; QEMU caps it at 256 unless the backend is vhost-user."""


def _vcpu_keys(value: Any) -> Any:
    """vCPU indexes come back from JSON (the result store) as strings: "0" -> 0."""
    if isinstance(value, dict):
        return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in value.items()}
    return value


class Pinning(Model):
    vcpus: Annotated[dict[int, CpuSet], BeforeValidator(_vcpu_keys)] = Field(default_factory=dict)
    """vCPU index -> the host CPUs it may run on (a cpuset such as `1` or `2-3`): libvirt `<vcpupin>`, or the embedded guest's lcores. Empty: not pinned."""
    emulator: CpuSet | None = None
    """Host CPUs for QEMU's emulator and I/O threads (libvirt `<emulatorpin>`; vhost-net workers follow it). None: not pinned."""
    vhost: CpuSet | None = None
    """Host CPUs for the host-side datapath: the vswitch's polling cores (vhost-user) or the vhost-net workers. None: not pinned."""


class GuestBoot(Model):
    """Direct kernel boot of a user's image (libvirt ``<os><kernel/><initrd/><cmdline/>``): host paths."""

    kernel: str
    """Host path of the kernel the image boots with (libvirt `<os><kernel>`)."""
    initrd: str | None = None
    """Host path of its initramfs (libvirt `<os><initrd>`); None: none."""
    cmdline: str = ""
    """The kernel command line (libvirt `<os><cmdline>`), e.g. `root=/dev/vda1 console=ttyS0`."""


class Guest(Model):
    image: str | None = None
    """A user's disk image (qcow2 or raw) booted through a copy-on-write overlay labctl makes (the image is never written); None: labctl's workload appliance."""
    boot: GuestBoot | None = None
    """Direct kernel boot of the image; None: the image's own boot loader."""
    access: Literal["agent"] = "agent"
    """How labctl reaches an image guest: the QEMU guest agent (channel org.qemu.guest_agent.0)."""
    agent_timeout_s: float = 180.0
    """Seconds the guest agent may take to answer first after the domain starts (the image's boot)."""
    vcpus: int = 2
    """Virtual CPUs of the guest (the embedded lab's guest: its forwarding lcores)."""
    memory_mib: int = 1024
    """Guest memory in MiB."""
    hugepages: bool = False
    """Back guest memory with 2 MiB hugepages (libvirt `<memoryBacking><hugepages>`; the embedded lab's DPDK processes use hugetlbfs instead of `--no-huge`)."""
    nics: list[Nic] = Field(default_factory=lambda: [Nic(), Nic()])
    """The guest's NICs in order (two for a forwarding guest: port 0 and port 1); a knob path addresses one by index or all by `*`: `guest.nics.*.rx_queue_size`."""
    pinning: Pinning = Field(default_factory=Pinning)
    """Where the guest's vCPUs, QEMU's emulator threads and the host-side datapath run."""


class Noisy(Model):
    """testpmd's noisy-neighbour simulation (forward mode ``noisy``)."""

    tx_sw_bufsz: int = 0
    """testpmd `--noisy-tx-sw-buffer-size`: packets held in a software FIFO before sending (0: none)."""
    tx_sw_buf_flushtime: int = 0
    """testpmd `--noisy-tx-sw-buffer-flushtime`: ms before the FIFO is flushed."""
    lkup_memory_mib: int = 0
    """testpmd `--noisy-lkup-memory`: MiB of the table each packet's reads and writes hit (a VNF's working set)."""
    lkup_num_reads: int = 0
    """testpmd `--noisy-lkup-num-reads`: random reads in the table per packet."""
    lkup_num_writes: int = 0
    """testpmd `--noisy-lkup-num-writes`: random writes in the table per packet."""
    lkup_num_reads_writes: int = 0
    """testpmd `--noisy-lkup-num-reads-writes`: random read-modify-writes per packet."""


class Workload(Model):
    kind: Literal["forward", "tcp_stream", "tcp_rr"] = "forward"
    """forward: a DPDK forwarder in the guest (testpmd) between the host-side generator and sink; tcp_stream / tcp_rr: the guest's kernel virtio-net driver under TCP streams (iperf3) or request/response transactions (sockperf ping-pong), one client/server pair per session."""
    forwarder: Literal["appliance", "testpmd", "command"] = "appliance"
    """The guest's forwarder: labctl's appliance testpmd, the image's own dpdk-testpmd, or the user's `command` template."""
    command: str | None = None
    """With forwarder `command`: the forwarder's argv template (shlex-split, never a shell) with the fields {pci0} {pci1} {cores} {rxd} {txd} {burst} {queues}."""
    sessions: int = 1
    """tcp kinds: parallel sessions, one client/server pair each."""
    direction: Literal["guest_to_host", "host_to_guest"] = "guest_to_host"
    """tcp kinds: which side the clients send from."""
    guest_queues: int | None = None
    """tcp kinds: `ethtool -L combined N` in the guest before the trial; None: what the driver enabled."""
    mode: Literal["io", "mac", "noisy"] = "io"
    """The forwarder's testpmd forward mode: io (as received), mac (addresses rewritten) or noisy (a VNF's work per packet, see `noisy`)."""
    burst: int = 32
    """Packets per receive/transmit burst of the forwarder (testpmd `--burst`), 1..512."""
    packet_size: int = 64
    """Frame size in bytes, 64..1518 (without the FCS)."""
    generator: Literal["labgen", "flowgen"] = "labgen"
    """The host-side traffic source: labgen (labctl's paced generator: sequence numbers, latency, loss) or testpmd flowgen (flat out, no pacing)."""
    rate: str = "max"
    """Offered load of all ports together: max, or 2.5Mpps, 500kpps, 150000pps, or 40% (of the measured maximum); a paced rate needs labgen."""
    pacing: Literal["shift", "absolute"] = "shift"
    """labgen's schedule after a pause of its own CPU longer than 100 us: shift (the rest of the schedule moves later by the pause) or absolute (the frames due in the pause go out back to back as it ends)."""
    rxd: int = 1024
    """Receive descriptors of the guest forwarder's ports (testpmd `--rxd`), capped by the NIC's rx_queue_size."""
    txd: int = 1024
    """Transmit descriptors of the guest forwarder's ports (testpmd `--txd`)."""
    duration_s: float = 10.0
    """Seconds of the measurement window of each trial."""
    warmup_s: float = 2.0
    """Seconds of traffic before the window opens (not counted)."""
    noisy: Noisy = Field(default_factory=Noisy)
    """The noisy forward mode's settings (mode `noisy`)."""


class Vswitch(Model):
    """The host-side switch between the generator and the guest(s): a testpmd with net_vhost ports
    (``testpmd``), or labctl's own Open vSwitch with DPDK (``ovs-dpdk``) and its knobs."""

    kind: Literal["testpmd", "ovs-dpdk"] = "testpmd"
    """The host-side switch: a testpmd with net_vhost ports, or labctl's own Open vSwitch with DPDK (private ovsdb-server and ovs-vswitchd)."""
    tx_flush_interval: int | None = None
    """ovs-dpdk: other_config:tx-flush-interval, microseconds a PMD may hold packets to send them in larger batches; None: OVS's default."""
    emc_insert_inv_prob: int | None = None
    """ovs-dpdk: other_config:emc-insert-inv-prob, one in N flows is inserted in the exact-match cache (0 disables the EMC)."""
    smc: bool | None = None
    """ovs-dpdk: other_config:smc-enable, the signature-match cache."""
    rxq_assign: Literal["cycles", "group", "roundrobin"] | None = None
    """ovs-dpdk: other_config:pmd-rxq-assign, how receive queues are spread over PMD threads."""
    rxq_affinity: dict[int, dict[int, int]] = Field(default_factory=dict)
    """ovs-dpdk: NIC index -> {receive queue: PMD CPU} (the port's other_config:pmd-rxq-affinity)."""
    socket_mem_mib: int = 256
    """ovs-dpdk: other_config:dpdk-socket-mem (and -limit), MiB of 2 MiB pages."""


class Build(Model):
    """One build of the lab's programs (``builds:``): a path per role it replaces, and the environment of
    those processes. A role it leaves out runs the host's binary (found on PATH, or libvirt's emulator).
    Or a git revision built by a recipe (``recipe`` + ``rev``): its output replaces the recipe's role."""

    qemu: str | None = None
    """Path of the emulator libvirt starts (the domain's `<emulator>`); None: libvirt's default."""
    vswitch: str | None = None
    """Path of ovs-vswitchd (vswitch.kind ovs-dpdk) or of the host-side testpmd (testpmd); None: the host's."""
    forwarder: str | None = None
    """Path of the guest's testpmd: the embedded lab's process, or the binary the appliance carries; None: the host's."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of this build's processes (LD_LIBRARY_PATH of a build tree, a DPDK plugin directory)."""
    recipe: str | None = None
    """A key of `recipes`: this build is that recipe's output at `rev`."""
    rev: str | None = None
    """A git revision of the recipe's repository (commit, tag, branch)."""


class Recipe(Model):
    """How a binary is built from a git revision (``recipes:``; labctl.lab.recipes): ``argv`` runs in a
    clean checkout of the revision (its working directory), never through a shell; ``output`` (a path
    in that checkout) is the binary that replaces ``role``."""

    repo: str
    """The git repository (a directory with .git, or a bare one), an absolute path."""
    argv: list[str]
    """The build command: a program (absolute, ./relative to the checkout, or on PATH) and its arguments."""
    output: str
    """The built binary, relative to the checkout (build/app/dpdk-testpmd)."""
    role: Literal["forwarder", "vswitch", "qemu"]
    """The binary the output replaces."""
    env: dict[str, str] = Field(default_factory=dict)
    """The build's own variables (CFLAGS, ...): part of its cache key."""
    timeout_s: float = 3600.0
    """One build's longest run, in seconds."""


#: The roles a build may give a binary for.
BUILD_ROLES = ("qemu", "vswitch", "forwarder")


class Profile(Model):
    name: str
    """The lab's name: its libvirt domain is labctl-NAME, its DPDK file prefixes and state carry it."""
    backend: Literal["libvirt", "embedded"] = "libvirt"
    """libvirt: a QEMU guest defined through libvirt; embedded: no VM, the guest is a DPDK process with virtio_user ports (the vhost-user path without a hypervisor)."""
    uri: str | None = None
    """The libvirt connection URI; None: qemu:///system."""
    topology: Literal["pvp", "vm2vm"] = "pvp"
    """pvp: generator -> vswitch -> guest -> vswitch -> sink; vm2vm: guest A sends to guest B through the vswitch."""
    vswitch: Vswitch = Field(default_factory=Vswitch)
    """The host-side switch and its knobs."""
    guest: Guest = Field(default_factory=Guest)
    """The guest: its image or the appliance, CPUs, memory, NICs and pinning."""
    workload: Workload = Field(default_factory=Workload)
    """What runs through the lab (the forwarder and its traffic, or TCP sessions) and each trial's timing."""
    builds: dict[str, Build] = Field(default_factory=dict)
    """Named builds of the lab's programs (name -> build); the knob `build` picks one, so a sweep can compare a patch with its base."""
    recipes: dict[str, Recipe] = Field(default_factory=dict)
    """Named recipes (name -> how builds from git revisions are made)."""
    build: str | None = None
    """A key of `builds`; None: the host's binaries."""
    sweep: dict[str, list[Scalar]] = Field(default_factory=dict)
    """Knob path -> the values to try (e.g. `guest.nics.*.rx_queue_size: [256, 1024]`); `labctl sweep` crosses them."""
    repeat: int = 1
    """Repeats of every configuration, interleaved (A B A B, never A A B B)."""
    order: Literal["interleaved", "random"] = "interleaved"
    """The order of a sweep's trials within each repeat: interleaved (fewest restarts, builds alternating) or random (shuffled per repeat with `seed`, recorded in the run's plan)."""
    seed: int | None = None
    """The seed of order random; None: drawn and recorded."""
    swap: Literal["hotplug", "boot"] = "hotplug"
    """How a running libvirt guest reaches a trial whose NICs differ only in their settings (model, queues, rings): hotplug (its NICs swapped in place, seconds) or boot (powered off and booted anew)."""

    @property
    def libvirt_uri(self) -> str:
        return self.uri or "qemu:///system"

    @property
    def domain_name(self) -> str:
        return f"labctl-{self.name}"
