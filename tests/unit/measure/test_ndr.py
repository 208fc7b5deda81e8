"""The NDR/PDR searches on a lab with a known answer: MLRsearch and binary search find the planted
rates within their precision, and MLRsearch spends fewer trial-seconds doing it."""

from __future__ import annotations

import pytest

from labctl.errors import UserError
from labctl.measure.ndr import NDR_LOSS, PDR_LOSS, Outcome, SearchSettings, _binary, _mlrsearch, short_trial_misses

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
        self.outcomes: list[Outcome] = []

    def capacity_pps(self, duration_s: float) -> float:
        return NDR_PPS

    def result(self, duration_s: float, load_pps: float):
        self.trials += 1
        self.trial_seconds += duration_s
        offered = int(load_pps * duration_s) * PORTS
        kept = min(load_pps, self.capacity_pps(duration_s)) / load_pps
        loss = int(round(offered * (1 - kept)))
        self.outcomes.append(Outcome(duration_s, load_pps, loss / max(offered, 1)))
        return self.Result(offered, loss, duration_s)

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


class PausingLab(PlantedLab):
    """A lab whose short trials miss the host's pauses: trials shorter than the final forward twice
    NDR_PPS without loss, final-length trials only NDR_PPS (loss that grows with the trial's length)."""

    def capacity_pps(self, duration_s: float) -> float:
        return NDR_PPS if duration_s >= SETTINGS.final_trial_s else 2 * NDR_PPS


def test_short_trials_that_over_estimate_the_lab_are_counted_and_cost_mlrsearch_its_saving():
    planted, pausing = PlantedLab(), PausingLab()
    _mlrsearch(planted, SETTINGS, 1000.0, 2_000_000.0)
    found = _mlrsearch(pausing, SETTINGS, 1000.0, 2_000_000.0)
    assert short_trial_misses(planted.outcomes, SETTINGS.final_trial_s) == {"ndr": (0, 0.0, 0.0), "pdr": (0, 0.0, 0.0)}
    misses = short_trial_misses(pausing.outcomes, SETTINGS.final_trial_s)
    for name, truth in (("ndr", NDR_PPS), ("pdr", PDR_PPS)):
        count, highest, lowest = misses[name]
        assert count >= 1 and truth < lowest <= highest <= 2 * truth * 1.01, (name, misses[name])
        assert abs(found[name][0] - truth) / truth <= 2 * SETTINGS.precision  # the final trials decide
    binary = PlantedLab()
    _binary(binary, SETTINGS, 1000.0, 2_000_000.0)  # binary search runs final-length trials only: the same cost
    assert pausing.trial_seconds / binary.trial_seconds > planted.trial_seconds / binary.trial_seconds


def test_short_trial_misses_count_loads_not_trials():
    final = 5.0
    outcomes = [Outcome(1.0, 900.0, 0.0), Outcome(1.0, 900.0, 0.0), Outcome(1.0, 700.0, 0.001),
                Outcome(5.0, 800.0, 0.001), Outcome(5.0, 600.0, 0.0), Outcome(1.0, 500.0, 0.0)]
    misses = short_trial_misses(outcomes, final)
    assert misses["ndr"] == (1, 900.0, 800.0)  # 900 passed short, 800 failed long; 500 is below it
    assert misses["pdr"] == (0, 0.0, 0.0)  # no final trial lost more than 0.5%


def test_mlrsearch_runs_one_coarser_target_at_the_initial_duration_then_the_final(monkeypatch):
    """PRECEDING_TARGETS = 1: trials of 1 s (the coarser target) and 5 s (the final), none between; on the
    planted lab that costs less than the package's default of 2 (a middle target at 3.16 s)."""
    import labctl.measure.ndr as ndr

    def run(preceding: int) -> tuple[PlantedLab, set[float]]:
        monkeypatch.setattr(ndr, "PRECEDING_TARGETS", preceding)
        lab, durations = PlantedLab(), set()
        result = lab.result
        lab.result = lambda duration_s, load_pps: durations.add(round(duration_s, 2)) or result(duration_s, load_pps)
        _mlrsearch(lab, SETTINGS, 1000.0, 2_000_000.0)
        return lab, durations

    one, one_durations = run(ndr.PRECEDING_TARGETS)
    two, two_durations = run(2)
    assert one_durations == {1.0, 5.0} and two_durations == {1.0, 3.16, 5.0}
    assert one.trial_seconds < two.trial_seconds


