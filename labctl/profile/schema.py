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


class Guest(Model):
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
    sessions: int = 1  # tcp kinds: parallel sessions, one client/server pair each
    direction: Literal["guest_to_host", "host_to_guest"] = "guest_to_host"  # tcp kinds: where clients send from
    guest_queues: int | None = None  # tcp kinds: `ethtool -L combined N` in the guest (None: what the driver enabled)
    mode: Literal["io", "mac", "noisy"] = "io"
    burst: int = 32
    packet_size: int = 64
    rxd: int = 1024
    txd: int = 1024
    duration_s: float = 10.0
    warmup_s: float = 2.0
    noisy: Noisy = Field(default_factory=Noisy)


class Profile(Model):
    name: str
    backend: Literal["libvirt", "embedded"] = "libvirt"
    uri: str | None = None
    guest: Guest = Field(default_factory=Guest)
    workload: Workload = Field(default_factory=Workload)
    sweep: dict[str, list[Scalar]] = Field(default_factory=dict)
    repeat: int = 1

    @property
    def libvirt_uri(self) -> str:
        return self.uri or "qemu:///system"

    @property
    def domain_name(self) -> str:
        return f"labctl-{self.name}"
