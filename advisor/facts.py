"""Per-trial facts the advisor reads off one recorded trial: its loss ratio and the shares of its drop
causes, its pinning layout in words, whether its pollers ran on separate CPUs, and the NICs whose
recorded tx ring their backend cannot give (QEMU caps tap and network at 256)."""

from __future__ import annotations

import math
from typing import Any

from labctl.host.cpuset import format_cpuset, parse_cpuset
# TX_RING_CAP: QEMU caps tx_queue_size at this unless the backend is vhost-user (labctl.platform, rule
# "tx-ring-backend").
from labctl.platform import TX_RING_CAP
from labctl.results.record import TrialRecord

from advisor.knobs import _nic_key

__all__ = [
    "trial_loss",
    "pinning_layout",
    "tx_ring_violation",
]

_DROP_CAUSES = {
    "guest_rx_ring_full": "ring-full drops into the guest (its rx ring, generator -> guest)",
    "vswitch_rx_ring_full": "ring-full drops out of the guest (the vswitch rx ring, guest -> vswitch)",
    "host_tx_ring_full": "drops toward the guest's tap (the host side's af_packet tx ring was full)",
    "guest_tx_ring_full": "ring-full drops out of the guest (its tx ring: the host side did not drain it)",
    "generator_tx_ring_full": "drops toward the vswitch (the generator's ring to OVS was full: OVS did not drain it)",
    "guest_a_tx_ring_full": "drops out of guest A (its tx ring: the vswitch did not drain it)",
    "guest_b_rx_ring_full": "ring-full drops into guest B (its rx ring)",
    "guest_rx_nombuf": "mbuf-pool exhaustion drops in the guest",
    "guest_imissed": "guest rx misses",
    "unaccounted": "unaccounted losses",
}


# --------------------------------------------------------------------------------------------------
# per-trial facts


def trial_loss(record: TrialRecord) -> float | None:
    """The loss ratio of a trial (lost / offered): ``metrics.loss_ratio``, else the drop counters."""
    m = record.metrics
    if m.loss_ratio is not None and math.isfinite(m.loss_ratio):
        return min(max(float(m.loss_ratio), 0.0), 1.0)
    offered = (m.tx_packets or 0) + (m.tx_dropped or 0)
    if offered > 0 and (m.tx_dropped is not None or m.guest_tx_dropped is not None):
        return min(((m.tx_dropped or 0) + (m.guest_tx_dropped or 0)) / offered, 1.0)
    return None


def _drop_shares(record: TrialRecord) -> dict[str, float]:
    m = record.metrics
    offered = (m.tx_packets or 0) + (m.tx_dropped or 0)
    if offered <= 0 and m.offered_mpps and m.window_s:
        offered = m.offered_mpps * 1e6 * m.window_s
    if offered <= 0:
        return {}
    return {cause: count / offered for cause, count in m.drops.items() if count is not None}


def _cpus(text: Any) -> frozenset[int]:
    if not isinstance(text, str) and not (isinstance(text, int) and not isinstance(text, bool)):
        return frozenset()
    try:
        return parse_cpuset(str(text))
    except ValueError:
        return frozenset()


def pinning_layout(config: dict[str, Any]) -> str:
    """A pinning layout in words: ``split pinning (vswitch PMD on 0, vCPUs on 1)``, ``shared pinning
    (vswitch PMD and vCPUs on 1)``, ``unpinned``."""
    pmd = _cpus(config.get("guest.pinning.vhost"))
    vcpus: frozenset[int] = frozenset()
    for key, value in config.items():
        if key.startswith("guest.pinning.vcpus."):
            vcpus |= _cpus(value)
    if not pmd and not vcpus:
        return "unpinned"
    if pmd and vcpus:
        both = pmd & vcpus
        if both:
            return f"shared pinning (vswitch PMD and vCPUs on {format_cpuset(both)})"
        return f"split pinning (vswitch PMD on {format_cpuset(pmd)}, vCPUs on {format_cpuset(vcpus)})"
    if pmd:
        return f"vswitch PMD on {format_cpuset(pmd)}, vCPUs unpinned"
    return f"vCPUs on {format_cpuset(vcpus)}, vswitch PMD unpinned"


def tx_ring_violation(config: dict[str, Any]) -> list[tuple[int, int, str]]:
    """NICs of a flattened config whose tx_queue_size exceeds 256 on a backend other than vhost-user:
    ``[(nic index, tx_queue_size, backend)]`` (labctl.profile.rules "tx-ring-backend")."""
    out = []
    for key, value in config.items():
        nic = _nic_key(key)
        if nic is None or nic[1] != "tx_queue_size" or not isinstance(value, int) or value <= TX_RING_CAP:
            continue
        backend = config.get(f"guest.nics.{nic[0]}.backend", "vhostuser")
        if backend != "vhostuser":
            out.append((nic[0], value, str(backend)))
    return out


def _pollers_apart(env: Any) -> bool:
    """The trial's pins, as read back from its threads, put the vswitch PMDs and the guest's forwarding
    cores on disjoint CPUs, and the monitor saw no two pollers share one."""
    pins = dict(getattr(env, "pins", None) or {})
    if getattr(env, "shared_cores", False) or not pins:
        return False
    try:
        host = {c for k, v in pins.items() if k.startswith("vswitch.") for c in parse_cpuset(str(v))}
        guest = {c for k, v in pins.items() if k.startswith("guest.") for c in parse_cpuset(str(v))}
    except ValueError:  # pins from another version or an import: no claim
        return False
    return bool(host) and bool(guest) and not host & guest
