"""The load a reconf or soak holds (labctl.measure.load_point): --rate, else the stored NDR of the same
configuration (half of its lower bound, or the bound itself with --at ndr), else a request for --rate."""

from __future__ import annotations

import pytest

from labctl.api import load
from labctl.errors import UserError
from labctl.measure.load_point import check_load, choose_load
from labctl.profile.knobs import flatten
from labctl.results.record import Metrics, TrialRecord
from labctl.results.store import Store

QUICK = "domains/quick.yaml"


def store_ndr(db, overrides: dict, lower: float, role: str = "ndr") -> int:
    profile = load(QUICK, {**overrides, "workload.rate": "max", "workload.duration_s": 1.0}).profile
    with Store(db) as store:
        run_id = store.create_run("quick", {}, [])
        return store.add_trial(TrialRecord(run_id=run_id, config=flatten(profile.model_dump()),
                                           metrics=Metrics(ndr_lower_mpps=lower, ndr_mpps=lower),
                                           details={"role": role}))


def test_half_the_stored_ndr_of_this_configuration(tmp_path):
    db = tmp_path / "labctl.db"
    store_ndr(db, {"workload.burst": 64}, 0.9)  # another configuration
    trial = store_ndr(db, {}, 0.4)
    store_ndr(db, {}, 5.0, role="search")  # a search's single measurement is no NDR
    point = choose_load(load(QUICK), db, None, None, "reconf")
    assert point.rate.kind == "pps" and point.rate.value == pytest.approx(200_000)
    assert point.said.startswith("half the NDR lower bound stored for this configuration: 0.2000 Mpps (NDR lower "
                                 "bound 0.4000 Mpps, run 2 in ")
    assert point.source["trial_id"] == trial
    at = choose_load(load(QUICK), db, None, "ndr", "soak")
    assert at.rate.value == pytest.approx(400_000) and at.said.startswith("the NDR lower bound stored")
    given = choose_load(load(QUICK), db, "0.1Mpps", None, "reconf")
    assert given.rate.value == pytest.approx(100_000) and given.said == "--rate 0.1Mpps" and not given.source


def test_no_ndr_stored_asks_for_a_rate(tmp_path):
    with pytest.raises(UserError, match=r"reconf: no NDR stored for this configuration of quick in .*missing.db "
                                        r"\(allowed: --rate R"):
        choose_load(load(QUICK), tmp_path / "missing.db", None, None, "reconf")


@pytest.mark.parametrize(("rate", "at", "message"), [
    ("1Mpps", "ndr", "give one load"), (None, "pdr", r"--at pdr: not a stored bound \(allowed: ndr\)"),
    ("max", None, "--rate max: a live change is timed against a paced load"), ("fast", None, "is not a rate")])
def test_bad_loads(rate, at, message):
    with pytest.raises(UserError, match=message):
        check_load(rate, at)
