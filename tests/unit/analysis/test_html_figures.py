"""The page's plots where they help: the medians plot only with something to compare, the NDR search's
loss plot on a log axis viewed around its bounds."""

from __future__ import annotations

import re

from labctl.analysis.html import figures


def _row(median, **knobs):
    return {"knobs": knobs, "median": median, "ci": [median * 0.9, median * 1.1]}


def test_one_configuration_has_no_medians_plot():
    one = {"rows": [_row(0.52)], "by": None, "knobs": [], "metric": "ndr_mpps"}
    assert figures.medians(one) is None
    by = {"rows": [_row(0.52, ring=256)], "by": "ring", "knobs": ["ring"], "metric": "ndr_mpps"}
    assert figures.medians(by) is None
    two = {"rows": [_row(0.52, ring=256), _row(0.9, ring=1024)], "by": "ring", "knobs": ["ring"], "metric": "ndr_mpps"}
    assert figures.medians(two).startswith("<svg")


def _search(ndr, pdr, loads):
    return {"trial": 1, "knobs": {}, "ndr_mpps": ndr, "pdr_mpps": pdr, "pdr_loss_ratio": 0.005,
            "measurements": [{"offered_mpps": load, "loss_ratio": loss} for load, loss in loads]}


# a search as labctl ndr runs it here: calibrated at 20 Mpps, walking down to an NDR of 0.52
SEARCH = _search(0.52, 0.61, [(20.0, 0.97), (10.0, 0.94), (2.4, 0.75), (0.9, 0.3), (0.63, 0.01), (0.61, 0.004),
                              (0.55, 0.001), (0.52, 0.0), (0.5, 0.0)])


def test_the_view_is_around_the_bounds_within_what_was_measured():
    low, high = figures.load_view([SEARCH])
    assert low == max(0.52 / figures.VIEW_MARGIN, 0.5 * 0.9)
    assert high == 0.61 * figures.VIEW_MARGIN
    assert figures.load_view([_search(None, None, [(1.0, 0.1)])]) is None


def test_the_loss_plot_is_logarithmic_and_says_what_lies_beyond_its_view():
    svg = figures.ndr_loss({"searches": [SEARCH], "knobs": []})
    assert "offered load (Mpps, log scale)" in svg
    assert "2 trials beyond this view (log axis, around the bounds)" in svg  # 20 and 10 Mpps
    ticks = re.findall(r">([0-9.]+)</text>", svg)
    assert {"0.5", "1", "2"} <= set(ticks)  # plain numbers around the bounds, not 10^x


def test_a_search_inside_its_view_says_nothing_more():
    inside = _search(1.0, 1.2, [(1.5, 0.02), (1.2, 0.004), (1.0, 0.0)])
    svg = figures.ndr_loss({"searches": [inside], "knobs": []})
    assert "beyond this view" not in svg
