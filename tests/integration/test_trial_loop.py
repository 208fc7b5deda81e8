"""The one trial loop on the embedded lab: an NDR/PDR search interrupted by SIGINT ends as an interrupted
plain trial does (exit 130 in one line, nothing of the lab left: no process, socket, runtime directory,
hugetlbfs mount or hugepage, and the ledger empty: the next ``labctl down`` finds nothing to fail on)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import DOMAINS, ROOT, default_sigint
from tests.faults.harness import Case, run_case
from tests.integration.conftest import labctl_processes, needs_dpdk

pytestmark = needs_dpdk


def _interrupt(argv: list[str]) -> tuple[int, str]:
    """Start ``labctl ARGV`` with the default SIGINT disposition (as a terminal gives it), SIGINT it 3 s
    after its two DPDK processes are up, and return its exit status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "labctl.cli", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.time() + 60
    while time.time() < deadline and len(labctl_processes()) < 2:
        time.sleep(0.2)
    assert len(labctl_processes()) == 2, "the lab did not start its two DPDK processes"
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_sigint_mid_search_cleans_up_as_mid_trial(no_leftovers, tmp_path):
    """`labctl ndr` interrupted while it searches ends as `labctl run` interrupted while it measures
    (tests/integration/test_embedded.py::test_signal_mid_trial_cleans_up): exit 130, one line, nothing
    left (the no_leftovers fixture); its run is stored aborted, the measurements before the signal kept."""
    db = tmp_path / "ndr.db"
    code, err = _interrupt(["ndr", str(DOMAINS / "quick.yaml"), "--db", str(db), "--final-trial", "1",
                            "--precision", "0.2"])
    assert code == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == "labctl: interrupted"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("aborted",)]
        assert conn.execute("SELECT COUNT(*) FROM trials WHERE status != 'ok'").fetchone() == (0,)


@pytest.mark.faults
def test_fault_matrix_sigint_mid_search_as_mid_trial(tmp_path):
    """The fault matrix's case for SIGINT in an NDR search and in a plain trial's window: both exit 130
    without a traceback, the next labctl (down) succeeds, and nothing of either lab is left."""
    outcomes = [run_case(Case(command, "INT", "measure"), tmp_path / command, 0) for command in ("run", "ndr")]
    for outcome in outcomes:
        assert outcome.injected and outcome.survived, outcome.detail
        assert outcome.leaks == [] and outcome.lost == 0


def test_an_ndr_sweep_calibrates_once_and_counts_its_searches(no_leftovers, tmp_path):
    """Two configurations that differ in the guest only (its rx ring): one host side, so the second search
    reuses the first's calibrated maximum (unless the first found its bound at that maximum); progress
    counts the two searches, never their measurements."""
    from labctl.measure.ndr import SearchSettings
    from labctl.measure.sweep import run_sweep
    from labctl.profile.load import load_profile
    from labctl.results.store import Store

    text = (DOMAINS / "quick.yaml").read_text().replace("name: quick", "name: it-loop")
    text = text.split("sweep:")[0] + "sweep:\n  guest.nics.*.rx_queue_size: [256, 1024]\nrepeat: 1\n"
    profile = tmp_path / "loop.yaml"
    profile.write_text(text)
    loaded = load_profile(profile, {"workload.duration_s": 1, "workload.warmup_s": 0.5}, cpus=None)
    events = []
    db = tmp_path / "sweep.db"
    result = run_sweep(loaded, db, search=SearchSettings(precision=0.2, final_trial_s=1.0), on_event=events.append)
    assert (result.ok, result.failed) == (2, 0)
    trials = [e for e in events if e.kind == "trial"]
    assert len(trials) > 2 and all(e.total == 2 and e.done <= 2 for e in trials) and trials[-1].done == 2
    with Store(db) as store:
        records = store.trials(result.run_id, status=None)
    searches = [r for r in records if r.details.get("role") == "ndr"]
    assert len(searches) == 2 and searches[0].details["calibration_trials"] >= 1
    first_capped = any("at the search's maximum load" in w for w in searches[0].warnings)
    # the second search calibrates only when a bound sat at a maximum: the first's, or its own at the reused
    # one (then labgen is calibrated again: a note when it now paces more, else the warning stays)
    second_capped = (any("at the search's maximum load" in w for w in searches[1].warnings)
                     or any(e.kind == "note" and "at the reused maximum load" in (e.message or "") for e in events))
    if searches[1].details["calibration_trials"]:
        assert first_capped or second_capped, searches[1].warnings
    else:
        assert any(e.kind == "note" and "calibrated earlier in this run" in (e.message or "") for e in events)
    assert all({"teardown_s", "trial_s"} <= set(r.details["timings"]) for r in searches)
