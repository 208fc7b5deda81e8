"""Paced trials and NDR/PDR searches on the embedded lab, with labgen as its host side.

Never a throughput: the rates asked for are far below what this host sustains, and what is checked is
that labgen kept its schedule (achieved follows offered), that an impossible rate is an invalid trial
and not loss, and that a search ends with NDR <= PDR and leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from labctl import api
from labctl.lab.ledger import load_state
from labctl.results.store import Store
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import labctl_processes, needs_dpdk

pytestmark = needs_dpdk
FAST = {"name": "it-paced", "workload.duration_s": 2, "workload.warmup_s": 0.5}


def test_paced_trial_follows_its_schedule(no_leftovers):
    """At 200 kpps (all ports) labgen hands the driver what was asked, within 2%; a share of the maximum
    is resolved against the lab; the record carries sequence counts and latency."""
    for attempt in range(3):  # this 2-vCPU host stalls a pinned loop now and then: a stalled trial is invalid
        record = api.run(api.load(DOMAINS / "quick.yaml", {**FAST, "workload.rate": "200kpps"}))
        assert record.status == "ok", record.error
        if record.metrics.valid:
            break
    m = record.metrics
    assert m.valid and m.offered_mpps == pytest.approx(0.2)
    assert abs(m.achieved_mpps / m.offered_mpps - 1) < 0.02
    assert m.lost is not None and m.reordered is not None and m.latency_p50_us > 0
    assert m.latency_min_us <= m.latency_p50_us <= m.latency_p99_us <= m.latency_max_us
    assert record.details["labgen"]["sending_ports"] == 2 and record.details["generator"] == "labgen"
    share = api.run(api.load(DOMAINS / "quick.yaml", {**FAST, "workload.rate": "20%"}))
    assert share.status == "ok" and 0 < share.metrics.offered_mpps


def test_asking_more_than_the_generator_sends_is_invalid_not_loss(no_leftovers, cli):
    code, out, _ = cli("run", str(DOMAINS / "quick.yaml"), "--set", "name=it-paced", "--set", "workload.duration_s=1",
                       "--set", "workload.warmup_s=0", "--rate", "150Mpps", "--json")
    record = json.loads(out)
    assert code == 0 and record["metrics"]["valid"] is False
    assert any(w.startswith("invalid trial: the generator fell behind") for w in record["warnings"])
    m, labgen = record["metrics"], record["details"]["labgen"]
    # frames it never sent are not lost frames: loss is over what it offered
    assert labgen["unsent"] > 0 and m["lost"] + m["tx_dropped"] <= m["tx_packets"] + m["tx_dropped"]
    assert m["offered_mpps"] == pytest.approx(150) and m["achieved_mpps"] < 150


def test_ndr_search_end_to_end(no_leftovers, tmp_path):
    db = tmp_path / "ndr.db"
    loaded = api.load(DOMAINS / "quick.yaml", {**FAST, "workload.duration_s": 1})
    result = api.ndr(loaded, db, precision=0.02)
    assert result.ndr.mpps is not None and result.pdr.mpps is not None
    assert 0 < result.ndr.mpps <= result.pdr.mpps <= result.max_load_mpps
    assert result.ndr.lower_mpps <= result.ndr.upper_mpps
    assert [row["load_pct"] for row in result.latency] == [10, 50, 90]
    assert result.trials > 3 and result.trial_seconds > 0
    with Store(db) as store:
        stored = store.trials(result.run_id, status=None)
        info = store.run(result.run_id)["info"]
    roles = [r.details.get("role") for r in stored]
    assert roles.count("ndr") == 1 and roles.count("warmup") == 1
    assert roles.count("warmup") + roles.count("search") + roles.count("latency") == result.trials
    assert roles.count("calibration") == result.calibration_trials >= 1 and result.calibration_seconds > 0
    assert set(result.short_trial_misses) == {"ndr", "pdr"} and info["ndr"]["short_trial_misses"] == result.short_trial_misses
    assert info["ndr"]["ndr"]["mpps"] == result.ndr.mpps
    report = api.report(db, result.run_id)
    assert report.metric == "ndr_mpps" and report.rows[0].extras["pdr_mpps"] == pytest.approx(result.pdr.mpps)


def test_sigterm_mid_search_leaves_nothing(no_leftovers, tmp_path):
    db = tmp_path / "ndr.db"
    proc = subprocess.Popen([sys.executable, "-m", "labctl.cli", "ndr", str(DOMAINS / "quick.yaml"), "--db", str(db),
                             "--set", "name=it-paced", "--set", "workload.duration_s=1"],
                            cwd=ROOT, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(labctl_processes()) < 1:
        time.sleep(0.2)
    time.sleep(4)  # into the search
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert not load_state("it-paced").resources
    with Store(db) as store:
        assert [run["status"] for run in store.runs()] == ["aborted"]