def test_settings_are_checked():
    for bad, field in ((SearchSettings(search="linear"), "--search linear"), (SearchSettings(precision=0.5), "--precision"),
                       (SearchSettings(initial_trial_s=5, final_trial_s=1), "trial durations"),
                       (SearchSettings(final_trial_s=5, duration_sum_s=1), "--duration-sum")):
        with pytest.raises(UserError, match=field):
            bad.check()
    assert NDR_LOSS == 0.0 and PDR_LOSS == 0.005


class PacingLab:
    """labgen at full speed sends FULL_PPS per port but keeps a schedule only up to PACED_PPS."""

    FULL_PPS, PACED_PPS = 4_000_000.0, 2_100_000.0

    class Generator:
        def run_trial(self, _spec):
            return type("Unpaced", (), {"achieved_rate_pps": PacingLab.FULL_PPS})()

    class Paced:
        def spec(self, rate, duration, warmup):
            return (rate, duration, warmup)

    def __init__(self, paced_pps: float = PACED_PPS):
        self.paced_pps = paced_pps
        self.generator = self.Generator()
        self.paced = self.Paced()


class CalibrationMeasurer:
    """The part of LabMeasurer that max_load_pps uses: attempt() and the calibration counters."""

    ports = PORTS

    def __init__(self, lab):
        self.lab, self.loads = lab, []
        self.calibration_trials, self.calibration_seconds = 0, 0.0

    def attempt(self, duration_s, load_pps, role, attempt=0):
        assert role == "calibration"
        self.loads.append(load_pps)
        return type("Paced", (), {"valid": load_pps <= self.lab.paced_pps})(), None


def test_the_maximum_load_is_the_highest_load_the_generator_keeps_a_schedule_for():
    from labctl.measure.ndr import max_load_pps

    measurer = CalibrationMeasurer(PacingLab())
    load, warnings = max_load_pps(measurer, 1.0)
    full = PacingLab.FULL_PPS
    # 98%, 88.2%, 79.4%, 71.4%, 64.3%, 57.9%, 52.1% of 4 Mpps: the first at or under 2.1 Mpps is 2.084
    assert load == pytest.approx(0.98 * 0.9 ** 6 * full) and load <= PacingLab.PACED_PPS
    assert measurer.loads[0] == pytest.approx(0.98 * full) and len(measurer.loads) == 7
    assert measurer.calibration_trials == 7 and measurer.calibration_seconds == 7.0 and warnings == []


def test_a_generator_that_keeps_no_schedule_caps_the_search_with_a_warning():
    from labctl.measure.ndr import CALIBRATION_STEPS, max_load_pps

    measurer = CalibrationMeasurer(PacingLab(paced_pps=0.0))
    load, warnings = max_load_pps(measurer, 0.5)
    assert len(measurer.loads) == CALIBRATION_STEPS and load == pytest.approx(measurer.loads[-1])
    assert measurer.calibration_seconds == CALIBRATION_STEPS * 0.5
    assert len(warnings) == 1 and "labgen kept no schedule up to" in warnings[0]


class RoundedRateLab:
    """labgen runs an integer rate: at 2556.205 pps per port for 5 s it schedules 12780 frames a port,
    not int(2556.205 * 5) = 12781, and sends them all with no loss."""

    class Result:
        valid, loss_count, unsent, window_s, reason = True, 0, 0, 5.0, "kept up"

        def __init__(self, load_pps, duration_s, unsent=0):
            self.unsent = unsent
            self.offered = round(load_pps) * int(duration_s) * PORTS - unsent

    def __init__(self, unsent=0):
        self.unsent = unsent

    def trial(self, duration_s, load_pps, role="search"):
        return self.Result(load_pps, duration_s, self.unsent), None


@pytest.mark.parametrize("load", [2556.205, 4966.857, 1000.5])
def test_a_lossless_trial_at_a_fractional_load_meets_the_zero_loss_goal(load):
    from labctl.measure.ndr import LabMeasurer

    measurer = LabMeasurer.__new__(LabMeasurer)
    measurer.trial = RoundedRateLab().trial
    measurer.lab = type("Lab", (), {"plan": type("Plan", (), {"nics": [0, 1]})()})()
    assert measurer.measure(5.0, load).loss_ratio == 0.0
    assert measurer.passes(5.0, load, NDR_LOSS)


