"""The forwarding workload's measurements: two snapshots of a vswitch (generator + sink) and a guest
forwarder, both testpmd, turned into the trial's metrics.

Counters come from two places: DPDK telemetry (``/ethdev/stats``: per-port and per-queue packets and
bytes) and testpmd's forward statistics (``show fwd stats all``): for vhost and virtio ports ring-full
drops appear only there, as TX-dropped (``imissed`` and ``rx_nombuf`` stay 0 on these PMDs).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import FwdStats, Testpmd
from labctl.host.fingerprint import cpu_hz
from labctl.results.record import Metrics

MEMORY_ERRORS = re.compile(r"(?i)too many memory regions|failed to (?:mmap|map) .*region|"
                           r"vhost_user_set_mem_table.*fail|memory.*(?:error|fail)")


@dataclass
class Snapshot:
    t: float
    vswitch_fwd: dict[int, FwdStats]
    guest_fwd: dict[int, FwdStats]
    vswitch_ports: dict[int, dict[str, Any]]
    guest_ports: dict[int, dict[str, Any]]


def take_snapshot(vswitch: Testpmd, guest: Testpmd, vs_tel: Telemetry, g_tel: Telemetry) -> Snapshot:
    t = time.monotonic()
    vs_ports = vs_tel.snapshot()
    g_ports = g_tel.snapshot()
    return Snapshot(t, vswitch.fwd_stats(), guest.fwd_stats(), vs_ports, g_ports)


def _delta(after: dict[int, dict[str, Any]], before: dict[int, dict[str, Any]], key: str) -> dict[int, int]:
    return {p: int(after[p].get(key, 0)) - int(before.get(p, {}).get(key, 0)) for p in after}


#: What the two ring-full drop counters are called, by host side: the vswitch's TX-dropped (frames it
#: could not put into the guest's rx ring, or into af_packet's tx ring toward a tap) and the guest's
#: TX-dropped (frames the guest could not put into its tx ring: the host side did not drain it).
DROP_NAMES = {"vhost-user": ("guest_rx_ring_full", "vswitch_rx_ring_full"),
              "af_packet": ("host_tx_ring_full", "guest_tx_ring_full"),
              # OVS-DPDK between them: the generator's and the guest's virtio rings toward OVS
              "ovs": ("generator_tx_ring_full", "guest_tx_ring_full")}


def forward_metrics(a: Snapshot, b: Snapshot, nics: int, monitor_cpu: dict[str, float],
                    guest_cpu_s: float | None, host_side: str = "vhost-user") -> tuple[Metrics, dict[str, Any]]:
    """The forwarding trial's metrics and details from two snapshots of a testpmd host side and the
    guest's forwarder (the kernel-stack workload's are :func:`labctl.workload.tcp.tcp_metrics`)."""
    window = b.t - a.t
    vs_rx = _delta(b.vswitch_ports, a.vswitch_ports, "ipackets")
    vs_rx_bytes = _delta(b.vswitch_ports, a.vswitch_ports, "ibytes")
    vs_fwd = {p: b.vswitch_fwd[p].minus(a.vswitch_fwd.get(p, FwdStats(0, 0, 0, 0))) for p in b.vswitch_fwd}
    g_fwd = {p: b.guest_fwd[p].minus(a.guest_fwd.get(p, FwdStats(0, 0, 0, 0))) for p in b.guest_fwd}
    received = sum(vs_rx.values())
    offered = sum(s.tx_packets + s.tx_dropped for s in vs_fwd.values())
    tx_dropped = sum(s.tx_dropped for s in vs_fwd.values())
    guest_tx_dropped = sum(s.tx_dropped for s in g_fwd.values())
    nombuf = sum(_delta(b.guest_ports, a.guest_ports, "rx_nombuf").values())
    imissed = sum(_delta(b.guest_ports, a.guest_ports, "imissed").values())
    metrics = Metrics(
        mpps=received / window / 1e6,
        gbps=sum(vs_rx_bytes.values()) * 8 / window / 1e9,
        offered_mpps=offered / window / 1e6,
        loss_ratio=(1 - received / offered) if offered else None,
        rx_packets=received,
        tx_packets=sum(s.tx_packets for s in vs_fwd.values()),
        tx_dropped=tx_dropped,
        guest_tx_dropped=guest_tx_dropped,
        window_s=window,
        cpu=monitor_cpu,
    )
    into_guest, out_of_guest = DROP_NAMES[host_side]
    metrics.drops = {into_guest: tx_dropped, out_of_guest: guest_tx_dropped,
                     "guest_rx_nombuf": nombuf, "guest_imissed": imissed,
                     "unaccounted": max(offered - received - tx_dropped - guest_tx_dropped, 0)}
    if nics >= 2:
        # vswitch port 1 receives what the generator sent out of port 0 (through the guest), and back
        metrics.mpps_0to1 = vs_rx.get(1, 0) / window / 1e6
        metrics.mpps_1to0 = vs_rx.get(0, 0) / window / 1e6
        metrics.gbps_0to1 = vs_rx_bytes.get(1, 0) * 8 / window / 1e9
        metrics.gbps_1to0 = vs_rx_bytes.get(0, 0) * 8 / window / 1e9
    shares, per_queue = queue_details(a.guest_ports, b.guest_ports)
    metrics.queue_shares = shares
    forwarded = sum(s.tx_packets for s in g_fwd.values())
    hz = cpu_hz()
    if guest_cpu_s and forwarded and hz:
        metrics.cycles_per_packet = guest_cpu_s * hz / forwarded
    details = {"per_queue": per_queue,
               "vswitch_fwd": {p: s.__dict__ for p, s in vs_fwd.items()},
               "guest_fwd": {p: s.__dict__ for p, s in g_fwd.items()}}
    return metrics, details



def details_fwd(details: dict[str, Any], key: str) -> list[FwdStats]:
    return [FwdStats(**s) for s in details[key].values()]


def zero_reason(vswitch: Testpmd | None, guest: Testpmd | None, logs: str) -> str:
    for proc in (p for p in (vswitch, guest) if p is not None):
        for line in proc.output().splitlines():
            if MEMORY_ERRORS.search(line):
                return f"vhost-user memory-table error in the {proc.role}: {line.strip()}"
    return f"no packets reached the guest (vhost-user rings not serviced; see the logs in {logs})"


@dataclass
class GuestCounters:
    """The guest forwarder's side of a snapshot: testpmd's forward stats and its ports' counters."""

    t: float
    fwd: dict[int, FwdStats]
    ports: dict[int, dict[str, Any]]


def queue_details(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]
                  ) -> tuple[dict[str, float], dict[str, Any]]:
    """Per guest port and queue: the share of the port's receive each queue took, and the raw deltas."""
    shares: dict[str, float] = {}
    per_queue: dict[str, Any] = {}
    for port, now in after.items():
        was = before.get(port, {})
        q_after, q_before = now.get("q_ipackets", []), was.get("q_ipackets", [])
        deltas = [x - (q_before[i] if i < len(q_before) else 0) for i, x in enumerate(q_after)]
        o_after, o_before = now.get("q_opackets", []), was.get("q_opackets", [])
        total = int(now.get("ipackets", 0)) - int(was.get("ipackets", 0))
        per_queue[f"guest.port{port}"] = {"rx": total, "q_ipackets": deltas[:16],
                                          "q_opackets": [x - (o_before[i] if i < len(o_before) else 0)
                                                         for i, x in enumerate(o_after)][:16]}
        for q, d in enumerate(deltas):
            if total > 0 and d > 0:
                shares[f"guest.port{port}.rxq{q}"] = d / total
    return shares, per_queue
