"""The advisor on kernel-stack (tcp_stream / tcp_rr) runs: ranked by their own rate, no loss limit, service
demand quoted in the rationale; the metric a tcp run is advised, reported and plotted by."""

from __future__ import annotations

import re

import pytest

from tests import datasets
from advisor.recommend import advise
from labctl import api
from labctl.errors import UserError
from labctl.results.store import Store
from tests.factories import tcp_records

SESSIONS = "workload.sessions"
QUEUES = "workload.guest_queues"

# (sessions, guest_queues) -> (Gbit/s, host SD us/KB, guest SD us/KB): a second queue carries 30% more at a
# lower service demand, at either session count
STREAM = {(1, 1): (1.0, 10.0, 9.0), (1, 2): (1.3, 8.0, 7.0), (4, 1): (1.0, 10.0, 9.0), (4, 2): (1.3, 8.0, 7.0)}
# (sessions, guest_queues) -> (trans/s, host SD us/tx, guest SD us/tx): a second queue completes 50% more
# round trips at a *higher* service demand
RR = {(1, 1): (4000.0, 150.0, 140.0), (1, 2): (6000.0, 240.0, 230.0), (4, 1): (4000.0, 150.0, 140.0),
      (4, 2): (6000.0, 240.0, 230.0)}
# the posts' finding: more queues help many streams and hurt a single one
BY_SESSIONS = {(1, 1): (1.0, 10.0, 9.0), (1, 2): (0.8, 12.0, 11.0), (4, 1): (2.0, 10.0, 9.0), (4, 2): (2.6, 8.0, 7.0)}


def demand(text: str, name: str) -> tuple[float, float, str, str]:
    """From a rationale: (the pick's median, the alternative's, the alternative's label, the word) of the
    service demand ``name`` (``host SD us/KB``)."""
    m = re.search(re.escape(name) + r" ([0-9.]+) against ([0-9.]+) with ([a-z_]+ [0-9]+) \((lower|higher)\)", text)
    assert m, text
    return float(m[1]), float(m[2]), m[3], m[4]


def _store(db, records, name="planted"):
    with Store(db) as store:
        run_id = store.create_run(name, {}, [])
        for record in records:
            store.add_trial(record.model_copy(update={"id": None, "run_id": run_id}))
    return run_id


def test_tcp_stream_sweep_recommends_the_faster_queue_count_with_bandwidth_and_service_demand():
    advice = advise(tcp_records(STREAM, n=4), metric="bandwidth_gbps")
    (rec,) = advice.recommendations
    assert rec.knob == QUEUES and rec.value == 2 and rec.baseline == 1 and not rec.condition
    assert rec.metric == "bandwidth_gbps"
    assert 20 < rec.gain_pct < 40 and rec.ci_pct[0] > 0 and rec.n == 16
    text = rec.rationale
    assert text.startswith("guest_queues 2 reached +")
    assert "Gbit/s against guest_queues 1" in text and "Mpps" not in text
    assert "no loss limit applies" in text and "loss ratio" not in text
    assert "service demand with guest_queues 2 (median, lower is better)" in text
    host, host_alt, alt, word = demand(text, "host SD us/KB")
    assert 7.5 < host < 8.5 and 9.5 < host_alt < 10.5 and alt == "guest_queues 1" and word == "lower"
    guest, guest_alt, alt, word = demand(text, "guest SD us/KB")
    assert 6.5 < guest < 7.5 and 8.5 < guest_alt < 9.5 and alt == "guest_queues 1" and word == "lower"
    # sessions are the workload's (a condition), never a setting to pick
    assert advice.inconclusive == []
    assert not any("loss limit" in w for w in advice.warnings)


def test_tcp_stream_noisy_overlapping_data_is_inconclusive():
    noisy = {key: (1.02 if key[1] == 2 else 1.0, 10.0, 9.0) for key in STREAM}
    advice = advise(tcp_records(noisy, n=4, cv=0.25, seed=3), metric="bandwidth_gbps")
    assert advice.recommendations == []
    assert {i.knob for i in advice.inconclusive} == {QUEUES}
    assert all("inside the noise" in i.reason for i in advice.inconclusive)
    assert any("scatter by more than" in w for w in advice.warnings)


def test_tcp_rr_sweep_ranks_by_transactions_even_at_a_higher_service_demand():
    advice = advise(tcp_records(RR, kind="tcp_rr", n=4), metric="transactions_per_s")
    (rec,) = advice.recommendations
    assert rec.knob == QUEUES and rec.value == 2 and rec.metric == "transactions_per_s"
    assert 35 < rec.gain_pct < 65 and rec.ci_pct[0] > 0
    assert "guest_queues 2 reached +" in rec.rationale and "trans/s against guest_queues 1" in rec.rationale
    host, host_alt, alt, word = demand(rec.rationale, "host SD us/tx")
    assert 225 < host < 255 and 140 < host_alt < 160 and alt == "guest_queues 1" and word == "higher"
    assert demand(rec.rationale, "guest SD us/tx")[3] == "higher"
    assert advice.inconclusive == []


def test_tcp_queue_advice_is_given_per_session_count_when_it_differs():
    """Queues that help 4 streams (+30%) and hurt one (-20%): one recommendation per session count, each
    with its own evidence; pooled, the two would cancel out."""
    advice = advise(tcp_records(BY_SESSIONS, n=6), metric="bandwidth_gbps")
    picks = {rec.condition[SESSIONS]: rec for rec in advice.recommendations}
    assert sorted(picks) == [1, 4] and all(rec.knob == QUEUES for rec in picks.values())
    assert picks[1].value == 1 and picks[4].value == 2
    assert picks[1].rationale.startswith("with sessions 1: guest_queues 1 is the fastest")
    assert picks[4].rationale.startswith("with sessions 4: guest_queues 2 reached +")
    assert 15 < picks[4].gain_pct < 40 and picks[4].ci_pct[0] > 0
    assert advice.inconclusive == []


