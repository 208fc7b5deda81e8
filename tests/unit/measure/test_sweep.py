"""Sweeps: the interleaved plan, per-trial commits, resume bookkeeping, the steadiness probe before them."""

from __future__ import annotations

import random

import pytest

from labctl.analysis.report import build_report
from labctl.measure.sweep import build_plan, run_sweep
from labctl.profile.load import load_profile
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})


def test_plan_interleaves_repeats():
    plan = build_plan({"a": [1, 2], "b": ["x", "y"]}, repeat=3)
    assert len(plan) == 12 and [p["seq"] for p in plan] == list(range(12))
    configs = [tuple(p["config"].values()) for p in plan]
    assert configs[:4] == configs[4:8] == configs[8:]  # A B C D A B C D ..., never A A A
    assert [p["repeat_index"] for p in plan] == [0] * 4 + [1] * 4 + [2] * 4


def fake_runner(rates: dict[int, float], calls: list, fail_at: int | None = None):
    def run(loaded, repeat_index, on_event=None, session=None):
        calls.append((loaded.profile.guest.nics[0].rx_queue_size, loaded.profile.workload.burst, repeat_index))
        if fail_at is not None and len(calls) == fail_at:
            raise KeyboardInterrupt
        from labctl.profile.knobs import flatten

        rate = rates[loaded.profile.guest.nics[0].rx_queue_size] * (1 + random.uniform(-0.02, 0.02))
        return TrialRecord(config=flatten(loaded.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=rate, loss_ratio=0.01), env=Environment(accel="none"))
    return run


def test_sweep_stores_every_trial_and_resumes_after_interrupt(tmp_path):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    calls: list = []
    with pytest.raises(KeyboardInterrupt):
        run_sweep(loaded, db, repeat=3, runner=fake_runner({256: 5.0, 1024: 6.0}, calls, fail_at=5))
    with Store(db) as store:
        run = store.runs()[-1]
        assert run["status"] == "aborted" and run["ok"] == 4 and run["aborted"] == 1
    resumed: list = []
    result = run_sweep(loaded, db, resume=True, runner=fake_runner({256: 5.0, 1024: 6.0}, resumed))
    assert len(resumed) == 8 and result.ok == 8  # the aborted 5th and the 7 never run
    with Store(db) as store:
        assert len(store.trials(result.run_id)) == 12
        assert store.runs()[-1]["status"] == "finished"
    assert calls[4] == resumed[0]  # the interrupted configuration is the first one run again


def test_resume_without_unfinished_run(tmp_path):
    from labctl.errors import UserError

    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    with pytest.raises(UserError, match="no unfinished run"):
        run_sweep(loaded, tmp_path / "s.db", resume=True, runner=fake_runner({}, []))


@pytest.mark.parametrize("fast_then_slow, warned", [(True, True), (False, False)])
def test_sweep_steadiness_probe_warns_every_trial_of_an_unsteady_host(tmp_path, monkeypatch, fast_then_slow, warned):
    from advisor.recommend import advise
    from labctl.host import steadiness
    from labctl.host.steadiness import UNSTEADY_WARNING, Sample, summarise

    def fake_probe(seconds, cpus=None, interval_s=None):
        rates = [1000.0 if (i < 10 or not fast_then_slow) else 500.0 for i in range(20)]
        return summarise([Sample(t=0.5 * i, cpu=0, cpu_rate=r, copy_gbps=30.0) for i, r in enumerate(rates)], seconds, 0.5)

    monkeypatch.setattr(steadiness, "probe", fake_probe)
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    seen = []
    result = run_sweep(loaded, db, repeat=3, runner=fake_runner({256: 5.0, 1024: 6.0}, []), steadiness_s=10,
                       on_event=lambda event: event.kind == "steadiness" and seen.append(event.data))
    assert [s.verdict for s in seen] == ["unsteady" if warned else "steady"]
    with Store(db) as store:
        trials = store.trials(result.run_id)
    assert len(trials) == 12
    assert all(any(w.startswith(UNSTEADY_WARNING) and "spread 100%" in w for w in t.warnings) == warned for t in trials)
    host_warnings = [w for w in advise(trials).warnings if "unsteady just before their sweep" in w]
    assert len(host_warnings) == (1 if warned else 0)
    if warned:
        assert host_warnings[0].startswith("12 of 12 trials")
    notes = [n for n in build_report(trials).notes if "measured unsteady" in n]
    assert notes == (["12 of 12 trials ran on a host measured unsteady before their sweep (integer-loop rate "
                      "spread 100%, memory copy 0% over 10 s): read every delta "
                      "against that"] if warned else [])


