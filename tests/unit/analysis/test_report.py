"""Reports and plots on recorded data: grouping, intervals, A/B deltas, notes; the CLI over them."""

from __future__ import annotations

import json

import pytest

from labctl.analysis.renderers import render
from labctl.errors import UserError
from labctl.analysis.report import build_report
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store


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


def test_report_judges_a_metric_in_its_own_direction():
    """`report --by KNOB --metric loss_ratio`: less loss is better, as compare and the pivot judge it (it was
    judged as a rate: a loss cut by 88% read "worse")."""
    data = records({(256, 32): [10.0, 10.2, 9.9, 10.1, 10.0], (1024, 32): [11.6, 11.7, 11.5, 11.8, 11.6]})
    for i, r in enumerate(data):
        r.metrics.loss_ratio = (0.004 if r.config["guest.nics.0.rx_queue_size"] == 256 else 0.0005) * (1 + 0.01 * i)
    base, tuned = build_report(data, metric="loss_ratio").rows
    assert tuned.delta.startswith("-8") and tuned.verdict == "better"
    base, tuned = build_report(data, metric="mpps").rows
    assert tuned.verdict == "better"


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


def test_trials_of_two_hosts_or_accelerators_are_never_pooled(tmp_path):
    """A fleet's merged store: rows split by host (and by accelerator), --host keeps one, the advisor says so."""
    from labctl import api
    from labctl.results.store import Store

    a = records({(256, 32): [10.0, 10.1, 9.9], (1024, 32): [12.0, 12.1, 11.9]})
    b = records({(256, 32): [5.0, 5.1, 4.9], (1024, 32): [6.0, 6.1, 5.9]}, accel="tcg")
    for r in a:
        r.env.host = "h1"
    for r in b:
        r.env.host = "h2"
    report = build_report(a + b)
    assert {row.knobs["env.host"] for row in report.rows} == {"h1", "h2"} and len(report.rows) == 4
    assert "env.accel" in report.knobs  # h2 ran under TCG: its rows carry that too
    db = tmp_path / "fleet.db"
    with Store(db) as store:
        run_id = store.create_run("fleet", {}, [])
        for r in a + b:
            store.add_trial(r.model_copy(update={"id": None, "run_id": run_id}))
    only = api.report(db, host="h2")
    assert len(only.rows) == 2 and all(row.median < 7 for row in only.rows)
    with pytest.raises(UserError, match="--host h3: no trials of that host .*allowed: h1, h2"):
        api.report(db, host="h3")
    warnings = " ".join(api.advise(db).warnings)
    assert "2 hosts" in warnings and "2 accelerators" in warnings


def _store_of(path, data: list[TrialRecord]):
    with Store(path) as store:
        run_id = store.create_run("x", {}, [{"seq": i, "config": r.config, "repeat_index": r.repeat_index}
                                             for i, r in enumerate(data)])
        for i, record in enumerate(data):
            record.id, record.run_id = None, run_id
            store.add_trial(record, i)
    return path


@pytest.fixture
def saved_figures(monkeypatch):
    """The figures ``labctl plot`` saves (their axes read back), the PNGs still written."""
    from matplotlib.figure import Figure

    saved = []
    real = Figure.savefig

    def keep(fig, *args, **kwargs):
        saved.append([(ax.get_xlabel(), [t.get_text() for t in ax.get_xticklabels()], ax.get_title())
                      for ax in fig.axes])
        return real(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    return saved


@pytest.mark.parametrize("by", [None, "none", "", "None"])
def test_plot_without_grouping_is_a_point_per_configuration(cli, tmp_path, saved_figures, by):
    """playbooks/ci.yml's labctl_plot_by: none: no knob on the x axis, not `--by none: not a knob`."""
    db = _store_of(tmp_path / "two-knobs.db", records({(256, 32): [10, 10.1, 9.9], (1024, 32): [11, 11.1, 10.9],
                                                      (256, 64): [9, 9.1, 8.9], (1024, 64): [12, 12.1, 11.9]}))
    png = tmp_path / "x.png"
    code, out, err = cli("plot", "--db", str(db), "--out", str(png), *([] if by is None else ["--by", by]))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.strip() == f"wrote {png}"
    ((xlabel, ticks, title),) = saved_figures[0]
    assert xlabel == "configuration" and title == "run 1: mpps per configuration"
    assert ticks == ["rx_queue_size=256\nburst=32", "rx_queue_size=256\nburst=64",
                     "rx_queue_size=1024\nburst=32", "rx_queue_size=1024\nburst=64"]


def test_plot_of_one_configuration_and_of_one_knob_without_by(cli, tmp_path, saved_figures):
    one = _store_of(tmp_path / "one.db", records({(256, 32): [10, 10.1, 9.9]}))
    code, _, err = cli("plot", "--db", str(one), "--by", "none", "--out", str(tmp_path / "one.png"))
    assert code == 0, err
    assert saved_figures[-1][0][1] == ["all trials"]
    rings = _store_of(tmp_path / "rings.db", records({(256, 32): [10, 10.1, 9.9], (1024, 32): [11, 11.1, 10.9]}))
    code, _, err = cli("plot", "--db", str(rings), "--out", str(tmp_path / "rings.png"))
    assert code == 0, err
    xlabel, ticks, _ = saved_figures[-1][0]
    assert xlabel == "guest.nics.*.rx_queue_size" and ticks == ["256", "1024"]  # the one knob that varies
    code, _, err = cli("plot", "--db", str(rings), "--by", "workload.burst", "--out", str(tmp_path / "b.png"))
    assert code == 2 and err.strip() == ("--by workload.burst: not a knob that varies in this run "
                                         "(allowed: guest.nics.*.rx_queue_size)")


def test_trial_summary_says_how_often_the_schedule_shifted():
    """`labctl run` on a paced trial: the pauses labgen's schedule was shifted by (workload.pacing shift) on the
    paced line; none said when there were none (pacing absolute, or a quiet host)."""
    from labctl.analysis.renderers import trial_summary
    from labctl.results.record import Environment, Metrics, TrialRecord

    def summary(labgen: dict) -> str:
        metrics = Metrics(mpps=1.0, gbps=0.512, offered_mpps=1.0, achieved_mpps=1.0, window_s=5.0, valid=True)
        record = TrialRecord(config={}, env=Environment(lab="embedded"), metrics=metrics, details={"labgen": labgen})
        return next(line for line in trial_summary(record).splitlines() if line.startswith("paced:"))

    assert summary({"shifts": 312, "paused_us": 92345.6}) == (
        "paced:     valid: the generator kept its schedule; 312 pauses of its CPU (92.3 ms) shifted it "
        "(workload.pacing shift)")
    assert summary({"shifts": 0, "paused_us": 0.0}) == "paced:     valid: the generator kept its schedule"


def test_the_boots_note_counts_nic_swaps_and_the_swaps_that_booted_instead():
    from labctl.analysis.report import boots_note

    assert boots_note({"boots": 2, "boot_s": 41.0, "run_s": 180.0}) == (
        "guest boots: 2 (41 s, 23% of the run's 180 s); workload-only changes restarted the forwarder in the running "
        "guest")
    assert boots_note({"boots": 1, "boot_s": 22.0, "run_s": 80.0, "swaps": 5, "swap_s": 16.4,
                       "swap_fallbacks": 1}) == (
        "guest boots: 1 (22 s, 28% of the run's 80 s); NIC swaps: 5 (16 s), 1 booted instead (see the trials' "
        "warnings); workload-only changes restarted the forwarder in the running guest")
