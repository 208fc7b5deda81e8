"""A trial and a lab's NICs in a few words, written once for every face and room that says them: a stored
trial's rate in its metric's unit (the CLI's sweep progress, the TUI's Sweep screen) and the NICs as
requested and as the guest's driver negotiated them (``labctl up`` and ``status``, ``labctl apply
--verify``, the one-trial summary, the TUI's Labs screen).

Below :mod:`labctl.lab` and :mod:`labctl.analysis` (both say these lines): it reads a record or the
``nics`` dicts (:func:`labctl.lab.libvirt.negotiation.compare_nics`' shape) and imports only the metric
registry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labctl.results.metrics import lookup

if TYPE_CHECKING:
    from labctl.results.record import TrialRecord


def _in_unit(name: str, value: float, spec: str) -> str:
    metric = lookup(name)
    return f"{value:{spec}} {metric.unit if metric is not None else name}"


def trial_rate(record: "TrialRecord | None") -> str:
    """A stored trial's rate in its metric's unit: ``9.81 Mpps``; an NDR/PDR search's ``NDR 2.000 / PDR
    2.100 Mpps``; a tcp_stream's ``9.88 Gbit/s``, a tcp_rr's ``12,346 trans/s``; a failed trial's status."""
    if record is None or record.status != "ok":
        return getattr(record, "status", "failed")
    m = record.metrics
    if m.mpps is None and m.ndr_mpps is not None:
        ndr = f"NDR {m.ndr_mpps:.3f}"
        return f"{ndr} / PDR {_in_unit('pdr_mpps', m.pdr_mpps, '.3f')}" if m.pdr_mpps is not None else ndr
    if m.mpps is None and m.bandwidth_gbps is not None:  # a kernel TCP stream
        return _in_unit("bandwidth_gbps", m.bandwidth_gbps, ".2f")
    if m.mpps is None and m.transactions_per_s is not None:  # TCP request/response
        return _in_unit("transactions_per_s", m.transactions_per_s, ",.0f")
    return _in_unit("mpps", m.mpps, ".2f") if m.mpps is not None else "no rate"


def describe_nics(nics: list[dict[str, Any]]) -> list[str]:
    """Requested vs negotiated per NIC (the ``nics`` of an ``up``, of a ``status`` entry or of a trial's
    details), one line per NIC, each followed by the reasons for what the guest got differently."""
    lines = []
    for nic in nics:
        req, neg = nic["requested"], nic.get("negotiated") or {}
        lines.append(f"nic{nic['index']} {req['backend']:<9} {neg.get('ifname') or '?':<5} "
                     f"queues {req['queues']}->{neg.get('queues')}  rx {req['rx_ring']}->{neg.get('rx_ring')}  "
                     f"tx {req['tx_ring']}->{neg.get('tx_ring')}")
        lines += [f"     {reason}" for reason in nic.get("differences") or []]
    return lines


def reached(record: "TrialRecord | None") -> str:
    """How a libvirt trial reached its configuration (``details.reached``), in a few words: ``boot 22.4 s``,
    ``swap 3.1 s`` (its NICs hot-swapped in the running guest), ``boot 21.9 s (swap refused)`` when a swap
    booted instead; empty when the guest was kept as it was, for a failed trial and on the embedded lab."""
    if record is None:
        return ""
    how = (record.details or {}).get("reached") or {}
    if how.get("how") not in ("boot", "hotplug"):
        return ""
    text = f"{'swap' if how['how'] == 'hotplug' else 'boot'} {how.get('s', 0.0):.1f} s"
    return text + (" (swap refused)" if how.get("note") else "")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def _lat(d: dict[str, Any] | None) -> str:
    if d and d.get("note"):
        return str(d["note"])
    if not d or not d.get("count"):
        return "none received"
    return f"{d['p50_us']:.1f}/{d['p99_us']:.1f}/{d['max_us']:.1f} us"


def outage_line(o: dict[str, Any]) -> str:
    """One outage: ``+0.0012 s .. +0.0623 s (61.1 ms): 6000 lost, 345 refused``; from the reference (a
    reconf's change, a soak's start)."""
    parts = [f"{o['lost']} lost" if o.get("lost") else "", f"{o['refused']} refused" if o.get("refused") else ""]
    what = ", ".join(p for p in parts if p) or "nothing missing"
    marks = [m for m, on in (("to the end", o.get("tail")), ("at a host stall", o.get("host_stall"))) if on]
    return (f"{o['start_s']:+.4f} s .. {o['end_s']:+.4f} s ({_ms(o['length_s'])}): {what}"
            + (f" [{'; '.join(marks)}]" if marks else ""))


