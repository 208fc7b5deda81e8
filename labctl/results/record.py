"""The trial record: what one measurement was (config), where it ran (environment) and what it
measured (metrics). Declared once; the store, import/export, reports and the advisor all use it."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

Scalar = Union[bool, int, float, str, None]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Environment(_Model):
    """Where a trial ran. Imported trials may leave any field unknown (None)."""

    host: str | None = None
    cpu_model: str | None = None
    cores: int | None = None
    kernel: str | None = None
    qemu: str | None = None
    libvirt: str | None = None
    dpdk: str | None = None
    accel: Literal["kvm", "tcg", "none"] | None = None  # none: the embedded lab has no VM
    lab: Literal["embedded", "libvirt"] | None = None
    pins: dict[str, Any] = Field(default_factory=dict)  # role -> cpuset applied (read back)
    shared_cores: bool | None = None  # two busy pollers shared a CPU, or the host is oversubscribed
    hugepages: bool | None = None


class Metrics(_Model):
    """Measured over the measurement window (after warm-up). Rates in Mpps, Gbit/s of L2 bytes."""

    mpps: float | None = None  # total forwarded packets that reached the sink, per second
    gbps: float | None = None
    mpps_0to1: float | None = None  # generator port 0 -> guest -> sink port 1
    mpps_1to0: float | None = None
    gbps_0to1: float | None = None
    gbps_1to0: float | None = None
    offered_mpps: float | None = None  # what the generator tried to send (sent + dropped at tx)
    loss_ratio: float | None = None  # 1 - received / offered
    rx_packets: int | None = None
    tx_packets: int | None = None
    tx_dropped: int | None = None  # generator -> guest ring full (testpmd TX-dropped on the vswitch)
    guest_tx_dropped: int | None = None  # guest -> vswitch ring full (TX-dropped in the guest)
    drops: dict[str, int] = Field(default_factory=dict)  # cause -> packets
    queue_shares: dict[str, float] = Field(default_factory=dict)  # "guest.port0.rxq1" -> share of port rx
    cpu: dict[str, float] = Field(default_factory=dict)  # thread role -> % of one core
    cycles_per_packet: float | None = None
    window_s: float | None = None


TrialStatus = Literal["ok", "failed", "aborted"]


class TrialRecord(_Model):
    id: int | None = None
    run_id: int | None = None
    config: dict[str, Scalar]  # every knob (flattened dotted paths), defaults included
    env: Environment = Field(default_factory=Environment)
    metrics: Metrics = Field(default_factory=Metrics)
    status: TrialStatus = "ok"
    error: str | None = None
    warnings: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)  # per-queue counters, thread samples
    repeat_index: int = 0
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def config_key(self) -> str:
        return config_key(self.config)


def config_key(config: dict[str, Any]) -> str:
    """A stable identity for a configuration (same knobs and values -> same key)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
