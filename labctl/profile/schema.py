"""The lab profile schema (the user's contract), declared once with pydantic v2.

Types and structure live here; every value constraint lives in ``labctl.profile.rules``.
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
    model_config = ConfigDict(extra="forbid", strict=True, frozen=False)


class Nic(Model):
    backend: Literal["vhostuser", "tap", "network"] = "vhostuser"
    model: Literal["virtio", "e1000", "e1000e"] = "virtio"  # the NIC QEMU emulates (libvirt guests)
    queues: int = 1
    rx_queue_size: int = 256
    tx_queue_size: int = 256


def _vcpu_keys(value: Any) -> Any:
    """vCPU indexes come back from JSON (the result store) as strings: "0" -> 0."""
    if isinstance(value, dict):
        return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in value.items()}
    return value


class Pinning(Model):
    vcpus: Annotated[dict[int, CpuSet], BeforeValidator(_vcpu_keys)] = Field(default_factory=dict)
    emulator: CpuSet | None = None
    vhost: CpuSet | None = None


class GuestBoot(Model):
    """Direct kernel boot of a user's image (libvirt ``<os><kernel/><initrd/><cmdline/>``): host paths."""

    kernel: str
    initrd: str | None = None
    cmdline: str = ""


class Guest(Model):
    #: a user's disk image (qcow2 or raw) booted through a copy-on-write overlay labctl makes; None: the appliance
    image: str | None = None
    boot: GuestBoot | None = None  # direct kernel boot of the image; None: the image's own boot loader
    access: Literal["agent"] = "agent"  # how labctl reaches an image guest: the QEMU guest agent (ssh: later)
    agent_timeout_s: float = 180.0  # the bound on the guest agent's first answer after the domain starts
    vcpus: int = 2
    memory_mib: int = 1024
    hugepages: bool = False
    nics: list[Nic] = Field(default_factory=lambda: [Nic(), Nic()])
    pinning: Pinning = Field(default_factory=Pinning)


class Noisy(Model):
    """testpmd's noisy-neighbour simulation (forward mode ``noisy``)."""

    tx_sw_bufsz: int = 0
    tx_sw_buf_flushtime: int = 0
    lkup_memory_mib: int = 0
    lkup_num_reads: int = 0
    lkup_num_writes: int = 0
    lkup_num_reads_writes: int = 0


class Workload(Model):
    #: forward: the plan's DPDK forwarder in the guest (testpmd) with a host-side generator; tcp_stream /
    #: tcp_rr: the guest's kernel virtio-net driver under TCP streams (iperf3) or request/response
    #: transactions (sockperf ping-pong), one client/server pair per session (labctl.workload.tcp).
    kind: Literal["forward", "tcp_stream", "tcp_rr"] = "forward"
    #: the guest's forwarder: labctl's appliance, the image's own dpdk-testpmd, or the user's command template
    forwarder: Literal["appliance", "testpmd", "command"] = "appliance"
    command: str | None = None  # forwarder command: argv template with {pci0} {pci1} {cores} {rxd} {txd} {burst} {queues}
    sessions: int = 1  # tcp kinds: parallel sessions, one client/server pair each
    direction: Literal["guest_to_host", "host_to_guest"] = "guest_to_host"  # tcp kinds: where clients send from
    guest_queues: int | None = None  # tcp kinds: `ethtool -L combined N` in the guest (None: what the driver enabled)
    mode: Literal["io", "mac", "noisy"] = "io"
    burst: int = 32
    packet_size: int = 64
    generator: Literal["labgen", "flowgen"] = "labgen"  # labgen paces; testpmd flowgen sends flat out
    rate: str = "max"  # offered load, all ports together: max | 2.5Mpps | 500kpps | 40% (of the measured max)
    #: labgen's schedule after a pause of its own CPU longer than 100 us: shift (the rest of the schedule moves
    #: later by the pause) or absolute (the frames due in the pause go out back to back as it ends)
    pacing: Literal["shift", "absolute"] = "shift"
    rxd: int = 1024
    txd: int = 1024
    duration_s: float = 10.0
    warmup_s: float = 2.0
    noisy: Noisy = Field(default_factory=Noisy)


