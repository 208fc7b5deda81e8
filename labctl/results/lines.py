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