def reconf_lines(record: "TrialRecord", limit: int = 10) -> list[str]:
    """A reconf trial in words (``labctl reconf``, the TUI, ``labctl apply --dry-run``): the change, what it
    did and read back, its cost (a cost of 0 said as a valid answer), the outages, latency before and after."""
    r = record.details.get("reconf") or {}
    m = record.metrics
    if record.status != "ok" or m.lost_packets is None:
        return [f"reconf {record.status}: {record.error or 'no result'}"]
    lines = [f"change: {'; '.join(r.get('labels') or [r.get('change', '?')])} at +{r.get('change_at_s', 0):.3f} s of "
             f"the window, took {_ms(r.get('change_took_s', 0))}"]
    for label, back in (r.get("read_back") or {}).items():
        shown = ", ".join(f"{k}={v}" for k, v in back.items()) if isinstance(back, dict) else str(back)
        lines.append(f"  read back: {shown or 'nothing'}")
    w = r.get("windows") or {}
    before, after = w.get("before") or {}, w.get("after") or {}
    offered = r.get("offered_pps") or 0
    if m.lost_packets == 0:
        lines.append(f"lost to the change: 0 packets: no loss beyond the no-change window's ({before.get('lost', 0)} "
                     f"in {before.get('s', 0):.2f} s; {after.get('lost', 0)} after the change): a valid answer, the "
                     f"change cost nothing measurable at {offered / 1e6:.4f} Mpps")
    else:
        lines.append(f"lost to the change: {m.lost_packets} packets ({after.get('lost', 0)} in the {after.get('s', 0):.2f} s "
                     f"after it, net of {w.get('baseline_lost', 0):g} for the {before.get('s', 0):.2f} s without it); "
                     f"implied time lost {_ms(m.time_lost_s or 0)} at {offered / 1e6:.4f} Mpps offered")
    outages = [o for o in r.get("outages") or [] if o.get("window") in ("after", "across")]
    lines.append(f"outages from the change's start: {len(outages)}" + (":" if outages else ""))
    lines += [f"  {outage_line(o)}" for o in outages[:limit]]
    if len(outages) > limit:
        lines.append(f"  ... {len(outages) - limit} more")
    for window, words in (("before", "in the no-change window"), ("later", "past the window after the change")):
        others = [o for o in r.get("outages") or [] if o.get("window") == window]
        if others:
            lines.append(f"outages {words}: {len(others)} ({sum(o['lost'] + o['refused'] for o in others)} missing, "
                         "not charged to the change)")
    lat = r.get("latency") or {}
    lines.append(f"latency p50/p99/max: before {_lat(lat.get('before'))}; after {_lat(lat.get('after'))} "
                 f"(from {lat.get('after_from_s', 0):+.3f} s)")
    return lines


def soak_lines(record: "TrialRecord", limit: int = 10) -> list[str]:
    """A soak trial in words: its length (where it stopped), loss with its bound, the loss events (those at a
    host stall marked), the host's stalls, latency."""
    s = record.details.get("soak") or {}
    m = record.metrics
    if not s:
        return [f"soak {record.status}: {record.error or 'no result'}"]
    stopped = "" if s.get("complete") else f", stopped at {s.get('stopped_at_s', 0):.0f} s"
    lines = [f"soak of {s.get('duration_s', 0):.0f} s{stopped}: {len(s.get('series') or [])} points of "
             f"{s.get('bin_s', 1):g} s"]
    bound = m.loss_upper_bound
    bound_text = f"{bound:.3g}" if bound is not None else "none"
    lines.append(f"lost {s.get('lost', 0)} of {s.get('offered', 0)} packets: loss ratio {m.loss_ratio or 0:.3g}, "
                 f"one-sided 95% upper bound {bound_text}" + (" (zero loss in N: 3/N)" if not s.get("lost") else ""))
    events = s.get("events") or []
    lines.append(f"loss events: {s.get('events_total', len(events))} ({m.loss_events_host or 0} at a host stall)"
                 + (":" if events else ""))
    lines += [f"  {outage_line(e)}" for e in events[:limit]]
    if len(events) > limit:
        lines.append(f"  ... {len(events) - limit} more")
    lines.append(f"host: {m.host_stall_s or 0} s stalled (steal time or the lab's threads switched out)")
    if m.latency_p50_us is not None:
        lines.append(f"latency p50/p99/max: {m.latency_p50_us:.1f}/{m.latency_p99_us:.1f}/{m.latency_max_us:.1f} us")
    return lines