class Vswitch(Model):
    """The host-side switch between the generator and the guest(s): a testpmd with net_vhost ports
    (``testpmd``), or labctl's own Open vSwitch with DPDK (``ovs-dpdk``) and its knobs."""

    kind: Literal["testpmd", "ovs-dpdk"] = "testpmd"
    tx_flush_interval: int | None = None  # other_config:tx-flush-interval, microseconds
    emc_insert_inv_prob: int | None = None  # other_config:emc-insert-inv-prob (0 disables the EMC)
    smc: bool | None = None  # other_config:smc-enable
    rxq_assign: Literal["cycles", "group", "roundrobin"] | None = None  # other_config:pmd-rxq-assign
    rxq_affinity: dict[int, dict[int, int]] = Field(default_factory=dict)  # NIC -> {rx queue: PMD CPU}
    socket_mem_mib: int = 256  # other_config:dpdk-socket-mem (and -limit), MiB of 2 MiB pages


class Build(Model):
    """One build of the lab's programs (``builds:``): a path per role it replaces, and the environment of
    those processes. A role it leaves out runs the host's binary (found on PATH, or libvirt's emulator).
    Or a git revision built by a recipe (``recipe`` + ``rev``): its output replaces the recipe's role."""

    qemu: str | None = None  # the emulator libvirt starts (the domain's <emulator>)
    vswitch: str | None = None  # ovs-vswitchd (vswitch.kind ovs-dpdk) or the host-side testpmd (testpmd)
    forwarder: str | None = None  # the guest's testpmd: the embedded lab's process, or the appliance's binary
    #: environment of this build's processes (LD_LIBRARY_PATH of a build tree, a DPDK plugin directory)
    env: dict[str, str] = Field(default_factory=dict)
    recipe: str | None = None  # a key of ``recipes``: this build is that recipe's output at ``rev``
    rev: str | None = None  # a git revision of the recipe's repository (commit, tag, branch)


class Recipe(Model):
    """How a binary is built from a git revision (``recipes:``; labctl.lab.recipes): ``argv`` runs in a
    clean checkout of the revision (its working directory), never through a shell; ``output`` (a path
    in that checkout) is the binary that replaces ``role``."""

    repo: str  # the git repository (a directory with .git, or a bare one), an absolute path
    argv: list[str]  # the build command: a program (absolute, ./relative to the checkout, or on PATH) and arguments
    output: str  # the built binary, relative to the checkout (build/app/dpdk-testpmd)
    role: Literal["forwarder", "vswitch", "qemu"]
    env: dict[str, str] = Field(default_factory=dict)  # the build's own variables (CFLAGS, ...): part of its cache key
    timeout_s: float = 3600.0  # one build's longest run


#: The roles a build may give a binary for.
BUILD_ROLES = ("qemu", "vswitch", "forwarder")


class Profile(Model):
    name: str
    backend: Literal["libvirt", "embedded"] = "libvirt"
    uri: str | None = None
    topology: Literal["pvp", "vm2vm"] = "pvp"  # generator -> guest -> sink, or guest A -> guest B
    vswitch: Vswitch = Field(default_factory=Vswitch)
    guest: Guest = Field(default_factory=Guest)
    workload: Workload = Field(default_factory=Workload)
    builds: dict[str, Build] = Field(default_factory=dict)  # name -> build; the knob ``build`` picks one
    recipes: dict[str, Recipe] = Field(default_factory=dict)  # name -> how builds from git revisions are made
    build: str | None = None  # a key of ``builds`` (None: the host's binaries)
    sweep: dict[str, list[Scalar]] = Field(default_factory=dict)
    repeat: int = 1
    #: the order of a sweep's trials within each repeat: interleaved (fewest restarts, builds alternating)
    #: or random (shuffled per repeat with ``seed``, recorded in the run's plan)
    order: Literal["interleaved", "random"] = "interleaved"
    seed: int | None = None

    @property
    def libvirt_uri(self) -> str:
        return self.uri or "qemu:///system"

    @property
    def domain_name(self) -> str:
        return f"labctl-{self.name}"
