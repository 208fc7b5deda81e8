"""A paced trial the generator could not keep to its schedule (``valid`` False) measured the generator: the
within-block verdicts leave it out, as the report and the advisor do."""

from __future__ import annotations

from labctl.measure import until as u
from labctl.results.record import Metrics, TrialRecord


def _rec(ring, block, loss, valid=True):
    return TrialRecord(config={"k": ring}, metrics=Metrics(loss_ratio=loss, valid=valid), details={"block": block})


def test_an_invalid_trial_makes_no_pair():
    recs = [_rec(256, 0, 0.018), _rec(1024, 0, 0.0007),
            _rec(256, 1, 0.26, valid=False), _rec(1024, 1, 0.0009),  # the generator fell behind on 256
            _rec(256, 2, 0.017), _rec(1024, 2, 0.29, valid=False),
            _rec(256, 3, 0.016), _rec(1024, 3, 0.0008, valid=None)]  # None: not a paced trial, kept
    diffs, reason = u.paired(recs, u.Pairing("k", 256, 1024), "loss_ratio")
    assert reason == ""
    assert [round(d, 4) for d in diffs] == [round(0.0007 - 0.018, 4), round(0.0008 - 0.016, 4)]


def test_a_failed_or_invalid_trial_has_no_value():
    assert u.metric_value(_rec(256, 0, 0.2, valid=False), "loss_ratio") is None
    assert u.metric_value(_rec(256, 0, 0.2, valid=True), "loss_ratio") == 0.2
    failed = TrialRecord(config={}, metrics=Metrics(loss_ratio=0.1), status="failed")
    assert u.metric_value(failed, "loss_ratio") is None
