"""A metric is named the same everywhere: the registry's aliases (ndr, pdr) are accepted by report, plot,
pivot, compare, advise, trend and the TUI's A/B, and a run of NDR/PDR searches is shown by its NDR."""

from __future__ import annotations

import pytest

from labctl import api
from labctl.analysis.report import build_reports
from labctl.errors import UserError
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store

ENV = Environment(host="lab1", accel="kvm", lab="embedded")


def _search_run(store: Store, name: str = "ndr-demo", scale: float = 1.0) -> int:
    """A sweep by --metric ndr: per ring size three searches, each with its measurements beside its record."""
    configs = [{"name": name, "guest.nics.0.rx_queue_size": ring} for ring in (256, 1024)]
    plan = [{"seq": i, "config": c, "repeat_index": r} for i, (r, c) in enumerate((r, c) for c in configs for r in range(3))]
    run = store.create_run(name, {}, plan, host="lab1")
    for entry in plan:
        ring = entry["config"]["guest.nics.0.rx_queue_size"]
        ndr = scale * (2.0 if ring == 256 else 3.0) * (1 + 0.01 * entry["repeat_index"])
        for role, load in (("calibration", 9.0), ("search", ndr * 1.1), ("search", ndr), ("latency", ndr / 2)):
            store.add_trial(TrialRecord(run_id=run, config=entry["config"], env=ENV, details={"role": role},
                                        metrics=Metrics(mpps=load, loss_ratio=0.0, latency_p50_us=12.0)))
        store.add_trial(TrialRecord(run_id=run, config=entry["config"], env=ENV, details={"role": "ndr"},
                                    repeat_index=entry["repeat_index"],
                                    metrics=Metrics(ndr_mpps=ndr, pdr_mpps=ndr * 1.05, latency_p50_us=11.0)),
                        entry["seq"])
    store.finish_run(run, "finished")
    return run


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "labctl.db"
    with Store(path) as store:
        _search_run(store)
    return path


def test_report_plot_and_pivot_take_the_aliases(db, tmp_path):
    assert api.report(db, metric="ndr").metric == "ndr_mpps"
    assert api.report(db, metric="pdr").metric == "pdr_mpps"
    assert api.report(db).metric == "ndr_mpps"  # what the run measured
    assert api.plot("guest.nics.*.rx_queue_size", tmp_path / "n.png", db, metric="ndr").exists()
    with pytest.raises(UserError, match=r"^--metric nrd: not a scalar metric \(allowed: mpps, .*ndr \(= ndr_mpps\), "
                                        r"pdr \(= pdr_mpps\)\)$"):
        api.report(db, metric="nrd")


def test_cli_report_takes_ndr(db, cli):
    code, out, err = cli("report", "--db", str(db), "--metric", "ndr", "--format", "json")
    assert code == 0, err
    assert '"metric": "ndr_mpps"' in out


def test_compare_trend_and_the_tuis_ab_take_the_aliases(db):
    with Store(db) as store:
        _search_run(store, scale=0.5)
    result = api.compare(db, "1", "2", "ndr")
    assert result.metric == "ndr_mpps"  # the searches' records compared, never their measurements
    assert sorted(i.baseline.median for i in result.items) == pytest.approx([2.02, 3.03])
    assert sorted(i.candidate.median for i in result.items) == pytest.approx([1.01, 1.515])
    assert api.trend(db, "ndr-demo", "pdr").metric == "pdr_mpps"
    assert api.trend(db, "ndr-demo").metric == "ndr_mpps"  # what the profile's runs measured
    _, records = api.trials(db, 1)
    ids = {ring: [r.id for r in records if r.config["guest.nics.0.rx_queue_size"] == ring] for ring in (256, 1024)}
    delta = api.compare_trials(db, ids[256], ids[1024], "ndr", run=1)
    assert delta.verdict == "better" and delta.change_pct == pytest.approx(50.0)


def test_advise_takes_the_aliases(db):
    advice = api.advise(db, metric="ndr")
    assert [r.metric for r in advice.recommendations] == ["ndr_mpps"]
    assert api.advise(db).recommendations[0].metric == "ndr_mpps"  # the default: what the run measured


def test_a_search_run_opens_on_its_ndr():
    """The TUI's Results table shows the first report api.reports gives: an NDR run's NDR, not the
    latency both the search's record and its measurements carry."""
    records = [TrialRecord(id=i + 1, config={"ring": ring}, details={"role": "ndr"},
                           metrics=Metrics(ndr_mpps=ring / 100 + i * 0.01, pdr_mpps=3.0, latency_p50_us=10.0))
               for i, ring in enumerate([256, 256, 256, 1024, 1024, 1024])]
    reports = build_reports(records, None, 1, api.report_metrics())
    assert next(iter(reports)) == "ndr_mpps"
    tcp = [TrialRecord(config={"s": s}, metrics=Metrics(bandwidth_gbps=1.0 + s, host_cpu_cores=0.5)) for s in (1, 2)]
    assert next(iter(build_reports(tcp, None, 1, api.report_metrics()))) == "bandwidth_gbps"


def test_sweep_and_tune_take_the_registry_names_of_what_they_search():
    assert [api.measure_metric(m) for m in ("mpps", "ndr", "ndr_mpps", "pdr_mpps")] == ["mpps", "ndr", "ndr", "pdr"]
    with pytest.raises(UserError, match=r"^--metric nrd: not a measured metric \(allowed: mpps, ndr, pdr\)$"):
        api.sweep(None, metric="nrd")
