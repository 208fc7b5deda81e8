"""JSONL and CSV interchange: round trips, all-or-nothing imports, one-line errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from labctl.errors import ImportFormatError, StoreError, UserError
from labctl.results.interchange import export_csv, export_jsonl, import_jsonl
from labctl.results.record import Metrics
from labctl.results.store import Store
from tests.factories import config, plan, record

LINES = [
    {
        "config": {"guest.nics.0.rx_queue_size": 1024, "guest.nics.0.queues": 2},
        "metrics": {"mpps": 9.8, "loss_ratio": 0.0002, "tx_dropped": 1200},
        "env": {"host": "lab1", "accel": "kvm"},
    },
    {
        "config": {"guest.nics.0.rx_queue_size": 256, "guest.nics.0.queues": 2},
        "metrics": {"mpps": 15.1, "drops": {"ring_full": 4}},
        "env": {"host": "lab1", "accel": "kvm"},
        "status": "failed",
        "error": "vhost: too many memory regions",
        "warnings": ["two-band result"],
        "details": {"q": [1, 2]},
        "repeat_index": 2,
    },
]


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_jsonl_import_export_round_trip(store: Store, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", LINES[:1] + [""] + LINES[1:])  # a blank line is skipped
    run_id, count = import_jsonl(store, src, run_name="lab1-results")
    assert count == 2
    run = store.run(run_id)
    assert (run["profile_name"], run["status"], run["host"]) == ("lab1-results", "imported", "lab1")
    assert store.missing_plan(run_id) == []
    imported = store.trials(run_id, status=None)
    assert [r.metrics.mpps for r in imported] == [9.8, 15.1]
    assert imported[1].warnings == ["two-band result"] and imported[1].repeat_index == 2

    out = tmp_path / "out.jsonl"
    assert export_jsonl(store, out, run_id) == 2
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert exported[0] == {**LINES[0], "status": "ok", "repeat_index": 0}
    assert exported[1] == LINES[1]

    again, _ = import_jsonl(store, out)
    strip = [r.model_copy(update={"id": None, "run_id": None}) for r in store.trials(again, status=None)]
    assert strip == [r.model_copy(update={"id": None, "run_id": None}) for r in imported]
    second = io.StringIO()
    export_jsonl(store, second, again)
    assert second.getvalue() == out.read_text()  # byte-identical after a second trip


def test_export_of_stored_records_round_trips(store: Store, tmp_path: Path) -> None:
    run_id = store.create_run("demo", {}, plan(2))
    sent = [record(run_id), record(run_id, rx=1024, status="aborted", error="interrupted")]
    for i, r in enumerate(sent):
        store.add_trial(r, seq=i)
    out = tmp_path / "x.jsonl"
    export_jsonl(store, out, run_id)
    new_run, _ = import_jsonl(store, out)
    assert [r.model_copy(update={"id": None, "run_id": None}) for r in store.trials(new_run, status=None)] == [
        r.model_copy(update={"run_id": None}) for r in sent
    ]


def test_malformed_line_names_line_and_field_and_imports_nothing(store: Store, tmp_path: Path) -> None:
    bad = dict(LINES[0], metrics={"mpps": "fast"})
    src = write_jsonl(tmp_path / "bad.jsonl", [LINES[0], LINES[1], bad, LINES[0]])
    with pytest.raises(ImportFormatError) as info:
        import_jsonl(store, src)
    err = info.value
    assert isinstance(err, UserError) and err.exit_code == 2
    assert str(err).startswith(f"{src}:3: metrics.mpps: ")
    assert "\n" not in str(err)
    assert (err.line, err.field) == (3, "metrics.mpps")
    assert store.runs() == [] and store.trials(status=None) == []


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ('{"config": {"a": 1}, "metrics": {"mpps": 1.0}', ":2: not valid JSON"),
        ("[1, 2]", ":2: expected a JSON object"),
        ({"metrics": {"mpps": 1.0}}, ":2: config: missing"),
        ({"config": {"a": [1]}}, ":2: config.a: a knob value must be"),
        ({"config": {}, "env": {"accel": "xen"}}, ":2: env.accel: "),
        ({"config": {}, "metrics": {"mppps": 1.0}}, ":2: metrics.mppps: unknown field (allowed: mpps,"),
        ({"config": {}, "status": "great"}, ":2: status: "),
        ({"config": {}, "id": 4}, ":2: id: is assigned by the store"),
    ],
)
def test_bad_lines(store: Store, tmp_path: Path, line, where: str) -> None:
    src = write_jsonl(tmp_path / "b.jsonl", [LINES[0], line])
    with pytest.raises(ImportFormatError, match="^" + str(src).replace(".", r"\.") + where.replace("(", r"\(")):
        import_jsonl(store, src)
    assert store.latest_run_id() is None


def test_more_bad_lines_are_counted(store: Store, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "b.jsonl", ["{", LINES[0], "{", "{"])
    with pytest.raises(ImportFormatError, match=r":1: .*\(2 more bad lines\)$"):
        import_jsonl(store, src)


def test_unreadable_or_empty_import(store: Store, tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="cannot read"):
        import_jsonl(store, tmp_path / "missing.jsonl")
    with pytest.raises(ImportFormatError, match="no trial records"):
        import_jsonl(store, write_jsonl(tmp_path / "empty.jsonl", [""]))


def test_failure_mid_import_rolls_back(store: Store, tmp_path: Path, monkeypatch) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", LINES)
    real = Store.add_trial
    calls = []

    def flaky(self, rec, seq=None):
        calls.append(seq)
        if len(calls) == 2:
            raise StoreError("disk full")
        return real(self, rec, seq)

    monkeypatch.setattr(Store, "add_trial", flaky)
    with pytest.raises(StoreError, match="disk full"):
        import_jsonl(store, src)
    monkeypatch.undo()
    assert store.runs() == [] and store.trials(status=None) == []
    assert import_jsonl(store, src)[1] == 2  # the store is still usable


def test_csv_columns(store: Store, tmp_path: Path) -> None:
    run_id = store.create_run("demo", {}, plan(2))
    a = store.add_trial(record(run_id), seq=0)
    b = store.add_trial(record(run_id, rx=1024, status="failed", error="boom", metrics=Metrics(mpps=1.5)), seq=1)
    out = tmp_path / "t.csv"
    assert export_csv(store, out, run_id) == 2
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    header = list(rows[0])
    assert header[:6] == ["run_id", "trial_id", "status", "repeat_index", "host", "accel"]
    knobs = list(config())
    assert header[6 : 6 + len(knobs)] == knobs
    for column in ("mpps", "gbps", "loss_ratio", "tx_dropped", "window_s", "drops.ring_full", "cpu.vswitch_pmd",
                   "error", "warnings"):  # fmt: skip
        assert column in header
    assert "drops" not in header and "config" not in header
    first, second = rows
    assert (first["run_id"], first["trial_id"], first["status"]) == (str(run_id), str(a), "ok")
    assert (first["host"], first["accel"]) == ("lab1", "tcg")
    assert (first["guest.nics.0.rx_queue_size"], first["guest.hugepages"], first["uri"]) == ("256", "false", "")
    assert (first["mpps"], first["tx_dropped"], first["drops.ring_full"], first["gbps"]) == ("9.8", "1200", "1200", "")
    assert first["warnings"] == "shared cores; two-band result"
    assert (second["trial_id"], second["status"], second["mpps"], second["error"]) == (str(b), "failed", "1.5", "boom")
    assert second["drops.ring_full"] == ""
