"""The words every face says alike about a trial (:mod:`labctl.results.lines`). The sweep's progress line
names each trial's own rate: Mpps, NDR/PDR, or a TCP run's bandwidth or transactions (a TCP sweep had shown
"no rate" for every trial, and the TUI's copy of the function "ok"): one function, which the CLI and the
TUI both reach through ``labctl.api``."""

from __future__ import annotations

import pytest

from labctl import api
from labctl.results.lines import describe_nics, trial_rate
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


def test_the_faces_reach_the_one_function():
    assert api.trial_rate is trial_rate and api.describe_nics is describe_nics


NIC = {"index": 0, "requested": {"backend": "vhostuser", "queues": 2, "rx_ring": 1024, "tx_ring": 1024},
       "negotiated": {"ifname": "eth0", "queues": 1, "rx_ring": 1024, "tx_ring": 256},
       "differences": ["queues: 2 queues on 1 vCPU: the guest's kernel driver enabled 1"]}


def test_a_nic_is_requested_then_negotiated_with_its_reasons_below():
    assert describe_nics([NIC]) == [
        "nic0 vhostuser eth0  queues 2->1  rx 1024->1024  tx 1024->256",
        "     queues: 2 queues on 1 vCPU: the guest's kernel driver enabled 1"]
    missing = {**NIC, "negotiated": None, "differences": []}
    assert describe_nics([missing]) == ["nic0 vhostuser ?     queues 2->None  rx 1024->None  tx 1024->None"]


def test_a_trial_summary_shows_its_nics_in_the_same_words():
    summary = api.trial_summary(TrialRecord(config={}, metrics=Metrics(mpps=1.0, gbps=0.5, offered_mpps=1.0,
                                                                       window_s=1.0), details={"nics": [NIC]}))
    lines = summary.splitlines()
    at = lines.index("nics:      asked -> what the guest's driver negotiated")
    assert lines[at + 1:at + 3] == [f"           {line}" for line in describe_nics([NIC])]
