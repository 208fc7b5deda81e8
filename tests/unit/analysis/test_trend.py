"""The trend of a metric over the runs of one profile: rows in time order, drift, environment changes."""

from __future__ import annotations

import pytest

from labctl.analysis.trend import build_trend, render_trend
from labctl.errors import UserError
from tests.factories import ENV, run_records


def drifting_store() -> list:
    """Four runs of profile "demo" (two rings each, 5 trials): rx 256 drifts down 4% a run, and run 4
    (stored before run 3, as an import would be) measured with a new DPDK before run 3's trials."""
    runs = []
    for i, (run_id, start, dpdk) in enumerate([(1, 1000.0, "22.11.1"), (2, 2000.0, "22.11.1"),
                                               (4, 3000.0, "23.11.0"), (3, 4000.0, "23.11.0")]):
        rate = 10.0 * (1 - 0.04 * i)
        values = {256: [rate, rate * 1.002, rate * 0.998, rate * 1.001, rate * 0.999], 1024: [12.0, 12.02, 11.98, 12.01, 11.99]}
        runs += run_records(run_id, values, env=ENV.model_copy(update={"dpdk": dpdk}), start=start,
                            first_id=100 * run_id)
    return runs


def test_trend_rows_in_measurement_order_with_the_drift_and_the_change_marked():
    trend = build_trend(drifting_store(), "demo", selection={"guest.nics.*.rx_queue_size": 256})
    (series,) = trend.series
    assert [row.run_id for row in series.rows] == [1, 2, 4, 3]
    medians = [row.side.median for row in series.rows]
    assert medians == sorted(medians, reverse=True) and medians[0] == pytest.approx(10.0)
    assert [bool(row.env_changes) for row in series.rows] == [False, False, True, False]
    assert series.rows[2].env_changes[0].format() == "dpdk: 22.11.1 -> 23.11.0"
    assert series.rows[0].verdict is None and series.rows[-1].verdict == "regression"
    assert series.rows[-1].change.startswith("-12.")
    text = render_trend(trend)
    assert "*4" in text and "dpdk: 22.11.1 -> 23.11.0" in text
    assert text.index("\n 1 ") < text.index("\n 2 ") < text.index("\n*4 ") < text.index("\n 3 ")


def test_trend_without_a_selection_has_a_series_per_configuration_and_host():
    records = drifting_store() + run_records(9, {256: [9.0] * 3}, env=ENV.model_copy(update={"host": "lab2"}),
                                             start=5000.0, first_id=900)
    trend = build_trend(records, "demo")
    keys = [(s.knobs["guest.nics.*.rx_queue_size"], s.env["host"]) for s in trend.series]
    assert keys == [(256, "lab1"), (256, "lab2"), (1024, "lab1")]
    flat = trend.series[2]
    assert {row.verdict for row in flat.rows[1:]} == {"no change"}
    assert trend.to_dict()["series"][0]["rows"][0]["side"]["n"] == 5


def test_trend_errors_name_the_allowed_values():
    records = drifting_store()
    with pytest.raises(UserError, match=r"--trend other: no trials of that profile \(allowed: demo\)"):
        build_trend(records, "other")
    with pytest.raises(UserError, match=r"--metric ndr: not measured in the trials of demo \(allowed: mpps\)"):
        build_trend(records, "demo", "ndr")
    with pytest.raises(UserError, match=r"--config workload.burst: not a knob of demo's trials \(allowed: "
                                         r"guest.nics.\*.rx_queue_size\)"):
        build_trend(records, "demo", selection={"workload.burst": 32})
    with pytest.raises(UserError, match=r"no trial of demo has that value \(allowed: 256, 1024\)"):
        build_trend(records, "demo", selection={"guest.nics.*.rx_queue_size": 512})


def test_a_selected_configuration_is_named_in_its_series():
    trend = build_trend(drifting_store(), "demo", selection={"guest.nics.*.rx_queue_size": 1024})
    (series,) = trend.series
    assert series.label == "rx_queue_size=1024"
    assert "\nrx_queue_size=1024 (host lab1" in render_trend(trend)


def test_trend_follows_ndr_records_not_the_searches_measurements():
    records = []
    for run_id, start, ndr in ((1, 1000.0, 2.0), (2, 2000.0, 1.5)):
        search = run_records(run_id, {256: [1.0, 8.0, 4.0]}, start=start, first_id=100 * run_id)
        for record in search:
            record.details["role"] = "search"
        final = run_records(run_id, {256: [ndr, ndr * 1.01, ndr * 0.99, ndr * 1.005, ndr * 0.995]}, metric="ndr_mpps",
                            start=start + 100, first_id=100 * run_id + 10)
        for record in final:
            record.details["role"] = "ndr"
        records += search + final
    trend = build_trend(records, "demo", "ndr")
    (series,) = trend.series
    assert trend.metric == "ndr_mpps" and [row.side.n for row in series.rows] == [5, 5]
    assert series.rows[1].verdict == "regression" and series.rows[1].change.startswith("-25.")
