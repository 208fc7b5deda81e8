"""Reconf and soak trials in the store's readers: labctl report (table and JSON), compare, and the page with
its time plots (the change and its outages; the soak's seconds with loss events and host stalls)."""

from __future__ import annotations

import json

from labctl import api
from labctl.analysis.html.page import render_run
from tests.live_data import reconf_record, soak_record
from tests.unit.analysis import html_runs


def test_a_reconf_run_reports_its_cost_and_plots_the_change(tmp_path):
    db = tmp_path / "labctl.db"
    html_runs.store_run(db, "guest", [reconf_record()])
    report = api.report(db)
    assert report.metric == "time_lost_s" and report.rows[0].median == 0.04995
    doc = api.report_document(db)
    assert doc["question"]["metric"] == "time_lost_s"
    (live,) = doc["live"]
    assert live["kind"] == "reconf" and live["change"] == "guest.pinning.vcpus.0=1"
    assert any("lost to the change: 4995 packets" in line for line in live["lines"])
    page = render_run(doc)
    assert 'id="live"' in page and "reconf trial" in page and page.count("<svg") == 1  # the change's (one trial: no medians)
    answer = page[page.index('id="answer"'):page.index('id="table"')]
    assert "lost to the change: 4995 packets" in answer  # the answer of a reconf run is its cost
    assert "around the change" in page and "seconds from the change&#39;s start" in page
    assert "+0.0020" in page  # the outage table: the outage starts 2 ms after the change
    json.dumps(doc)  # labctl report --format json prints it


def test_a_soak_run_plots_its_seconds_with_loss_events_and_stalls(tmp_path):
    db = tmp_path / "labctl.db"
    html_runs.store_run(db, "quick", [soak_record()])
    doc = api.report_document(db)
    assert doc["question"]["metric"] == "loss_upper_bound"
    (live,) = doc["live"]
    assert len(live["series"]) == 120 and [e["host_stall"] for e in live["events"]] == [True, False]
    page = render_run(doc)
    assert "soak trial" in page and "loss events, the lower row at a host stall; grey: host stalls" in page
    assert page.count("<svg") == 1


def test_compare_two_reconf_runs_of_the_same_change(tmp_path):
    db = tmp_path / "labctl.db"
    first = reconf_record()
    second = reconf_record()
    second.metrics.time_lost_s, second.metrics.lost_packets = 0.2, 20000
    html_runs.store_run(db, "guest", [first])
    html_runs.store_run(db, "guest", [second])
    result = api.compare(db, baseline="1", candidate="2", metric="time_lost_s")
    rows = result.to_dict()["verdicts"]
    assert len(rows) == 1 and rows[0]["change_pct"] > 300  # one configuration: the change is part of it
