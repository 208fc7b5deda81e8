"""Sweeps (plan, interleaving, resume bookkeeping), reports and plots on recorded data."""

from __future__ import annotations

import json
import random

import pytest

from labctl.profile.load import load_profile
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.analysis.renderers import render
from labctl.analysis.report import build_report
from labctl.results.store import Store
from labctl.measure.sweep import build_plan, run_sweep
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})


def test_plan_interleaves_repeats():
    plan = build_plan({"a": [1, 2], "b": ["x", "y"]}, repeat=3)
    assert len(plan) == 12 and [p["seq"] for p in plan] == list(range(12))
    configs = [tuple(p["config"].values()) for p in plan]
    assert configs[:4] == configs[4:8] == configs[8:]  # A B C D A B C D ..., never A A A
    assert [p["repeat_index"] for p in plan] == [0] * 4 + [1] * 4 + [2] * 4


def fake_runner(rates: dict[int, float], calls: list, fail_at: int | None = None):
    def run(loaded, repeat_index, on_event=None):
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


def records(values: dict[tuple, list[float]], accel="none", shared=False) -> list[TrialRecord]:
    out, next_id = [], 1
    for (ring, burst), rates in values.items():
        for i, rate in enumerate(rates):
            out.append(TrialRecord(id=next_id, config={"guest.nics.0.rx_queue_size": ring, "guest.nics.1.rx_queue_size": ring,
                                                       "workload.burst": burst, "workload.mode": "io"},
                                   metrics=Metrics(mpps=rate, loss_ratio=0.001 * (2 if ring == 256 else 1)),
                                   env=Environment(accel=accel, shared_cores=shared), repeat_index=i))
            next_id += 1
    return out


def test_report_groups_compares_and_notes():
    data = records({(256, 32): [10.0, 10.2, 9.9, 10.1, 10.0], (1024, 32): [11.6, 11.7, 11.5, 11.8, 11.6]},
                   accel="tcg")
    report = build_report(data, run_id=7)
    assert report.knobs == ["guest.nics.*.rx_queue_size"] and report.by == "guest.nics.*.rx_queue_size"
    base, tuned = report.rows
    assert base.median == pytest.approx(10.0) and base.n == 5 and base.delta is None
    assert tuned.delta.startswith("+16.") and tuned.verdict == "better"
    assert "TCG" in tuned.notes and any("TCG" in n for n in report.notes)
    table = render(report, "table")
    assert "median mpps" in table and "+16." in table and "better" in table
    md = render(report, "md")
    assert md.splitlines()[0].startswith("| guest.nics.*.rx_queue_size |")
    csv_text = render(report, "csv")
    assert csv_text.splitlines()[0].startswith("guest.nics.*.rx_queue_size,median_mpps,ci_low")
    assert json.loads(render(report, "json"))["rows"][1]["verdict"] == "better"


def test_report_flags_two_bands_and_variance():
    data = records({(256, 32): [8.6, 9.1, 9.8, 15.3, 16.0, 16.8], (1024, 32): [9.0, 12.0, 15.0, 10.0, 14.0, 9.5]},
                   shared=True)
    rows = build_report(data).rows
    assert any("two bands" in n for n in rows[0].notes)
    assert rows[1].verdict == "inconclusive"
    assert any("high variance" in n for n in rows[1].notes) and "shared cores" in rows[1].notes


def test_report_by_knob_compares_within_strata():
    data = records({(256, 32): [10, 10.1, 9.9], (256, 64): [12, 12.1, 11.9],
                    (1024, 32): [10, 10.2, 9.8], (1024, 64): [10.1, 9.9, 10.0]})
    report = build_report(data, by="workload.burst")
    assert [r.knobs["workload.burst"] for r in report.rows] == [32, 64, 32, 64]
    assert report.rows[1].verdict == "better" and report.rows[3].verdict == "no difference"


def test_report_bad_by_and_empty():
    from labctl.errors import UserError

    with pytest.raises(UserError, match="allowed: guest.nics"):
        build_report(records({(256, 32): [1.0], (1024, 32): [1.0]}), by="workload.rxd")
    with pytest.raises(UserError, match="no successful trials"):
        build_report([])


def test_plot_png(tmp_path):
    from labctl.analysis.plot import plot_report

    data = records({(256, 32): [10, 10.1, 9.9], (256, 64): [12, 12.1, 11.9],
                    (1024, 32): [10, 10.2, 9.8], (1024, 64): [10.1, 9.9, 10.0]})
    out = plot_report(build_report(data, by="guest.nics.*.rx_queue_size"), tmp_path / "p.png")
    head = out.read_bytes()[:8]
    assert head == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_cli_report_plot_import_export(tmp_path, cli):
    from labctl.results.interchange import export_jsonl

    src = tmp_path / "src.db"
    with Store(src) as store:
        run_id = store.create_run("x", {}, [{"seq": i, "config": r.config, "repeat_index": 0}
                                             for i, r in enumerate(records({(256, 32): [10, 10.1, 9.9],
                                                                            (1024, 32): [11, 11.1, 10.9]}))])
        for i, record in enumerate(records({(256, 32): [10, 10.1, 9.9], (1024, 32): [11, 11.1, 10.9]})):
            record.id, record.run_id = None, run_id
            store.add_trial(record, i)
        export_jsonl(store, tmp_path / "t.jsonl", run_id)
    db = tmp_path / "dst.db"
    code, out, err = cli("import", str(tmp_path / "t.jsonl"), "--db", str(db))
    assert code == 0 and "imported 6 trials" in out
    code, out, _ = cli("report", "--db", str(db), "--format", "md")
    assert code == 0 and "better" in out
    code, out, _ = cli("plot", "--db", str(db), "--by", "guest.nics.*.rx_queue_size", "--out", str(tmp_path / "x.png"))
    assert code == 0 and (tmp_path / "x.png").exists()
    code, out, _ = cli("export", "--db", str(db), "--format", "csv")
    assert code == 0 and len(out.strip().splitlines()) == 7
    code, _, err = cli("report", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "no such result store" in err
    code, _, err = cli("report", "--db", str(db), "--format", "xml")
    assert code == 2 and "allowed: table, md, csv, json" in err
    code, _, err = cli("report", "--db", str(db), "--run", "99")
    assert code == 2 and "99" in err


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
    from labctl.host import steadiness
    from labctl.errors import UserError

    probed: list = []
    monkeypatch.setattr(steadiness, "probe", lambda *a, **k: probed.append(a))
    db = tmp_path / "store.db" if message.startswith("not") else tmp_path / "missing-dir" / "store.db"
    make_db(db)
    with pytest.raises(UserError, match=message):
        run_sweep(load_profile(DOMAINS / "quick.yaml", cpus=CPUS), db, runner=fake_runner({}, []), steadiness_s=5)
    assert probed == [] and not (tmp_path / "missing-dir").exists()