def test_frames_the_generator_never_sent_count_against_the_load():
    from labctl.measure.ndr import LabMeasurer

    measurer = LabMeasurer.__new__(LabMeasurer)
    measurer.trial = RoundedRateLab(unsent=200).trial
    measurer.lab = type("Lab", (), {"plan": type("Plan", (), {"nics": [0, 1]})()})()
    got = measurer.measure(5.0, 100_000.0)
    assert got.unsent_count == 200 and got.loss_ratio == pytest.approx(200 / 1_000_000)
    assert not measurer.passes(5.0, 100_000.0, NDR_LOSS) and measurer.passes(5.0, 100_000.0, PDR_LOSS)


def test_mlrsearch_s_warm_up_is_stored_as_such_tried_once_and_not_read_as_evidence():
    """MLRsearch discards its first trial (at the maximum load): an invalid one is not repeated, not
    counted as a limited load, and not among the outcomes short_trial_misses reads."""
    from labctl.measure.ndr import LabMeasurer

    roles = []

    def attempt(duration_s, load_pps, role, attempt=0):
        roles.append(role)
        return type("Paced", (), {"valid": False, "loss_count": 0, "unsent": 10, "offered": 990,
                                  "window_s": duration_s})(), None

    measurer = LabMeasurer.__new__(LabMeasurer)
    measurer.attempt, measurer.trials, measurer.trial_seconds, measurer.limited = attempt, 0, 0.0, 0
    measurer.outcomes, measurer.warmup_next = [], True
    measurer.measure(1.0, 5000.0)
    measurer.measure(1.0, 5000.0)
    assert roles == ["warmup"] + ["search"] * 3
    assert measurer.limited == 1 and measurer.trials == 4 and len(measurer.outcomes) == 1


def _invalid_measurer(lost: int, offered: int = 1000, unsent: int = 10):
    """A LabMeasurer whose every attempt is invalid (labgen fell behind), with ``lost`` of ``offered``
    frames lost by the lab; returns it and the roles of its attempts."""
    from labctl.measure.ndr import LabMeasurer

    roles: list[str] = []

    def attempt(duration_s, load_pps, role, attempt=0):
        roles.append(role)
        return type("Paced", (), {"valid": False, "loss_count": lost, "unsent": unsent, "offered": offered,
                                  "window_s": duration_s})(), None

    measurer = LabMeasurer.__new__(LabMeasurer)
    measurer.attempt, measurer.trials, measurer.trial_seconds = attempt, 0, 0.0
    measurer.limited, measurer.decided_invalid, measurer.outcomes, measurer.warmup_next = 0, 0, [], False
    return measurer, roles


def test_an_invalid_trial_whose_lab_lost_more_than_every_goal_is_not_repeated_nor_called_limited():
    """labgen fell behind (it offered less than asked), yet the lab lost 6% of what it was offered:
    beyond the PDR's 0.5%, so no repeat can change the verdict and the generator did not limit it."""
    from labctl.measure.ndr import fails_every_goal

    measurer, roles = _invalid_measurer(lost=60)
    got = measurer.measure(5.0, 10_000_000.0)
    assert roles == ["search"] and measurer.trials == 1 and measurer.trial_seconds == 5.0
    assert measurer.limited == 0 and measurer.decided_invalid == 1 and got.loss_ratio > PDR_LOSS
    assert not measurer.passes(5.0, 10_000_000.0, PDR_LOSS) and roles == ["search"] * 2
    result = type("Paced", (), {"loss_count": 5, "offered": 1000})
    assert not fails_every_goal(result)  # 0.5% exactly meets the PDR goal
    result.loss_count = 6
    assert fails_every_goal(result)
    result.offered = result.loss_count = 0
    assert not fails_every_goal(result)  # nothing offered: nothing the lab did


@pytest.mark.parametrize("lost", [0, 5], ids=["no loss", "0.5% exactly"])
def test_an_invalid_trial_within_a_goal_is_repeated_and_then_called_limited(lost):
    from labctl.measure.ndr import INVALID_RETRIES

    measurer, roles = _invalid_measurer(lost=lost)
    measurer.measure(5.0, 10_000_000.0)
    assert roles == ["search"] * (INVALID_RETRIES + 1) and measurer.limited == 1 and measurer.decided_invalid == 0


def test_latency_trials_are_repeated_whatever_their_loss():
    from labctl.measure.ndr import INVALID_RETRIES

    measurer, roles = _invalid_measurer(lost=600)
    measurer.trial(5.0, 1000.0, role="latency")
    assert roles == ["latency"] * (INVALID_RETRIES + 1)


