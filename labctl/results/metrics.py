"""The metric registry: every metric a trial record can hold, declared once.

Each :class:`Metric` names a field of :class:`labctl.results.record.Metrics` (or, for the dict fields
``drops``, ``cpu`` and ``queue_shares``, the family of their flattened keys, ``drops.ring_full``), its
unit, its direction (which way is better), a label, the short name tables print, its aliases, its kind
and, for the kernel-stack rates, the service demands that go with them. Records, reports, pivots,
comparisons, trends, the api, the advisor and the TUI read it; ``tests/unit/results/test_metrics.py``
walks every ``Metrics`` field and fails on one without an entry here.

Directions: a rate, a bandwidth or a transaction rate is better higher; loss, drops, lost, reordered and
duplicate frames, retransmits, latency and CPU spent (cycles per packet, cores busy, netperf's service
demand) are better lower. ``window_s`` (a setting of the trial) and ``queue_shares`` (how the load
spread over queues) have no better side and are never compared.

The shared defaults live here too, below every reader: the search precision (:data:`DEFAULT_PRECISION`:
the NDR/PDR search, the api and ``labctl ndr --help``) and the comparison threshold
(:data:`DEFAULT_THRESHOLD_PCT`: :mod:`labctl.analysis.compare`, the api and ``labctl compare --help``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from labctl.errors import UserError

if TYPE_CHECKING:
    from labctl.results.record import TrialRecord

Direction = Literal["higher", "lower", "none"]
#: What a metric measures: ``rate`` (a forwarding rate at the trial's load), ``search`` (a rate an
#: NDR/PDR search found), ``loss`` (packets lost or dropped), ``latency``, ``cpu`` (CPU spent),
#: ``count`` (packets counted), ``tcp`` (the kernel-stack kinds' rates, service demands and counters),
#: ``validity`` (the generator kept its schedule), ``setting`` (how the trial was run, not an outcome),
#: ``reconf`` (what a live change cost: ``labctl reconf``), ``soak`` (one long trial: ``labctl soak``).
Kind = Literal["rate", "search", "loss", "latency", "cpu", "count", "tcp", "validity", "setting", "reconf", "soak"]

#: The relative width at which an NDR/PDR search finds a rate: MLRsearch's ``relative_width`` goal
#: (FD.io CSIT, "MLRsearch" specification, draft-ietf-bmwg-mlrsearch: 0.005 is CSIT's value).
DEFAULT_PRECISION = 0.005

#: The smallest change ``labctl compare`` (and a trend) calls a regression or progression, in per cent of
#: the baseline median, with its whole interval beyond it (:mod:`labctl.analysis.compare`).
DEFAULT_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    label: str
    kind: Kind
    short: str = ""  # a table's column name; the name itself when empty
    aliases: tuple[str, ...] = ()
    demands: tuple[str, ...] = ()  # tcp rates: their service demands (netperf's, lower is better)
    headline: bool = False  # the rate a run of this kind measured (what reports, trends and advice default to)
    family: bool = False  # a dict field: ``name.<key>`` are its metrics

    @property
    def lower_is_better(self) -> bool:
        return self.direction == "lower"

    @property
    def compared(self) -> bool:
        """False for a metric with no better side (a setting, a distribution): never judged."""
        return self.direction != "none"

    @property
    def column(self) -> str:
        return self.short or self.name


def _m(name: str, unit: str, direction: Direction, label: str, kind: Kind, **kw) -> Metric:
    return Metric(name, unit, direction, label, kind, **kw)


_DECLARED = (
    # --- forwarding
    _m("mpps", "Mpps", "higher", "packets forwarded to the sink per second, all ports", "rate", short="Mpps",
       headline=True),
    _m("gbps", "Gbit/s", "higher", "L2 bytes forwarded to the sink, all ports", "rate"),
    _m("mpps_0to1", "Mpps", "higher", "generator port 0 -> guest -> sink port 1", "rate"),
    _m("mpps_1to0", "Mpps", "higher", "generator port 1 -> guest -> sink port 0", "rate"),
    _m("gbps_0to1", "Gbit/s", "higher", "L2 bytes, port 0 -> port 1", "rate"),
    _m("gbps_1to0", "Gbit/s", "higher", "L2 bytes, port 1 -> port 0", "rate"),
    _m("offered_mpps", "Mpps", "higher", "the load asked of the generator", "rate"),
    _m("achieved_mpps", "Mpps", "higher", "what the generator handed the driver per second", "rate"),
    _m("loss_ratio", "ratio", "lower", "1 - received / offered", "loss"),
    _m("rx_packets", "packets", "higher", "packets received by the sink in the window", "count"),
    _m("tx_packets", "packets", "higher", "packets sent by the generator in the window", "count"),
    _m("tx_dropped", "packets", "lower", "generator -> guest ring full", "loss"),
    _m("guest_tx_dropped", "packets", "lower", "guest -> vswitch ring full", "loss"),
    _m("drops", "packets", "lower", "packets dropped, by cause", "loss", family=True),
    _m("queue_shares", "share", "none", "a queue's share of its port's received packets", "count", family=True),
    _m("cpu", "% of a core", "lower", "CPU per thread role", "cpu", family=True),
    _m("cycles_per_packet", "cycles", "lower", "forwarder cycles per packet", "cpu"),
    _m("window_s", "s", "none", "the measurement window's length", "setting"),
    _m("vswitch_cycles_per_packet", "cycles", "lower", "OVS-DPDK PMD processing cycles per packet received", "cpu"),
    _m("vswitch_idle_share", "share", "higher", "OVS-DPDK idle / (idle + processing) PMD cycles", "cpu"),
    # --- labgen: sequence numbers and timestamps in every frame
    _m("lost", "packets", "lower", "sent and never received", "loss"),
    _m("reordered", "packets", "lower", "received out of order", "loss"),
    _m("duplicate", "packets", "lower", "received more than once", "loss"),
    *(_m(f"latency_{p}_us", "us", "lower", f"one-way latency, {p}", "latency",
         short=f"{p} us" if p.startswith("p") else "")
      for p in ("min", "mean", "p50", "p90", "p99", "p999", "max")),
    _m("valid", "bool", "higher", "the generator kept its schedule (False: it measured itself)", "validity"),
    # --- an NDR/PDR search (all ports)
    _m("ndr_mpps", "Mpps", "higher", "highest rate with no loss", "search", short="NDR Mpps", aliases=("ndr",),
       headline=True),
    _m("ndr_lower_mpps", "Mpps", "higher", "NDR interval, lower bound", "search"),
    _m("ndr_upper_mpps", "Mpps", "higher", "NDR interval, upper bound", "search"),
    _m("pdr_mpps", "Mpps", "higher", "highest rate at most 0.5% loss", "search", short="PDR Mpps",
       aliases=("pdr",)),
    _m("pdr_lower_mpps", "Mpps", "higher", "PDR interval, lower bound", "search"),
    _m("pdr_upper_mpps", "Mpps", "higher", "PDR interval, upper bound", "search"),
    # --- a reconfiguration trial: one live change at a paced load (CSIT's reconfiguration tests)
    _m("lost_packets", "packets", "lower", "lost to the change, net of an equally long window without it", "reconf",
       short="lost"),
    _m("time_lost_s", "s", "lower", "implied time lost: lost packets / offered rate", "reconf", short="time lost s",
       headline=True),
    _m("outage_count", "outages", "lower", "outages after the change (labgen's sequence numbers and stamps)",
       "reconf", short="outages"),
    _m("longest_outage_s", "s", "lower", "the longest outage after the change", "reconf", short="longest s"),
    _m("latency_before_p99_us", "us", "lower", "one-way latency p99 without the change", "reconf",
       short="p99 before us"),
    _m("latency_after_p99_us", "us", "lower", "one-way latency p99 after the change's last outage", "reconf",
       short="p99 after us"),
    # --- a soak trial: one long trial, second by second
    _m("loss_upper_bound", "ratio", "lower", "one-sided 95% upper bound of the loss ratio (zero in N: 3/N)", "soak",
       short="loss bound", headline=True),
    _m("loss_events", "events", "lower", "outages in the soak", "soak", short="events"),
    _m("loss_events_host", "events", "lower", "outages at a host stall (steal time, lab threads switched out)",
       "soak", short="at stalls"),
    _m("host_stall_s", "s", "lower", "seconds the host stalled (the host's steadiness, not the setting's)", "soak",
       short="stalled s"),
    # --- tcp kinds: the guest's kernel virtio-net driver under TCP sessions
    _m("bandwidth_gbps", "Gbit/s", "higher", "tcp_stream: TCP payload received, all sessions", "tcp",
       short="Gbit/s", headline=True,
       demands=("service_demand_host_us_per_kb", "service_demand_guest_us_per_kb")),
    _m("transactions_per_s", "trans/s", "higher", "tcp_rr: request/response round trips, all sessions", "tcp",
       short="trans/s", headline=True,
       demands=("service_demand_host_us_per_tx", "service_demand_guest_us_per_tx")),
    _m("rr_latency_us", "us", "lower", "tcp_rr: mean one-way latency, sessions' median", "latency",
       short="latency us"),
    _m("retransmits", "segments", "lower", "TCP retransmits", "tcp", short="retrans"),
    _m("host_cpu_cores", "cores", "lower", "host CPU busy in the window", "cpu", short="host CPUs"),
    _m("guest_cpu_cores", "vCPUs", "lower", "guest CPU busy in the window", "cpu", short="guest CPUs"),
    _m("service_demand_host_us_per_kb", "us/KB", "lower", "host CPU per KB received (netperf)", "tcp",
       short="host SD us/KB"),
    _m("service_demand_guest_us_per_kb", "us/KB", "lower", "guest CPU per KB received (netperf)", "tcp",
       short="guest SD us/KB"),
    _m("service_demand_host_us_per_tx", "us/tx", "lower", "host CPU per transaction (netperf)", "tcp",
       short="host SD us/tx"),
    _m("service_demand_guest_us_per_tx", "us/tx", "lower", "guest CPU per transaction (netperf)", "tcp",
       short="guest SD us/tx"),
    _m("guest_queues_enabled", "queues", "higher", "combined channels the guest's driver reports", "tcp"),
    _m("sessions_ok", "sessions", "higher", "sessions whose client reported a result", "tcp"),
)

#: Every metric by name.
METRICS: dict[str, Metric] = {m.name: m for m in _DECLARED}

#: Short names a ``--metric`` takes: ``ndr`` -> ``ndr_mpps``, ``pdr`` -> ``pdr_mpps``.
ALIASES: dict[str, str] = {alias: m.name for m in _DECLARED for alias in m.aliases}

#: The kernel-stack rates, each with its service demands.
TCP_RATES: dict[str, tuple[str, ...]] = {m.name: m.demands for m in _DECLARED if m.kind == "tcp" and m.headline}

#: The forwarding rates the advisor ranks: at the trial's load, or what an NDR/PDR search found.
FORWARDING_RATES: tuple[str, ...] = ("mpps", "ndr_mpps", "pdr_mpps")

#: Column names as the posts write them.
SHORT_NAMES: dict[str, str] = {m.name: m.short for m in _DECLARED if m.short}

#: What a run measured, in the order it is recognised: a tcp rate, a reconf's time lost, a soak's loss bound,
#: the forwarding rate, an NDR search's;
#: each with the metrics a report shows of it when none is named.
DEFAULT_METRICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((rate, (rate, *demands)) for rate, demands in TCP_RATES.items()),
    ("time_lost_s", ("time_lost_s", "lost_packets", "outage_count")),  # a run of reconfiguration trials
    ("loss_upper_bound", ("loss_upper_bound", "loss_ratio", "loss_events")),  # a run of soaks
    ("mpps", ("mpps",)),
    ("ndr_mpps", ("ndr_mpps", "pdr_mpps")),  # a run of NDR/PDR searches
)


def lookup(name: str) -> Metric | None:
    """The metric ``name`` is (an alias resolved; ``drops.ring_full`` is the ``drops`` family's), or None."""
    name = ALIASES.get(name, name)
    found = METRICS.get(name)
    if found is None and "." in name:
        family = METRICS.get(name.split(".", 1)[0])
        found = family if family is not None and family.family else None
    return found


def resolve(name: str, allowed: Iterable[str] | None = None, option: str = "--metric",
            what: str = "a metric here") -> str:
    """The metric ``name`` names (``ndr`` -> ``ndr_mpps``); for anything else UserError, ``OPTION NAME: not
    WHAT (allowed: ...)`` naming ``allowed`` (every declared metric when None) and their aliases."""
    allowed = list(allowed) if allowed is not None else [m.name for m in _DECLARED if not m.family]
    full = ALIASES.get(name, name)
    if full in allowed:
        return full
    raise UserError(f"{option} {name}: not {what} (allowed: {shown(allowed)})")


def shown(allowed: Iterable[str]) -> str:
    """``allowed`` as a user reads it: names, then the aliases of those among them (``ndr (= ndr_mpps)``)."""
    allowed = list(allowed)
    return ", ".join(allowed + [f"{alias} (= {name})" for alias, name in ALIASES.items() if name in allowed]) or "none"


def lower_is_better(metric: str) -> bool:
    """True for a metric where higher is worse: the one rule reports, comparisons, trends, pivots and the
    advisor judge a change by. KeyError for a name the registry does not declare."""
    found = lookup(metric)
    if found is None:
        raise KeyError(f"{metric}: not a metric of labctl's trials")
    return found.lower_is_better


def _measured(records: Iterable["TrialRecord"], metric: str) -> bool:
    return any(getattr(r.metrics, metric, None) is not None for r in records if r.status == "ok")


def default_metrics(records: Iterable["TrialRecord"]) -> list[str]:
    """The metrics a report of these trials shows by default: a tcp run's rate and its service demands,
    the forwarding rate, or NDR and PDR for a run of searches (``mpps`` when none was measured)."""
    records = list(records)
    for marker, metrics in DEFAULT_METRICS:
        if _measured(records, marker):
            return list(metrics)
    return ["mpps"]


def default_metric(records: Iterable["TrialRecord"]) -> str:
    """The one metric these trials measured by default (:func:`default_metrics`' first): ``ndr_mpps`` for a
    run of NDR/PDR searches, ``bandwidth_gbps`` / ``transactions_per_s`` for a tcp run, else ``mpps``."""
    return default_metrics(records)[0]


def ranked_rates(records: Iterable["TrialRecord"]) -> tuple[str, ...]:
    """The rates these trials can be ranked by: the tcp rates their successful trials measured (a
    tcp_stream or tcp_rr run), else the forwarding rates (:data:`FORWARDING_RATES`)."""
    records = list(records)
    tcp = tuple(m for m in TCP_RATES if _measured(records, m))
    return tcp or FORWARDING_RATES
