"""The trial record: what one measurement was (config), where it ran (environment) and what it
measured (metrics). Declared once; the store, import/export, reports and the advisor all use it."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from labctl.results.metrics import lower_is_better  # noqa: F401  (the direction rule, read from the registry)

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
    #: the virtio-net backend of the guest's NICs: vhost-user, vhost-net (the kernel's vhost worker) or
    #: userspace (QEMU's own, where the host has no /dev/vhost-net); None where unknown or no guest
    virtio_backend: Literal["vhost-user", "vhost-net", "userspace"] | None = None
    #: every program the lab ran, by role (forwarder, vswitch, qemu): {path (symlinks resolved), sha256,
    #: version, build (the label of ``builds``, None: the host's)}
    binaries: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: a user's image guest (guest.image): path, format, virtual_size, identity (size + sha256 of its first MiB),
    #: and the guest's kernel and DPDK versions as read in the guest; empty for the appliance and embedded labs
    image: dict[str, Any] = Field(default_factory=dict)


class Metrics(_Model):
    """Measured over the measurement window (after warm-up). Rates in Mpps, Gbit/s of L2 bytes."""

    mpps: float | None = None  # total forwarded packets that reached the sink, per second
    gbps: float | None = None
    mpps_0to1: float | None = None  # generator port 0 -> guest -> sink port 1
    mpps_1to0: float | None = None
    gbps_0to1: float | None = None
    gbps_1to0: float | None = None
    offered_mpps: float | None = None  # the load asked of the generator (flowgen: what it handed the driver)
    achieved_mpps: float | None = None  # what the generator handed the driver per second (labgen)
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
    vswitch_cycles_per_packet: float | None = None  # OVS-DPDK: PMD processing cycles per packet received
    vswitch_idle_share: float | None = None  # OVS-DPDK: idle / (idle + processing) PMD cycles
    # labgen: sequence numbers and timestamps in every frame
    lost: int | None = None  # sent and never received
    reordered: int | None = None
    duplicate: int | None = None
    latency_min_us: float | None = None
    latency_mean_us: float | None = None
    latency_p50_us: float | None = None
    latency_p90_us: float | None = None
    latency_p99_us: float | None = None
    latency_p999_us: float | None = None
    latency_max_us: float | None = None
    valid: bool | None = None  # False: the generator fell behind its schedule (never counted as loss)
    # a search for the highest rate at a loss goal (labctl ndr, sweep/tune --metric ndr|pdr): all ports
    ndr_mpps: float | None = None  # no loss
    ndr_lower_mpps: float | None = None
    ndr_upper_mpps: float | None = None
    pdr_mpps: float | None = None  # at most 0.5% loss
    pdr_lower_mpps: float | None = None
    pdr_upper_mpps: float | None = None

    # a reconfiguration trial (labctl reconf): what one live change cost, at a paced load
    lost_packets: int | None = None  # lost to the change, net of an equally long window of the trial without it
    time_lost_s: float | None = None  # lost_packets / offered rate (CSIT's "implied time lost")
    outage_count: int | None = None  # outages in the window after the change
    longest_outage_s: float | None = None  # the longest of them
    latency_before_p99_us: float | None = None  # in the window without the change
    latency_after_p99_us: float | None = None  # after the change's last outage to the window's end
    # a soak trial (labctl soak): one long trial, second by second
    loss_upper_bound: float | None = None  # one-sided 95% upper bound of the loss ratio (zero in N: 3/N)
    loss_events: int | None = None  # outages (runs of missing frames) in the soak
    loss_events_host: int | None = None  # of them, at a host stall (steal time, the lab threads switched out)
    host_stall_s: int | None = None  # seconds of the soak the host stalled

    # --- tcp kinds (labctl.workload.tcp): the guest's kernel virtio-net driver under TCP sessions
    bandwidth_gbps: float | None = None  # tcp_stream: TCP payload received, Gbit/s, summed over sessions
    transactions_per_s: float | None = None  # tcp_rr: request/response round trips per second, all sessions
    rr_latency_us: float | None = None  # tcp_rr: sockperf's mean one-way latency (half a round trip), sessions' median
    retransmits: int | None = None  # tcp_stream: the senders' TCP retransmits; tcp_rr: the guest's RetransSegs
    host_cpu_cores: float | None = None  # host CPU busy in the window, in cores (system-wide /proc/stat)
    guest_cpu_cores: float | None = None  # guest CPU busy in the window, in vCPUs (the guest's /proc/stat)
    # netperf's service demand: microseconds of CPU per KB (1024 bytes) received, or per transaction
    service_demand_host_us_per_kb: float | None = None
    service_demand_guest_us_per_kb: float | None = None
    service_demand_host_us_per_tx: float | None = None
    service_demand_guest_us_per_tx: float | None = None
    guest_queues_enabled: int | None = None  # combined channels the guest's driver reports (ethtool -l)
    sessions_ok: int | None = None  # sessions whose client reported a result


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


#: The roles of the single measurements an NDR/PDR search stores (``details.role``, set by
#: :mod:`labctl.measure.ndr`): each is one trial at one offered load the search picked; the search's own
#: record (role ``ndr``) stands for them, so reports and comparisons never pool them into a median.
#: ``calibration`` trials found the highest load the generator can pace before the search began; ``warmup`` is
#: MLRsearch's first trial, at the maximum load, whose result it discards.
SEARCH_ROLES = ("calibration", "warmup", "search", "latency")


def plan_entry(record: TrialRecord | None) -> bool:
    """Whether a stored trial stands for an entry of the run's plan: not one of an NDR/PDR search's single
    measurements (:data:`SEARCH_ROLES`), which a sweep by ``--metric ndr`` stores by the hundred for each
    planned search (a progress bar counts plan entries; None, a trial that left no record, is one)."""
    return record is None or (record.details or {}).get("role") not in SEARCH_ROLES


def judged_trials(records) -> list[TrialRecord]:
    """``records`` without the single measurements of NDR/PDR searches (:data:`SEARCH_ROLES`)."""
    return [r for r in records if plan_entry(r)]
