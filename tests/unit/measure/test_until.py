"""``sweep --until decided``: blocks alternating A B / B A, rounds only for open comparisons, stops when all
are decided or at the budget with what each open one would need."""

from __future__ import annotations

import random

import pytest

from labctl.analysis import course as words
from labctl.errors import KnobError
from labctl.measure import until as u
from labctl.measure.sweep import run_sweep
from labctl.profile.load import load_profile
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})


def runner(rates, noise, calls, rng):
    def run(loaded, repeat_index, on_event=None, session=None):
        from labctl.profile.knobs import flatten

        rx = loaded.profile.guest.nics[0].rx_queue_size
        calls.append((rx, loaded.profile.workload.burst))
        rate = rates[rx] * (1 + rng.gauss(0, noise))
        return TrialRecord(config=flatten(loaded.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=rate, loss_ratio=0.0), env=Environment(accel="none"))
    return run


@pytest.mark.parametrize("text, budget", [("40", u.Budget(trials=40)), ("12m", u.Budget(seconds=720.0)),
                                          ("90s", u.Budget(seconds=90.0)), ("1.5h", u.Budget(seconds=5400.0))])
def test_budget_parses(text, budget):
    assert u.parse_budget(text) == budget


@pytest.mark.parametrize("until, budget, match", [
    ("done", "40", "--until done: not a stopping rule"), ("decided", None, "--budget: required"),
    (None, "40", "--budget 40: only with --until"), ("decided", "12 minutes", "--budget 12 minutes: not a trial"),
    ("decided", "0", "out of range")])
def test_bad_until_or_budget_is_one_line(until, budget, match):
    with pytest.raises(KnobError, match=match):
        u.check_until(until, budget)


def test_blocks_alternate_and_randomize_reproducibly():
    configs = [{"a": 1}, {"a": 2}]
    assert [e["config"]["a"] for e in u.block_entries(configs, 0, 0, "interleaved", None)] == [1, 2]
    assert [e["config"]["a"] for e in u.block_entries(configs, 1, 2, "interleaved", None)] == [2, 1]
    one = u.block_entries(configs * 3, 0, 0, "random", random.Random(7))
    two = u.block_entries(configs * 3, 0, 0, "random", random.Random(7))
    assert one == two and {e["block"] for e in one} == {0}


def test_only_open_comparisons_get_more_blocks():
    configs = [{"a": a, "b": b} for a in (1, 2, 3) for b in ("x", "y")]
    open_ = [u.Pairing("a", 1, 3)]
    assert [c["a"] for c in u.needed_configs(configs, open_)] == [1, 1, 3, 3]


