"""Human-readable views of trial records."""

from __future__ import annotations

from .record import TrialRecord


def trial_summary(record: TrialRecord) -> str:
    m = record.metrics
    lines = []
    if record.status != "ok":
        lines.append(f"trial {record.status}: {record.error}")
    if m.mpps is not None:
        lines.append(f"rate:      {m.mpps:.3f} Mpps, {m.gbps:.3f} Gbit/s (offered {m.offered_mpps:.3f} Mpps, "
                     f"window {m.window_s:.1f} s)")
        if m.mpps_0to1 is not None:
            lines.append(f"per dir:   0->1 {m.mpps_0to1:.3f} Mpps, 1->0 {m.mpps_1to0:.3f} Mpps")
        if m.loss_ratio is not None:
            lines.append(f"loss:      {m.loss_ratio:.4%} (drops: " +
                         ", ".join(f"{k} {v}" for k, v in m.drops.items() if v) + ")")
        if m.queue_shares:
            lines.append("queues:    " + ", ".join(f"{k} {v:.0%}" for k, v in sorted(m.queue_shares.items())))
        if m.cpu:
            lines.append("cpu:       " + ", ".join(f"{k} {v:.0f}%" for k, v in sorted(m.cpu.items())))
        if m.cycles_per_packet:
            lines.append(f"cycles/pkt: {m.cycles_per_packet:.0f} (guest forwarding cores)")
    env = record.env
    if env.lab:
        lines.append(f"env:       {env.lab} lab, accel {env.accel}, DPDK {env.dpdk}, pins {env.pins}, "
                     f"hugepages {env.hugepages}" + (", SHARED CORES" if env.shared_cores else ""))
    for warning in record.warnings:
        lines.append(f"warning:   {warning}")
    return "\n".join(lines)
