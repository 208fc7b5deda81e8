"""The sweep's progress line names each trial's own rate: Mpps, NDR/PDR, or a TCP run's bandwidth or
transactions (a TCP sweep had shown "no rate" for every trial)."""

from __future__ import annotations

import pytest

from labctl.cli.output import trial_rate
from labctl.results.record import Metrics, TrialRecord


@pytest.mark.parametrize("metrics, shown", [
    (Metrics(mpps=1.234), "1.23 Mpps"),
    (Metrics(ndr_mpps=0.4081, pdr_mpps=3.6884), "NDR 0.408 / PDR 3.688 Mpps"),
    (Metrics(bandwidth_gbps=9.876), "9.88 Gbit/s"),
    (Metrics(transactions_per_s=12345.6), "12,346 trans/s"),
    (Metrics(), "no rate"),
])
def test_each_kind_of_trial_shows_its_rate(metrics, shown):
    assert trial_rate(TrialRecord(config={}, metrics=metrics)) == shown


def test_a_failed_trial_shows_its_status():
    assert trial_rate(TrialRecord(config={}, status="failed", error="x")) == "failed"
    assert trial_rate(None) == "failed"
