"""Requested vs negotiated virtio-net settings, per NIC, with the reason for every difference (said in
words by :func:`labctl.results.lines.describe_nics`)."""

from __future__ import annotations

from typing import Any

from labctl import platform
from labctl.lab.plan import LabPlan, NicPlan


def explain(nic: NicPlan, vcpus: int, got: dict[str, Any] | None) -> list[str]:
    """Why what the guest reports differs from what the profile asked for (empty when it matches)."""
    if got is None:
        return ["the guest reported no interface with this NIC's MAC (driver not bound or device missing)"]
    reasons = []
    combined, max_combined = got.get("combined"), got.get("max_combined")
    if combined is not None and combined != nic.queues:
        if max_combined is not None and max_combined < nic.queues:
            reasons.append(f"queues: the device offers {max_combined} queue pairs, fewer than the {nic.queues} "
                           "asked for (backend limit)")
        elif combined == min(nic.queues, vcpus) and vcpus < nic.queues:
            reasons.append(f"queues: {nic.queues} queues on {vcpus} vCPUs: the guest's kernel driver enabled "
                           f"{combined} (min(queues, vcpus)); {max_combined} are available")
        else:
            reasons.append(f"queues: the guest runs {combined} of {max_combined} queue pairs")
    for key, want in (("rx_ring", nic.rx_ring), ("tx_ring", nic.tx_ring)):
        have = got.get(key)
        if have is None or have == want:
            continue
        cap = platform.tx_ring_cap(nic.backend)
        if key == "tx_ring" and cap is not None and have == cap:
            reasons.append(f"tx_ring: QEMU caps tx_queue_size at {cap} for the {nic.backend} backend "
                           f"(asked {want}; only vhost-user gets more)")
        elif have < want:
            reasons.append(f"{key}: the host gave a {have}-entry ring, smaller than the {want} asked for")
        else:
            reasons.append(f"{key}: the guest uses {have} entries, not the {want} asked for")
    return reasons


def compare_nics(plan: LabPlan, reported: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per NIC of the plan: what was requested, what the guest's driver negotiated, and why they differ."""
    by_mac = {str(n.get("mac", "")).lower(): n for n in reported}
    result = []
    for nic in plan.nics:
        got = by_mac.get(nic.mac)
        negotiated = None if got is None else {
            "ifname": got.get("ifname"), "driver": got.get("driver"), "queues": got.get("combined"), "max_queues": got.get("max_combined"),
            "rx_ring": got.get("rx_ring"), "tx_ring": got.get("tx_ring"),
            "rx_ring_max": got.get("rx_ring_max"), "tx_ring_max": got.get("tx_ring_max")}
        result.append({"index": nic.index, "mac": nic.mac, "requested": nic.requested(), "negotiated": negotiated,
                       "differences": explain(nic, plan.vcpus, got)})
    return result


def parse_ethtool(text: str) -> dict[str, dict[str, int | None]]:
    """``ethtool -g`` or ``-l`` output -> {"max": {...}, "current": {...}} with lower-case keys
    (rx, tx, combined, ...); "n/a" is None."""
    sections: dict[str, dict[str, int | None]] = {"max": {}, "current": {}}
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.lower().startswith("pre-set maximums"):
            section = "max"
        elif stripped.lower().startswith("current hardware settings"):
            section = "current"
        elif section and ":" in stripped:
            key, _, value = stripped.partition(":")
            value = value.strip()
            sections[section][key.strip().lower()] = int(value) if value.isdigit() else None
    return sections
