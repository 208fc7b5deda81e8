"""Requested vs negotiated virtio-net settings, per NIC, with the reason for every difference."""

from __future__ import annotations

import hashlib
from typing import Any

from labctl import platform
from labctl.profile.schema import Nic, Profile


def nic_mac(profile: Profile, index: int) -> str:
    """A stable, locally administered MAC per profile and NIC, so guest interfaces map back to NICs."""
    digest = hashlib.sha1(profile.name.encode()).digest()
    return "52:54:{:02x}:{:02x}:{:02x}:{:02x}".format(digest[0], digest[1], digest[2], index)


def requested(nic: Nic) -> dict[str, Any]:
    return {"backend": nic.backend, "queues": nic.queues, "rx_ring": nic.rx_queue_size, "tx_ring": nic.tx_queue_size}


def explain(nic: Nic, vcpus: int, got: dict[str, Any] | None) -> list[str]:
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
    for field, key in (("rx_queue_size", "rx_ring"), ("tx_queue_size", "tx_ring")):
        want, have = getattr(nic, field), got.get(key)
        if have is None or have == want:
            continue
        cap = platform.tx_ring_cap(nic.backend)
        if field == "tx_queue_size" and cap is not None and have == cap:
            reasons.append(f"tx_ring: QEMU caps tx_queue_size at {cap} for the {nic.backend} backend "
                           f"(asked {want}; only vhost-user gets more)")
        elif have < want:
            reasons.append(f"{key}: the host gave a {have}-entry ring, smaller than the {want} asked for")
        else:
            reasons.append(f"{key}: the guest uses {have} entries, not the {want} asked for")
    return reasons


def compare_nics(profile: Profile, reported: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_mac = {str(n.get("mac", "")).lower(): n for n in reported}
    result = []
    for index, nic in enumerate(profile.guest.nics):
        mac = nic_mac(profile, index)
        got = by_mac.get(mac)
        negotiated = None if got is None else {
            "ifname": got.get("ifname"), "queues": got.get("combined"), "max_queues": got.get("max_combined"),
            "rx_ring": got.get("rx_ring"), "tx_ring": got.get("tx_ring"),
            "rx_ring_max": got.get("rx_ring_max"), "tx_ring_max": got.get("tx_ring_max")}
        result.append({"index": index, "mac": mac, "requested": requested(nic), "negotiated": negotiated,
                       "differences": explain(nic, profile.guest.vcpus, got)})
    return result
