"""Tests of the adaptive search (advisor.search): replay against planted grids, reproducibility,
budget and stopping rules, failures, and the benchmark's JSON."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests import datasets
from advisor.search import ReplayEvaluator, replay, space_from_profile, tune
from labctl.errors import UserError
from labctl.profile.load import load_profile
from labctl.results.interchange import record_to_line
from labctl.results.record import Metrics, TrialRecord

ROOT = Path(__file__).resolve().parents[3]
QUEUES = "guest.nics.*.queues"
RX = "guest.nics.*.rx_queue_size"


@pytest.fixture(scope="module")
def grid() -> list[TrialRecord]:
    return datasets.search_grid(seed=0)


def flat(config: dict) -> dict:
    """A search point (knob -> value) as the flattened config :func:`datasets.search_true_median` reads."""
    out = {"guest.nics.0.queues": config[QUEUES], "guest.nics.0.rx_queue_size": config[RX],
           "workload.burst": config["workload.burst"], "guest.pinning.vcpus.0": "1"}
    out.update(config["guest.pinning"])
    return out


def test_replay_space_is_the_recorded_grid(grid):
    evaluator = ReplayEvaluator(grid, seed=0)
    assert evaluator.space == {
        QUEUES: [1, 2, 4], RX: [256, 512, 1024], "guest.pinning": [{"guest.pinning.vhost": "0"},
                                                                   {"guest.pinning.vhost": "1"}],
        "workload.burst": [16, 32, 64],
    }
    assert evaluator.grid_trials == 216 and len(evaluator.grid_medians()) == 54


def test_replay_draws_the_recorded_repeats_of_the_chosen_configuration(grid):
    evaluator = ReplayEvaluator(grid, seed=3)
    config = {QUEUES: 2, RX: 1024, "guest.pinning": {"guest.pinning.vhost": "0"}, "workload.burst": 64}
    recorded = sorted(r.metrics.mpps for r in grid if evaluator.point(r) == config)
    assert len(recorded) == 4
    drawn = [evaluator(config) for _ in range(8)]
    # every draw is a recorded repeat, and each repeat comes up once before any comes up twice
    assert sorted(drawn[:4]) == recorded and sorted(drawn[4:]) == recorded
    assert evaluator({**config, QUEUES: 8}) is None  # never recorded


def test_replay_finds_a_best_configuration_within_a_quarter_of_the_grid(grid):
    budget = len(grid) // 4
    truth = {json.dumps(c, sort_keys=True): datasets.search_true_median(flat(c))
             for c in map(json.loads, ReplayEvaluator(grid).grid_medians())}
    planted_best = max(truth.values())
    for seed in range(3):
        result = replay(grid, budget, seed)
        assert result.trials_used <= budget
        chosen = datasets.search_true_median(flat(result.best_config))
        assert chosen >= 0.97 * planted_best, (seed, result.best_config)
        assert result.best_config["guest.pinning"] == {"guest.pinning.vhost": "0"}
        assert result.best_config[QUEUES] == 2


def test_replay_is_reproducible_for_a_seed_and_differs_between_seeds(grid):
    a = replay(grid, 30, seed=5).to_dict()
    b = replay(grid, 30, seed=5).to_dict()
    c = replay(grid, 30, seed=6).to_dict()
    assert a == b
    assert a["history"] != c["history"]


def test_result_json_shape(grid):
    data = replay(grid, 12, seed=1).to_dict()
    assert set(data) == {"best_config", "trials_used", "history"}
    assert data["trials_used"] == len(data["history"]) == 12
    assert [h["step"] for h in data["history"]] == list(range(1, 13))
    assert all(set(h) == {"step", "config", "mpps"} for h in data["history"])
    json.dumps(data)


def test_replay_reads_a_jsonl_export(tmp_path, grid):
    path = tmp_path / "grid.jsonl"
    path.write_text("".join(json.dumps(record_to_line(r)) + "\n" for r in grid), encoding="utf-8")
    assert replay(path, 20, seed=2).to_dict() == replay(grid, 20, seed=2).to_dict()


def test_search_stops_early_when_the_best_is_clear():
    space = {"a": [0, 1, 2, 3], "b": [0, 1, 2]}
    calls = Counter()

    def evaluate(config):
        calls[json.dumps(config, sort_keys=True)] += 1
        wobble = 0.01 * (calls[json.dumps(config, sort_keys=True)] % 3)  # tiny, repeatable noise
        return 20.0 + wobble if config == {"a": 3, "b": 2} else 10.0 + config["a"] + config["b"] + wobble

    result = tune(space, evaluate, budget=60, seed=0)
    assert result.best_config == {"a": 3, "b": 2}
    assert result.trials_used < 60
    assert result.stop_reason in ("best is clear", "race decided", "exploration converged")


def test_failed_trials_count_against_the_budget_and_never_win():
    space = {"a": [0, 1, 2], "b": [0, 1]}

    def evaluate(config):
        if config["a"] == 2:
            return None  # this configuration always fails
        return 10.0 + config["a"] + 0.5 * config["b"]

    calls = []

    def counted(config):
        calls.append(dict(config))
        return evaluate(config)

    result = tune(space, counted, budget=12, seed=1)
    assert result.best_config["a"] != 2
    assert result.trials_used == len(calls) <= 12  # every evaluation, failed ones included, is spent
    failed = [step for step in result.history if step.config["a"] == 2]
    assert all(step.mpps is None for step in failed)
    assert len(failed) == sum(1 for c in calls if c["a"] == 2)


def test_live_evaluate_may_return_trial_records():
    space = {"workload.burst": [32, 64]}

    def evaluate(config):
        mpps = 12.0 if config["workload.burst"] == 64 else 10.0
        return TrialRecord(config=config, metrics=Metrics(mpps=mpps))

    result = tune(space, evaluate, budget=6, seed=0)
    assert result.best_config == {"workload.burst": 64}
    assert len(result.records) == result.trials_used


@pytest.mark.parametrize("budget", [1, 2, 3, 5])
def test_tiny_budgets(budget, grid):
    result = replay(grid, budget, seed=0)
    assert result.trials_used <= budget
    assert set(result.best_config) == set(ReplayEvaluator(grid).space)


def test_bad_inputs_are_user_errors(grid):
    with pytest.raises(UserError):
        tune({"a": [1, 2]}, lambda c: 1.0, budget=0)
    with pytest.raises(UserError):
        tune({}, lambda c: 1.0, budget=5)
    mixed = datasets.queue_rate() + [r.model_copy(update={"config": {**r.config, "workload.packet_size": 1518}})
                                     for r in datasets.queue_rate()]
    with pytest.raises(UserError, match="workload.packet_size"):
        ReplayEvaluator(mixed)
    with pytest.raises(UserError):
        ReplayEvaluator([])


def test_space_from_profile():
    profile = load_profile(ROOT / "domains" / "quick.yaml", cpus=frozenset({0, 1})).profile
    assert space_from_profile(profile) == {RX: [256, 1024], "workload.burst": [32, 64]}
    with pytest.raises(UserError):
        space_from_profile(load_profile(ROOT / "domains" / "tap-kernel.yaml", cpus=frozenset({0, 1})).profile)


def _benchmark():
    import importlib.util

    spec = importlib.util.spec_from_file_location("search_efficiency", ROOT / "benchmarks" / "search_efficiency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_prints_one_json_document(tmp_path, capsys):
    bench = _benchmark()
    jsonl = tmp_path / "grid.jsonl"
    jsonl.write_text("".join(json.dumps(record_to_line(r)) + "\n" for r in datasets.ring_loss()), encoding="utf-8")
    assert bench.main([str(jsonl), "--seeds", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "recorded" and data["seeds"] == 2 and len(data["runs"]) == 2
    assert {"share_of_grid_max", "gap_pct_median", "gap_pct_max", "fraction_within_2pct"} <= set(data["summary"])
    assert data["budget"] == 4 and data["grid"]["trials"] == 16
    assert bench.main(["--synthetic", "--seeds", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "synthetic" and data["grid"]["configurations"] == 54


def test_benchmark_names_an_unreadable_file(tmp_path, capsys):
    assert _benchmark().main([str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("search_efficiency: ") and "missing.jsonl" in err and "Traceback" not in err


def test_recorded_grid_ships_with_the_benchmark():
    from labctl.results.interchange import read_jsonl

    records = read_jsonl(ROOT / "benchmarks" / "data" / "embedded-grid.jsonl")
    configs = {tuple(sorted((k, r.config[k]) for k in ("guest.nics.0.rx_queue_size", "workload.burst",
                                                       "guest.nics.0.queues"))) for r in records}
    assert len(records) == 72 and len(configs) == 24 and all(r.status == "ok" for r in records)
    assert all(r.config["guest.hugepages"] is True and r.env.hugepages for r in records)
