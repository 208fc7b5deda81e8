"""The NDR/PDR searches on a lab with a known answer: MLRsearch and binary search find the planted
rates within their precision, and MLRsearch spends fewer trial-seconds doing it."""

from __future__ import annotations

import pytest

from labctl.errors import UserError
from labctl.measure.ndr import NDR_LOSS, PDR_LOSS, SearchSettings, _binary, _mlrsearch

NDR_PPS = 400_000.0  # per port: no loss at or below this load
PORTS = 2


class PlantedLab:
    """A lab with no loss up to NDR_PPS per port; above it, the excess is lost (a saturated forwarder)."""

    class Result:
        def __init__(self, offered: int, loss: int, window_s: float):
            self.offered, self.loss_count, self.window_s = offered, loss, window_s

    def __init__(self):
        self.trial_seconds = 0.0
        self.trials = 0
        self.ports = PORTS

    def result(self, duration_s: float, load_pps: float):
        self.trials += 1
        self.trial_seconds += duration_s
        offered = int(load_pps * duration_s) * PORTS
        kept = min(load_pps, NDR_PPS) / load_pps
        return self.Result(offered, int(round(offered * (1 - kept))), duration_s)

    # the measurer interfaces the searches use (labctl.measure.ndr.LabMeasurer)
    def measure(self, intended_duration: float, intended_load: float):
        from MLRsearch import MeasurementResult

        r = self.result(intended_duration, intended_load)
        return MeasurementResult(intended_duration=intended_duration, intended_load=intended_load,
                                 offered_count=r.offered, loss_count=r.loss_count)

    def passes(self, duration_s: float, load_pps: float, loss_goal: float) -> bool:
        r = self.result(duration_s, load_pps)
        return r.loss_count <= loss_goal * max(r.offered, 1)


SETTINGS = SearchSettings(precision=0.005, initial_trial_s=1.0, final_trial_s=5.0, duration_sum_s=10.0)
PDR_PPS = NDR_PPS / (1 - PDR_LOSS)  # the load at which the lost excess is 0.5% of the offered


@pytest.mark.parametrize("search", [_mlrsearch, _binary], ids=["mlrsearch", "binary"])
def test_searches_find_the_planted_rates(search):
    lab = PlantedLab()
    found = search(lab, SETTINGS, 1000.0, 2_000_000.0)
    for name, truth in (("ndr", NDR_PPS), ("pdr", PDR_PPS)):
        value, lower, upper = found[name]
        assert lower <= truth * 1.0001 and (upper is None or upper >= truth * 0.9999)
        assert abs(value - truth) / truth <= 2 * SETTINGS.precision, (name, value, truth)
    assert found["ndr"][0] <= found["pdr"][0]


def test_mlrsearch_costs_less_than_binary_search():
    mlr, binary = PlantedLab(), PlantedLab()
    _mlrsearch(mlr, SETTINGS, 1000.0, 2_000_000.0)
    _binary(binary, SETTINGS, 1000.0, 2_000_000.0)
    assert mlr.trial_seconds < binary.trial_seconds


def test_settings_are_checked():
    for bad, field in ((SearchSettings(search="linear"), "--search linear"), (SearchSettings(precision=0.5), "--precision"),
                       (SearchSettings(initial_trial_s=5, final_trial_s=1), "trial durations"),
                       (SearchSettings(final_trial_s=5, duration_sum_s=1), "--duration-sum")):
        with pytest.raises(UserError, match=field):
            bad.check()
    assert NDR_LOSS == 0.0 and PDR_LOSS == 0.005