def test_tcp_stream_keeping_the_reference_quotes_its_service_demand():
    worse = {key: (0.7 if key[1] == 2 else 1.0, 14.0 if key[1] == 2 else 10.0, 9.0) for key in STREAM}
    advice = advise(tcp_records(worse, n=4), metric="bandwidth_gbps")
    (rec,) = advice.recommendations
    assert rec.knob == QUEUES and rec.value == 1 and rec.baseline == 2
    assert "guest_queues 1 is the fastest" in rec.rationale and "Gbit/s against it" in rec.rationale
    host, host_alt, alt, word = demand(rec.rationale, "host SD us/KB")
    assert 9.5 < host < 10.5 and 13 < host_alt < 15 and alt == "guest_queues 2" and word == "lower"


def test_api_advise_defaults_to_the_runs_tcp_metric(tmp_path):
    db = tmp_path / "tcp.db"
    _store(db, tcp_records(STREAM, n=4))
    advice = api.advise(db)
    assert [(r.knob, r.value, r.metric) for r in advice.recommendations] == [(QUEUES, 2, "bandwidth_gbps")]
    assert api.advise(db, metric="bandwidth_gbps").to_dict() == advice.to_dict()


@pytest.mark.parametrize("metric", ["mpps", "ndr_mpps", "transactions_per_s"])
def test_api_advise_refuses_other_metrics_on_a_tcp_stream_run(tmp_path, metric):
    db = tmp_path / "tcp.db"
    run_id = _store(db, tcp_records(STREAM, n=2))
    with pytest.raises(UserError) as e:
        api.advise(db, metric=metric)
    assert str(e.value) == (f"--metric {metric}: not a rate the advisor ranks for run {run_id}'s tcp trials "
                            "(allowed: bandwidth_gbps)")


@pytest.mark.parametrize("metric", ["bandwidth_gbps", "transactions_per_s"])
def test_api_advise_refuses_tcp_metrics_on_a_forwarding_run(tmp_path, metric):
    db = tmp_path / "fwd.db"
    _store(db, datasets.queue_rate())
    with pytest.raises(UserError) as e:
        api.advise(db, metric=metric)
    msg = str(e.value)
    assert msg.startswith(f"--metric {metric}: ") and "allowed: mpps, ndr_mpps, pdr_mpps" in msg and "\n" not in msg


def test_api_advise_refuses_a_loss_limit_on_a_tcp_run(tmp_path):
    db = tmp_path / "tcp.db"
    _store(db, tcp_records(RR, kind="tcp_rr", n=2))
    with pytest.raises(UserError) as e:
        api.advise(db, max_loss=0.01)
    msg = str(e.value)
    assert msg.startswith("--max-loss 0.01: no loss limit applies") and "allowed:" in msg and "\n" not in msg


def test_cli_advise_metric_mpps_on_a_tcp_run_is_one_line_exit_2(cli, tmp_path):
    db = tmp_path / "tcp.db"
    _store(db, tcp_records(STREAM, n=2))
    code, out, err = cli("advise", "--db", str(db), "--metric", "mpps")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "--metric mpps" in line and "allowed: bandwidth_gbps" in line


def test_cli_advise_tcp_metric_on_a_forwarding_run_is_one_line_exit_2(cli, tmp_path):
    db = tmp_path / "fwd.db"
    _store(db, datasets.queue_rate())
    code, out, err = cli("advise", "--db", str(db), "--metric", "bandwidth_gbps")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "--metric bandwidth_gbps" in line and "allowed: mpps, ndr_mpps, pdr_mpps" in line


def test_cli_advise_a_tcp_run(cli, tmp_path):
    db = tmp_path / "tcp.db"
    _store(db, tcp_records(RR, kind="tcp_rr", n=4))
    code, out, _ = cli("advise", "--db", str(db))
    assert code == 0
    assert out.startswith("recommend workload.guest_queues = 2: +") and "transactions_per_s (n=16)" in out
    assert "service demand with guest_queues 2" in out


# --------------------------------------------------------------------------------------------------
# report, plot and trend of a tcp run default to its rate


@pytest.mark.parametrize("kind, rate", [("tcp_stream", "bandwidth_gbps"), ("tcp_rr", "transactions_per_s")])
def test_report_plot_and_trend_default_to_the_tcp_rate(tmp_path, monkeypatch, kind, rate):
    import labctl.analysis.plot as plot_module

    records = tcp_records(STREAM if kind == "tcp_stream" else RR, kind=kind, n=2)
    profile = records[0].config["name"]
    db = tmp_path / "tcp.db"
    _store(db, records)
    assert api.report(db).metric == rate
    plotted = []
    monkeypatch.setattr(plot_module, "plot_report", lambda report, out: plotted.append(report.metric) or out)
    api.plot(SESSIONS, tmp_path / "p.png", db)
    assert plotted == [rate]
    assert api.trend(db, profile).metric == rate


def test_cli_report_trend_of_a_tcp_profile_needs_no_metric(cli, tmp_path):
    db = tmp_path / "tcp.db"
    _store(db, tcp_records(STREAM, n=2))
    code, out, err = cli("report", "--db", str(db), "--trend", "tcp-multiqueue")
    assert code == 0, err
    assert out.startswith("trend of tcp-multiqueue: bandwidth_gbps (higher is better)")