def test_sweep_decides_planted_effect_and_aa_pair(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    calls: list = []
    notes = []
    result = run_sweep(loaded, db, runner=runner({256: 5.0, 1024: 6.0}, 0.01, calls, random.Random(3)),
                       until="decided", budget="80", on_event=lambda e: notes.append(e) if e.kind == "note" else None)
    verdicts = {c["knob"]: c for c in result.until["comparisons"]}
    assert verdicts["guest.nics.*.rx_queue_size"]["verdict"] == "better"
    assert verdicts["workload.burst"]["verdict"] == "equivalent"
    assert result.until["stop"] == "decided" and len(calls) < 80  # stopped early, inside the budget
    assert all(0 < c["confidence"] < 1 for c in verdicts.values())
    assert any("open" in n.message for n in notes) and isinstance(notes[-1].data, u.Look)
    with Store(db) as store:
        run = store.run(result.run_id)
        trials = store.trials(result.run_id)
    assert run["info"]["until"]["stop"] == "decided" and run["info"]["blocked"] is True
    assert len(run["plan"]) == len(trials) == len(calls)
    first = [t.config["guest.nics.0.rx_queue_size"] for t in trials if t.details["block"] == 0]
    second = [t.config["guest.nics.0.rx_queue_size"] for t in trials if t.details["block"] == 1]
    assert first == list(reversed(second))  # A B, then B A


def test_sweep_stops_at_the_budget_saying_what_it_would_take(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    calls: list = []
    # a 6% effect at 30% noise against a 5% threshold: no budget of 24 trials decides it
    result = run_sweep(loaded, tmp_path / "s.db", runner=runner({256: 5.0, 1024: 5.3}, 0.3, calls, random.Random(5)),
                       until="decided", budget="24", futility_pct=0)
    assert len(calls) == 24 and result.until["stop"] == "budget" and result.until["futility"] == 0.0
    open_ = [c for c in result.until["comparisons"] if c["verdict"] == "open"]
    assert open_ and all("needed_trials" in c and not c["out_of_reach"] for c in open_)
    assert all("more trials" in words.describe_open(c) or "no practical" in words.describe_open(c) for c in open_)


def test_a_comparison_out_of_reach_of_the_budget_is_given_up_early(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    calls: list = []
    # the same hopeless comparison with the default futility: its chance of a verdict by the 200th trial
    # falls below 10% and it is given up, saying so, long before the budget
    result = run_sweep(loaded, tmp_path / "s.db", runner=runner({256: 5.0, 1024: 5.3}, 0.3, calls, random.Random(5)),
                       until="decided", budget="200")
    course = result.until
    assert course["stop"] == "out of reach" and len(calls) < 200 and course["futility"] == u.FUTILITY
    given_up = [c for c in course["comparisons"] if c["verdict"] == "open"]
    assert given_up and all(c["out_of_reach"] and c["chance"] < u.FUTILITY for c in given_up)
    assert all("given up after" in words.describe(c) and "chance of a verdict" in words.describe(c) for c in given_up)
    assert "out of reach of the budget (200 trials; under 10% chance" in words.stop_text(course)
    with Store(tmp_path / "s.db") as store:  # every trial measured is stored, none planned and left
        assert len(store.trials(result.run_id)) == len(calls)


@pytest.mark.parametrize("pct", [-1.0, 100.0, float("nan")])
def test_bad_futility_is_one_line(tmp_path, pct):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    with pytest.raises(KnobError, match=r"--futility .*allowed: 0 <= PCT < 100"):
        run_sweep(loaded, tmp_path / "s.db", runner=runner({}, 0, [], random.Random()), until="decided", budget="40",
                  futility_pct=pct)
    with pytest.raises(KnobError, match="--futility 5: only with --until decided"):
        run_sweep(loaded, tmp_path / "s.db", runner=runner({}, 0, [], random.Random()), futility_pct=5)
    assert not (tmp_path / "s.db").exists()


def test_budget_below_the_first_round_is_refused_before_anything_runs(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    with pytest.raises(KnobError, match="--budget 5: less than the first round's 12 trials"):
        run_sweep(loaded, tmp_path / "s.db", runner=runner({}, 0, [], random.Random()), until="decided", budget="5")
    assert not (tmp_path / "s.db").exists()


def test_zero_rates_are_refused():
    recs = [TrialRecord(config={"k": v, "o": 1}, metrics=Metrics(mpps=0.0), details={"block": b})
            for b in range(4) for v in (1, 2)]
    diffs, reason = u.paired(recs, u.Pairing("k", 1, 2), "mpps")
    assert not diffs and reason.startswith("zero rates")


def test_advise_and_compare_name_the_verdicts_trials_and_confidence(tmp_path):
    from typer.testing import CliRunner

    from labctl.cli.app import app

    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    result = run_sweep(loaded, db, runner=runner({256: 5.0, 1024: 6.0}, 0.01, [], random.Random(3)),
                       until="decided", budget="80")
    advised = CliRunner().invoke(app, ["advise", "--db", str(db)])
    assert advised.exit_code == 0, advised.output
    assert f"until decided (run {result.run_id}): every comparison decided" in advised.output
    assert "guest.nics.*.rx_queue_size: 1024 vs 256: better" in advised.output
    assert "workload.burst: 64 vs 32: equivalent" in advised.output and "confidence 9" in advised.output
    compared = CliRunner().invoke(app, ["compare", "--db", str(db), "--run", str(result.run_id), "--by",
                                        "workload.burst", "--baseline", "32"])
    assert "workload.burst: 64 vs 32: equivalent" in compared.output
    assert "rx_queue_size: 1024 vs 256" not in compared.output


def test_builds_are_comparisons_against_the_baseline_build(tmp_path):
    """``build: [base, patched]`` with --until decided: the patched build is judged against the first (the
    baseline) build through the same blocks and verdicts as any knob; the builds alternate within blocks."""
    import yaml

    from labctl.profile.knobs import flatten

    data = yaml.safe_load((DOMAINS / "builds.yaml").read_text())
    data["sweep"] = {"build": ["base", "patched"], "workload.burst": [32, 64]}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    loaded = load_profile(path, cpus=CPUS)
    rng, seen = random.Random(5), []

    def run(trial, repeat_index, on_event=None, session=None):
        seen.append(trial.profile.build)
        rate = (4.0 if trial.profile.build == "patched" else 5.0) * (1 + rng.gauss(0, 0.01))
        return TrialRecord(config=flatten(trial.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=rate, loss_ratio=0.0), env=Environment(accel="none"))

    result = run_sweep(loaded, tmp_path / "s.db", runner=run, until="decided", budget="64")
    verdicts = {c["knob"]: c for c in result.until["comparisons"]}
    assert (verdicts["build"]["baseline"], verdicts["build"]["candidate"]) == ("base", "patched")
    assert verdicts["build"]["verdict"] == "worse" and verdicts["build"]["change_pct"] < -15
    assert verdicts["workload.burst"]["verdict"] == "equivalent"
    assert seen[:4] == ["base", "patched", "base", "patched"]  # build varies fastest within a block
    assert result.until["stop"] == "decided" and len(seen) < 64


def test_blocks_restart_the_lab_once_per_block_on_the_embedded_lab_too(tmp_path):
    """A domain knob (guest.memory_mib restarts the embedded lab) varies slowest inside a block, and the
    reversed next block starts where the last ended: one change of it per block, not one per trial."""
    import yaml

    data = yaml.safe_load((DOMAINS / "quick.yaml").read_text())
    data["sweep"] = {"workload.burst": [32, 64], "guest.memory_mib": [512, 1024]}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    loaded = load_profile(path, cpus=CPUS)
    memory = []

    def run(trial, repeat_index, on_event=None, session=None):
        from labctl.profile.knobs import flatten

        memory.append(trial.profile.guest.memory_mib)
        return TrialRecord(config=flatten(trial.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=5.0, loss_ratio=0.0), env=Environment(accel="none"))

    run_sweep(loaded, tmp_path / "s.db", runner=run, until="decided", budget="12")
    changes = sum(a != b for a, b in zip(memory, memory[1:]))
    assert len(memory) == 12 and changes == 3  # 3 blocks of 4: once inside each block, never between


def test_a_comparison_decided_early_keeps_the_trials_it_was_decided_on(tmp_path):
    """A planted 60% effect is decided at the first look; the A/A knob goes on (a noisier pair). The
    decided one reports the trials of its own deciding look, not the run's total at the end."""
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    calls: list = []
    result = run_sweep(loaded, tmp_path / "s.db", runner=runner({256: 5.0, 1024: 8.0}, 0.08, calls, random.Random(11)),
                       until="decided", budget="60")
    verdicts = {c["knob"]: c for c in result.until["comparisons"]}
    rings = verdicts["guest.nics.*.rx_queue_size"]
    assert rings["verdict"] == "better" and rings["looks"] == 1
    assert result.until["looks"] > 1 and rings["trials"] < len(calls)  # the other comparison went on
    assert rings["trials"] == 12  # the first round: 3 blocks of the 4 configurations, both ring values in each


def test_report_prints_the_within_block_verdicts_and_bad_futility_exits_2(tmp_path, cli):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    run_sweep(loaded, db, runner=runner({256: 5.0, 1024: 6.0}, 0.01, [], random.Random(3)), until="decided",
              budget="24")
    code, out, err = cli("report", "--db", str(db))
    assert code == 0, err
    assert "until decided (run 1): every comparison decided" in out
    assert "guest.nics.*.rx_queue_size: 1024 vs 256: better" in out and "workload.burst: 64 vs 32: equivalent" in out
    code, out, err = cli("sweep", str(DOMAINS / "quick.yaml"), "--db", str(tmp_path / "bad.db"), "--until", "decided",
                         "--budget", "40", "--futility", "200")
    assert code == 2 and "--futility 200: out of range (allowed: 0 <= PCT < 100" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "bad.db").exists()


def test_a_round_where_every_trial_fails_ends_the_sweep(tmp_path):
    # a lab that cannot come up (libvirtd down): a duration budget must not spin through instant failures
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    calls: list = []

    def broken(loaded, repeat_index, on_event=None, session=None):
        from labctl.profile.knobs import flatten

        calls.append(repeat_index)
        return TrialRecord(config=flatten(loaded.profile.model_dump()), repeat_index=repeat_index, status="failed",
                           error="cannot connect to qemu:///system", env=Environment(accel="none"))

    result = run_sweep(loaded, tmp_path / "s.db", runner=broken, until="decided", budget="10m")
    assert result.until["stop"] == "failed" and len(calls) == 12 and result.failed == 12  # the first round only
    assert "every trial of its last round failed" in words.stop_text(result.until)