@pytest.mark.parametrize("search", [_mlrsearch, _binary], ids=["mlrsearch", "binary"])
def test_a_search_for_one_goal_finds_it_alone_for_less(search):
    """benchmarks/search_cost.py --goals pdr: only the PDR is searched (and found), in fewer trial-seconds
    than both goals together."""
    from dataclasses import replace

    both, one = PlantedLab(), PlantedLab()
    search(both, SETTINGS, 1000.0, 2_000_000.0)
    found = search(one, replace(SETTINGS, goals=("pdr",)), 1000.0, 2_000_000.0)
    assert set(found) == {"pdr"} and abs(found["pdr"][0] - PDR_PPS) / PDR_PPS <= 2 * SETTINGS.precision
    assert one.trial_seconds < both.trial_seconds


@pytest.mark.parametrize("goals", [(), ("ndr", "ndr"), ("ndr", "mrr")])
def test_goals_are_checked(goals):
    with pytest.raises(UserError, match="--goals .*allowed one or both of ndr, pdr"):
        SearchSettings(goals=goals).check()


def test_mlrsearch_in_one_second_trials_calls_a_load_a_lower_bound_only_after_the_duration_sum_without_loss():
    """benchmarks/search_cost.py --mlr-final 1 --exceed-ratio 0 (CSIT's way): every trial 1 s; a load is
    a lower bound only after duration_sum seconds of trials with no loss, an upper bound at its first
    lossy trial. On the planted lab the NDR is found within the precision, and every load the search
    calls a lower bound had its five lossless seconds."""
    from dataclasses import replace

    settings = replace(SETTINGS, final_trial_s=1.0, duration_sum_s=5.0, exceed_ratio=0.0, goals=("ndr",))
    lab = PlantedLab()
    value, lower, upper = _mlrsearch(lab, settings, 1000.0, 2_000_000.0)["ndr"]
    assert {o.duration_s for o in lab.outcomes} == {1.0}
    assert lower <= NDR_PPS * 1.0001 <= upper * 1.0002
    assert abs(value - NDR_PPS) / NDR_PPS <= 2 * settings.precision
    at_lower = [o for o in lab.outcomes if abs(o.load_pps - lower) <= 1e-6 * lower]
    assert len(at_lower) >= 5 and all(o.loss_ratio == 0.0 for o in at_lower)
    searched = lab.outcomes[1:]  # the first is MLRsearch's warm-up at the maximum load, its result discarded
    lossy = {o.load_pps for o in searched if o.loss_ratio > 0}
    assert lossy and all(sum(1 for o in searched if o.load_pps == load) == 1 for load in lossy)  # one lossy trial: a bound


