"""The pivot report (rows x configurations, % change with intervals) on recorded-like tcp trials."""

from __future__ import annotations

import json

import pytest

from labctl.analysis.pivot import build_pivot, default_metrics, lower_is_better, render_pivot
from labctl.errors import UserError
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store

TCG = Environment(accel="tcg", lab="libvirt", virtio_backend="userspace")


def stream_records(repeats: int = 3, vcpus: int = 2) -> list[TrialRecord]:
    """sessions 1, 4 x queues 1, 2: more queues help 4 sessions, hurt 1 (as the posts show)."""
    out, next_id = [], 1
    gbps = {(1, 1): 10.0, (1, 2): 9.0, (4, 1): 12.0, (4, 2): 18.0}
    for (sessions, queues), rate in gbps.items():
        for i in range(repeats):
            jitter = 1 + 0.01 * i
            out.append(TrialRecord(
                id=next_id, repeat_index=i, env=TCG,
                config={"workload.kind": "tcp_stream", "workload.sessions": sessions, "workload.guest_queues": queues,
                        "guest.vcpus": vcpus},
                metrics=Metrics(bandwidth_gbps=rate * jitter, service_demand_host_us_per_kb=100 / rate * jitter,
                                service_demand_guest_us_per_kb=50 / rate * jitter)))
            next_id += 1
    return out


def test_pivot_rows_columns_and_change():
    pivot = build_pivot(stream_records(), rows="workload.sessions", by="workload.guest_queues")
    assert pivot.by_values == [1, 2] and pivot.metrics == default_metrics(stream_records())
    rows = pivot.sections[0].rows
    assert [r.value for r in rows] == [1, 4]
    single, many = rows
    assert single.cells["1|bandwidth_gbps"].n == 3
    assert single.changes["2|bandwidth_gbps"].change_pct == pytest.approx(-10.0, abs=1.5)
    assert single.changes["2|bandwidth_gbps"].verdict == "worse"
    assert many.changes["2|bandwidth_gbps"].verdict == "better"
    assert many.changes["2|service_demand_host_us_per_kb"].verdict == "better"  # lower is better
    assert "1|bandwidth_gbps" not in single.changes  # the baseline column has no change


def test_pivot_renders_the_posts_table():
    text = render_pivot(build_pivot(stream_records(), "workload.sessions", "workload.guest_queues"), "table")
    head, rule, *body = text.splitlines()
    assert head.split("  ")[0] == "sessions"
    assert "guest_queues=1 Gbit/s" in head and "guest_queues=2 Gbit/s %" in head
    assert "guest_queues=2 host SD us/KB %" in head and "guest_queues=1 host SD us/KB %" not in head
    assert body[0].startswith("1 ") and body[1].startswith("4 ")
    assert "%" in body[0] and "worse" in body[0] and "better" in body[1]
    assert "TCG" in text and "userspace" in text
    md = render_pivot(build_pivot(stream_records(), "workload.sessions", "workload.guest_queues"), "md")
    assert md.startswith("| sessions |") and "|---|" in md
    data = json.loads(render_pivot(build_pivot(stream_records(), "workload.sessions", "workload.guest_queues"), "json"))
    assert data["rows"] == "workload.sessions" and len(data["sections"][0]["rows"]) == 2
    csv = render_pivot(build_pivot(stream_records(1), "workload.sessions", "workload.guest_queues"), "csv")
    assert csv.splitlines()[0].startswith("sessions,") and len(csv.strip().splitlines()) == 3


def test_single_trials_give_a_change_without_a_verdict():
    pivot = build_pivot(stream_records(1), "workload.sessions", "workload.guest_queues")
    change = pivot.sections[0].rows[0].changes["2|bandwidth_gbps"]
    assert change.verdict == "inconclusive" and change.text == "-10.0% [n/a]"


def test_other_varying_knobs_are_sections_never_pooled():
    data = stream_records(1, vcpus=2) + [r.model_copy(update={"id": r.id + 100, "config": {**r.config, "guest.vcpus": 4}})
                                         for r in stream_records(1)]
    pivot = build_pivot(data, "workload.sessions", "workload.guest_queues", ["bandwidth_gbps"])
    assert [s.others for s in pivot.sections] == [{"guest.vcpus": 2}, {"guest.vcpus": 4}]
    assert "[guest.vcpus=2]" in render_pivot(pivot)


