"""The metric registry: every metric a record can hold is declared once, with a direction."""

from __future__ import annotations

from typing import get_origin

import pytest
from pydantic import create_model

from labctl.errors import UserError
from labctl.results import metrics as registry
from labctl.results.codecs import metric_items
from labctl.results.record import Metrics, TrialRecord, lower_is_better


def check_declared(model: type[Metrics], name: str) -> None:
    """The walk's check of one field of ``model``: declared in the registry, with a direction."""
    metric = registry.lookup(name)
    assert metric is not None, f"{model.__name__}.{name} has no entry in labctl.results.metrics"
    assert metric.name == name and metric.unit and metric.label
    assert metric.direction in ("higher", "lower", "none")
    assert metric.family == (get_origin(model.model_fields[name].annotation) is dict)
    if metric.direction == "none":  # a setting or a distribution: never judged
        assert name in ("window_s", "queue_shares")


@pytest.mark.parametrize("name", list(Metrics.model_fields))
def test_every_field_of_a_record_is_declared_with_a_direction(name):
    """Like virtinst's test_checkprops: a Metrics field without a registry entry fails here."""
    check_declared(Metrics, name)


def test_every_registry_entry_is_a_field_of_a_record():
    assert set(registry.METRICS) == set(Metrics.model_fields)


def test_flattened_dict_metrics_are_found_by_their_family():
    record = Metrics(drops={"ring_full": 3}, cpu={"vswitch_pmd": 99.0}, queue_shares={"guest.port0.rxq1": 0.5})
    for name in metric_items(record):
        assert registry.lookup(name) is not None, name
    assert lower_is_better("drops.ring_full") and lower_is_better("cpu.vswitch_pmd")


def test_a_field_added_without_an_entry_fails():
    """The walk above fails for a new field: shown on a planted one (a record type with one more field)."""
    planted = create_model("PlantedMetrics", __base__=Metrics, goodput_mpps=(float | None, None))
    assert set(planted.model_fields) - set(Metrics.model_fields) == {"goodput_mpps"}
    for name in Metrics.model_fields:
        check_declared(planted, name)  # the inherited fields still pass
    with pytest.raises(AssertionError, match="PlantedMetrics.goodput_mpps has no entry in labctl.results.metrics"):
        check_declared(planted, "goodput_mpps")
    assert set(registry.METRICS) != set(planted.model_fields)  # and the set check sees it too
    with pytest.raises(KeyError):
        lower_is_better("goodput_mpps")


def test_directions():
    lower = {"loss_ratio", "lost", "reordered", "duplicate", "tx_dropped", "guest_tx_dropped", "retransmits",
             "cycles_per_packet", "vswitch_cycles_per_packet", "host_cpu_cores", "guest_cpu_cores", "rr_latency_us",
             *(f"latency_{p}_us" for p in ("min", "mean", "p50", "p90", "p99", "p999", "max")),
             *(m for m in Metrics.model_fields if m.startswith("service_demand")),
             # a reconf's cost and a soak's loss, events and the host's stalls
             "lost_packets", "time_lost_s", "outage_count", "longest_outage_s", "latency_before_p99_us",
             "latency_after_p99_us", "loss_upper_bound", "loss_events", "loss_events_host", "host_stall_s"}
    for name, metric in registry.METRICS.items():
        assert metric.lower_is_better == (name in lower | {"drops", "cpu"}), name


def test_aliases_resolve_and_unknown_names_list_the_allowed():
    assert registry.resolve("ndr") == "ndr_mpps" and registry.resolve("pdr") == "pdr_mpps"
    assert registry.resolve("mpps") == "mpps" and registry.lookup("ndr").name == "ndr_mpps"
    with pytest.raises(UserError, match=r"^--metric nrd: not a metric here \(allowed: mpps, .*ndr \(= ndr_mpps\)"):
        registry.resolve("nrd")
    with pytest.raises(UserError, match=r"\(allowed: mpps, ndr_mpps, ndr \(= ndr_mpps\)\)$"):
        registry.resolve("gbps", ["mpps", "ndr_mpps"])


def test_the_default_metric_is_what_the_run_measured():
    def rec(**metrics):
        return TrialRecord(config={}, metrics=Metrics(**metrics))

    assert registry.default_metric([rec(mpps=1.0, latency_p50_us=3.0)]) == "mpps"
    assert registry.default_metric([rec(ndr_mpps=1.0, pdr_mpps=2.0, latency_p50_us=3.0)]) == "ndr_mpps"
    assert registry.default_metric([rec(bandwidth_gbps=1.0, mpps=None)]) == "bandwidth_gbps"
    assert registry.default_metrics([rec(transactions_per_s=9.0)]) == [
        "transactions_per_s", "service_demand_host_us_per_tx", "service_demand_guest_us_per_tx"]
    assert registry.default_metric([]) == "mpps"
    assert registry.ranked_rates([rec(ndr_mpps=1.0)]) == ("mpps", "ndr_mpps", "pdr_mpps")
    assert registry.ranked_rates([rec(bandwidth_gbps=1.0)]) == ("bandwidth_gbps",)


def test_tcp_rates_carry_their_service_demands():
    assert registry.TCP_RATES == {
        "bandwidth_gbps": ("service_demand_host_us_per_kb", "service_demand_guest_us_per_kb"),
        "transactions_per_s": ("service_demand_host_us_per_tx", "service_demand_guest_us_per_tx")}
    assert all(registry.lookup(d).lower_is_better for ds in registry.TCP_RATES.values() for d in ds)


def test_a_reconf_or_soak_run_defaults_to_its_own_measure():
    def rec(**metrics):
        return TrialRecord(config={}, metrics=Metrics(**metrics))

    assert registry.default_metrics([rec(mpps=1.0, time_lost_s=0.02, lost_packets=2000)]) == [
        "time_lost_s", "lost_packets", "outage_count"]
    assert registry.default_metrics([rec(mpps=1.0, loss_ratio=0.0, loss_upper_bound=3e-8)]) == [
        "loss_upper_bound", "loss_ratio", "loss_events"]
    assert registry.lookup("time_lost_s").kind == "reconf" and registry.lookup("loss_upper_bound").kind == "soak"