@pytest.mark.parametrize("args, message", [
    (["--exceed-ratio", "1"], "--exceed-ratio 1.0: allowed 0 <= R < 1"),
    (["--mlr-final", "1", "--duration-sum", "3"], "--duration-sum 3.0: at least the final trial's 5.0 s"),
    (["--goals", "ndr,mrr"], "--goals ndr,mrr: allowed one or both of ndr, pdr"),
])
def test_search_cost_refuses_bad_options_before_it_starts_a_lab(args, message):
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[3] / "benchmarks" / "search_cost.py"
    done = subprocess.run([sys.executable, str(bench), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == f"search_cost: {message}"


@pytest.mark.parametrize("ratio", [-0.1, 1.0])
def test_exceed_ratio_is_checked(ratio):
    with pytest.raises(UserError, match=rf"--exceed-ratio {ratio}: allowed 0 <= R < 1"):
        SearchSettings(exceed_ratio=ratio).check()


class PlantedPacedLab:
    """A lab up with labgen as its host side, on quick.yaml's plan: labgen sends FULL_PPS per port at full
    speed and keeps a schedule up to ``paced_pps``; the lab forwards ``ndr_pps`` per port and loses the
    excess. LabMeasurer.attempt is planted (``planted_attempt``): no process runs."""

    FULL_PPS = 4_000_000.0

    def __init__(self, ndr_pps: float = NDR_PPS, paced_pps: float = 2_100_000.0):
        from types import SimpleNamespace

        from labctl.lab.plan import derive
        from labctl.profile.load import load_profile
        from tests.conftest import DOMAINS

        self.plan = derive(load_profile(DOMAINS / "quick.yaml", cpus=frozenset({0, 1})).profile)
        self.ndr_pps, self.paced_pps = ndr_pps, paced_pps
        self.generator = SimpleNamespace(
            run_trial=lambda _spec: SimpleNamespace(achieved_rate_pps=PlantedPacedLab.FULL_PPS))
        self.paced = SimpleNamespace(spec=lambda rate, duration, warmup: (rate, duration, warmup))


def planted_attempt(self, duration_s, load_pps, role, attempt=0):
    from types import SimpleNamespace

    lab = self.lab
    ports = len(lab.plan.nics)
    offered = int(load_pps * duration_s) * ports
    loss = int(round(offered * (1 - min(load_pps, lab.ndr_pps) / load_pps)))
    return SimpleNamespace(valid=load_pps <= lab.paced_pps, loss_count=loss, unsent=0, offered=offered,
                           window_s=duration_s, loss_ratio=loss / max(offered, 1)), None


def _find(lab, calibrations, settings=SETTINGS):
    from labctl.measure.ndr import find_ndr
    from labctl.results.record import TrialRecord

    return find_ndr(lab, TrialRecord(config={}), settings, lambda _r: None, latency=False, calibrations=calibrations)


def test_a_run_calibrates_once_per_host_side(monkeypatch):
    """The second search on the same host side reuses the calibrated maximum: no calibration trials."""
    from labctl.measure.ndr import LabMeasurer

    monkeypatch.setattr(LabMeasurer, "attempt", planted_attempt)
    calibrations: dict = {}
    first = _find(PlantedPacedLab(), calibrations)
    second = _find(PlantedPacedLab(), calibrations)  # another lab instance (embedded: a lab per trial)
    assert first.calibration_trials == 7 and second.calibration_trials == 0 and len(calibrations) == 1
    assert second.max_load_mpps == first.max_load_mpps
    for result in (first, second):
        assert abs(result.ndr.mpps / (NDR_PPS * PORTS / 1e6) - 1) <= 2 * SETTINGS.precision
        assert not any("maximum load" in w for w in result.warnings)
    # another frame size is another host side: calibrated again
    other = PlantedPacedLab()
    other.plan = replace_generator(other.plan, frame_size=1518)
    assert _find(other, calibrations).calibration_trials == 7 and len(calibrations) == 2


def replace_generator(plan, **changes):
    from dataclasses import replace

    return replace(plan, generator=replace(plan.generator, **changes))


def test_a_bound_at_a_reused_maximum_calibrates_again_and_searches_up_to_the_new_one(monkeypatch):
    """A maximum calibrated earlier (here planted at 300 kpps per port) capped a lab that forwards 400
    kpps: the search calibrates again (labgen now paces 2.08 Mpps), searches that goal again up to the new
    maximum, finds the lab's NDR, and keeps the new maximum for the run."""
    from labctl.measure.calibration import calibration_key
    from labctl.measure.ndr import LabMeasurer

    monkeypatch.setattr(LabMeasurer, "attempt", planted_attempt)
    lab = PlantedPacedLab()
    key = calibration_key(lab.plan, SETTINGS.initial_trial_s)
    calibrations = {key: (300_000.0, [])}
    result = _find(lab, calibrations)
    assert result.calibration_trials == 7 and calibrations[key][0] == pytest.approx(0.98 * 0.9 ** 6 * 4_000_000.0)
    assert abs(result.ndr.mpps / (NDR_PPS * PORTS / 1e6) - 1) <= 2 * SETTINGS.precision
    assert abs(result.pdr.mpps / (PDR_PPS * PORTS / 1e6) - 1) <= 2 * SETTINGS.precision
    assert result.max_load_mpps == pytest.approx(calibrations[key][0] * PORTS / 1e6, rel=1e-5)
    assert not any("at the search's maximum load" in w for w in result.warnings)


def test_a_lab_above_what_labgen_paces_calibrates_again_but_keeps_the_bound_and_the_warning(monkeypatch):
    """The lab forwards more than labgen can pace: the first search's bound is at its fresh maximum (a
    warning, no second calibration); the next search reuses it, finds the bound there again, calibrates
    again, and with no higher maximum keeps the bound and the warning."""
    from labctl.measure.ndr import LabMeasurer

    monkeypatch.setattr(LabMeasurer, "attempt", planted_attempt)
    calibrations: dict = {}
    first = _find(PlantedPacedLab(ndr_pps=3_000_000.0), calibrations)
    second = _find(PlantedPacedLab(ndr_pps=3_000_000.0), calibrations)
    assert first.calibration_trials == 7 and second.calibration_trials == 7
    for result in (first, second):
        assert any("NDR is at the search's maximum load" in w for w in result.warnings)
        assert result.max_load_mpps == first.max_load_mpps