def test_pivot_refuses_what_does_not_vary():
    with pytest.raises(UserError, match="--rows guest.vcpus: not a knob that varies"):
        build_pivot(stream_records(), "guest.vcpus", "workload.guest_queues")
    with pytest.raises(UserError, match="both"):
        build_pivot(stream_records(), "workload.sessions", "workload.sessions")
    with pytest.raises(UserError, match="no successful trials"):
        build_pivot(stream_records(), "workload.sessions", "workload.guest_queues", ["transactions_per_s"])


def test_default_metrics_and_direction_of_better():
    rr = [TrialRecord(config={}, metrics=Metrics(transactions_per_s=5.0))]
    assert default_metrics(rr)[0] == "transactions_per_s" and default_metrics([]) == ["mpps"]
    searches = [TrialRecord(config={}, metrics=Metrics(ndr_mpps=1.0, pdr_mpps=2.0))]
    assert default_metrics(searches) == ["ndr_mpps", "pdr_mpps"]
    assert lower_is_better("service_demand_guest_us_per_tx") and not lower_is_better("bandwidth_gbps")


def test_cli_report_rows_by(tmp_path, cli):
    db = tmp_path / "p.db"
    data = stream_records()
    with Store(db) as store:
        run_id = store.create_run("p", {}, [{"seq": i, "config": r.config, "repeat_index": r.repeat_index}
                                             for i, r in enumerate(data)])
        for i, record in enumerate(data):
            record.id, record.run_id = None, run_id
            store.add_trial(record, i)
    code, out, err = cli("report", "--db", str(db), "--rows", "workload.sessions", "--by", "workload.guest_queues",
                         "--metric", "bandwidth_gbps", "--metric", "service_demand_guest_us_per_kb")
    assert code == 0, err
    assert "guest_queues=2 Gbit/s %" in out and "guest SD us/KB" in out and "host SD" not in out
    code, out, _ = cli("report", "--db", str(db), "--by", "workload.guest_queues", "--no-plot")
    assert code == 0 and "median bandwidth_gbps" in out  # the plain report picks the trials' rate
    code, _, err = cli("report", "--db", str(db), "--rows", "workload.sessions")
    assert code == 2 and "--rows needs --by" in err
    code, _, err = cli("report", "--db", str(db), "--metric", "bandwidth_gbps", "--metric", "retransmits")
    assert code == 2 and "need --rows" in err


def frame_size_records() -> list[TrialRecord]:
    """The posts' per-frame-size table: testpmd measured first, then OVS (sharing a CPU with the generator)."""
    out, next_id = [], 1
    for size, base in ((64, 5.0), (1518, 2.0)):
        for kind, factor, shared in (("testpmd", 1.0, False), ("ovs-dpdk", 1.2, True)):
            for i in range(3):
                out.append(TrialRecord(id=next_id, repeat_index=i, env=Environment(lab="embedded", shared_cores=shared),
                                       config={"workload.packet_size": size, "vswitch.kind": kind},
                                       metrics=Metrics(mpps=base * factor * (1 + 0.01 * i))))
                next_id += 1
    return out


def test_text_values_keep_the_order_they_were_measured_in_and_shared_cores_are_noted():
    pivot = build_pivot(frame_size_records(), rows="workload.packet_size", by="vswitch.kind", metrics=["mpps"])
    assert pivot.by_values == ["testpmd", "ovs-dpdk"]  # the sweep's order, not the alphabet's
    change = pivot.sections[0].rows[0].changes[pivot.key("ovs-dpdk", "mpps")]
    assert change.verdict == "better" and 15 < change.change_pct < 25
    assert any(n.startswith("shared cores: trials of vswitch.kind = ovs-dpdk") for n in pivot.notes)
    assert not any("testpmd" in n for n in pivot.notes if n.startswith("shared cores"))