def test_sweep_bad_steadiness_creates_nothing(tmp_path, cli):
    db = tmp_path / "s.db"
    code, out, err = cli("sweep", str(DOMAINS / "quick.yaml"), "--db", str(db), "--steadiness", "0.2")
    assert code == 2 and err.strip() == "steadiness 0.2 s: allowed 1 to 600 seconds" and not db.exists()


def test_sweep_interrupted_while_probing_leaves_no_store(tmp_path, monkeypatch):
    from labctl.host import steadiness

    def interrupted(seconds, cpus=None, interval_s=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(steadiness, "probe", interrupted)
    db = tmp_path / "s.db"
    calls: list = []
    with pytest.raises(KeyboardInterrupt):
        run_sweep(load_profile(DOMAINS / "quick.yaml", cpus=CPUS), db, runner=fake_runner({}, calls), steadiness_s=5)
    assert not db.exists() and calls == []


@pytest.mark.parametrize("make_db, message", [(lambda p: p.write_text("not a store"), "not a labctl result store"),
                                              (lambda p: None, "is not a writable directory")])
def test_sweep_with_steadiness_checks_the_db_before_probing(tmp_path, monkeypatch, make_db, message):
    from labctl.errors import UserError
    from labctl.host import steadiness

    probed: list = []
    monkeypatch.setattr(steadiness, "probe", lambda *a, **k: probed.append(a))
    db = tmp_path / "store.db" if message.startswith("not") else tmp_path / "missing-dir" / "store.db"
    make_db(db)
    with pytest.raises(UserError, match=message):
        run_sweep(load_profile(DOMAINS / "quick.yaml", cpus=CPUS), db, runner=fake_runner({}, []), steadiness_s=5)
    assert probed == [] and not (tmp_path / "missing-dir").exists()


def test_an_ndr_sweep_counts_searches_not_their_measurements(tmp_path, monkeypatch):
    """`labctl sweep --metric ndr` showed "258/6": every search measurement was counted as a done plan
    entry. Measurements are stored (and reported, done unchanged); done, ok and failed count searches."""
    import labctl.measure.sweep as sweep_module
    from labctl.measure.ndr import SearchSettings
    from labctl.profile.knobs import flatten

    def fake_search(loaded, settings, labs, on_record, on_event=None, repeat_index=0):
        config = flatten(loaded.profile.model_dump())
        for _ in range(5):
            on_record(TrialRecord(config=config, repeat_index=repeat_index, metrics=Metrics(mpps=1.0),
                                  details={"role": "search"}))
        return TrialRecord(config=config, repeat_index=repeat_index, metrics=Metrics(ndr_mpps=1.0),
                           details={"role": "ndr"}), None

    monkeypatch.setattr(sweep_module, "ndr_trial", fake_search)
    events = []
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    db = tmp_path / "s.db"
    result = run_sweep(loaded, db, repeat=3, search=SearchSettings(), on_event=events.append)
    planned = 3 * len(build_plan(loaded.profile.sweep, 1))
    trials = [e for e in events if e.kind == "trial"]
    assert len(trials) == planned * 6
    assert all(e.total == planned and e.done <= planned for e in trials)
    assert [e.done for e in trials if (e.data or {}).get("measurement") is None] == list(range(1, planned + 1))
    assert (result.ok, result.failed) == (planned, 0)
    with Store(db) as store:
        assert len(store.trials(result.run_id, status=None)) == planned * 6
        assert store.missing_plan(result.run_id) == [] and store.run(result.run_id)["status"] == "finished"
