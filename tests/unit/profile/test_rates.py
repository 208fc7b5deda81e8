"""Offered loads as users write them, and the rule that a paced rate needs the paced generator."""

from __future__ import annotations

import pytest

from labctl.errors import ProfileError
from labctl.profile.load import load_profile
from labctl.profile.rates import Rate, parse_rate
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})


@pytest.mark.parametrize("text, rate", [("max", Rate("max")), ("2.5Mpps", Rate("pps", 2.5e6)),
                                        ("750kpps", Rate("pps", 750e3)), ("120000pps", Rate("pps", 120000.0)),
                                        ("40%", Rate("pct", 40.0)), (" 1.5 MPPS ", Rate("pps", 1.5e6))])
def test_rates_parse(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["5", "fast", "0Mpps", "-1kpps", "0%", "150%", "2.5 Gbps"])
def test_bad_rates_name_the_allowed_forms(text):
    with pytest.raises(ValueError, match="allowed: max, a rate such as 2.5Mpps"):
        parse_rate(text)


def test_rate_rules_one_line_each():
    with pytest.raises(ProfileError) as caught:
        load_profile(DOMAINS / "quick.yaml", {"workload.rate": "1Mpps", "workload.generator": "flowgen"}, cpus=CPUS)
    assert [p.render() for p in caught.value.problems] == [
        "workload.rate: 1Mpps: generator flowgen cannot pace (allowed: max, or generator labgen)"]
    with pytest.raises(ProfileError) as caught:
        load_profile(DOMAINS / "quick.yaml", {"workload.rate": "300Mpps"}, cpus=CPUS)
    assert len(caught.value.problems) == 1 and "above 200 Mpps" in caught.value.problems[0].message
    assert load_profile(DOMAINS / "quick.yaml", {"workload.rate": "40%"}, cpus=CPUS).profile.workload.rate == "40%"
