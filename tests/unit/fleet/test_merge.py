"""merge(): every good host's JSONL into one store, one run per host, the host as a dimension."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from labctl.errors import ImportFormatError
from labctl.fleet.merge import merge
from labctl.results.interchange import record_to_line
from labctl.results.record import Environment, Metrics, TrialRecord
from labctl.results.store import Store


@dataclass
class Outcome:  # what merge reads of a host's result
    host: str
    status: str
    jsonl: Path | None


def jsonl(path: Path, host: str | None, rates: list[float]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for i, rate in enumerate(rates):
            record = TrialRecord(config={"guest.nics.*.rx_queue_size": 256 * (i + 1)},
                                 env=Environment(host=host, accel="none", lab="embedded"),
                                 metrics=Metrics(mpps=rate))
            handle.write(json.dumps(record_to_line(record)) + "\n")
    return path


def test_good_hosts_become_one_run_each_with_their_names(tmp_path):
    results = [Outcome("h1", "ok", jsonl(tmp_path / "h1/trials.jsonl", "h1", [5.0, 6.0])),
               Outcome("h2", "ok", jsonl(tmp_path / "h2/trials.jsonl", "h2", [7.0])),
               Outcome("h3", "failed", jsonl(tmp_path / "h3/trials.jsonl", "h3", [1.0])),  # left out
               Outcome("h4", "unreachable", None)]
    merged = merge(results, tmp_path / "fleet.db", run_name="r1")
    assert [(m.host, m.trials, m.renamed_from) for m in merged] == [("h1", 2, ()), ("h2", 1, ())]
    with Store(tmp_path / "fleet.db") as store:
        runs = {run["id"]: run for run in store.runs()}
        assert {runs[m.run_id]["host"] for m in merged} == {"h1", "h2"}
        assert runs[merged[0].run_id]["profile_name"] == "fleet r1: h1"
        assert sorted((t.env.host, t.metrics.mpps) for t in store.trials(None)) == [
            ("h1", 5.0), ("h1", 6.0), ("h2", 7.0)]


def test_records_naming_another_host_are_renamed_and_say_so(tmp_path):
    source = jsonl(tmp_path / "h1/trials.jsonl", "vm", [5.0])  # a labctl without the LABCTL_HOST override
    (merged,) = merge([Outcome("h1", "ok", source)], tmp_path / "fleet.db")
    assert merged.renamed_from == ("vm",) and merged.source != source
    with Store(tmp_path / "fleet.db") as store:
        assert [t.env.host for t in store.trials(None)] == ["h1"]
    assert json.loads(source.read_text())["env"]["host"] == "vm"  # the fetched file is kept as it came


def test_a_bad_file_imports_nothing_and_names_the_file(tmp_path):
    good = jsonl(tmp_path / "h1/trials.jsonl", "h1", [5.0])
    bad = tmp_path / "h2/trials.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"config": {}, "status": "perfect"}\n')
    with pytest.raises(ImportFormatError) as caught:
        merge([Outcome("h1", "ok", good), Outcome("h2", "ok", bad)], tmp_path / "fleet.db")
    assert str(bad) in str(caught.value) and caught.value.exit_code == 2
    assert not (tmp_path / "fleet.db").exists()  # validated before the store was opened


def test_nothing_to_merge_touches_no_store(tmp_path):
    assert merge([Outcome("h1", "failed", None)], tmp_path / "fleet.db") == []
    assert not (tmp_path / "fleet.db").exists()
