"""Reading ansible-runner events: replays of events recorded from real runs of the fleet playbooks
(sweep.yml over a good, a failing and an unreachable host; lab-host.yml on one host), trimmed to the
fields labctl.fleet.events reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labctl.fleet.events import EventLog, HostStats, failure_reason, host_event, host_status

DATA = Path(__file__).parent / "data"


def events(name: str) -> list[dict]:
    return json.loads((DATA / f"{name}.json").read_text())


def replay(name: str) -> tuple[EventLog, list]:
    steps = []
    log = EventLog(on_event=steps.append)
    for event in events(name):
        assert log(event) is True  # every event is kept in the artefacts
    return log, steps


def test_stats_per_host_from_the_final_event():
    log, _ = replay("sweep-events")
    assert HostStats.of(log.stats, "good") == HostStats(ok=9, changed=7)
    assert HostStats.of(log.stats, "bad") == HostStats(ok=5, changed=4, failures=1, skipped=2)
    assert HostStats.of(log.stats, "gone") == HostStats(unreachable=1)
    assert HostStats.of(log.stats, "nobody") == HostStats()
    assert [host_status(HostStats.of(log.stats, h), log.processed(h)) for h in ("good", "bad", "gone")] == [
        "ok", "failed", "unreachable"]


def test_a_host_never_processed_failed():
    assert host_status(HostStats(), processed=False) == "failed"


def test_reasons_name_the_task_and_what_labctl_said():
    log, _ = replay("sweep-events")
    assert log.reasons["bad"].startswith("labctl sweep: /LAB/work/RUN-sweep/bad/bad.yaml: line 9: ")
    assert log.reasons["bad"].endswith("300 is not allowed (allowed: 256, 512, 1024) (exit 2)")
    assert log.reasons["gone"] == ("unreachable at This run's work directory on the host: Failed to connect to the "
                                   "host via ssh: ssh: connect to host 192.0.2.1 port 22: Connection refused")
    assert "good" not in log.reasons


def test_progress_per_host_started_changed_failed_skipped():
    _, steps = replay("sweep-events")
    sweep = [(s.host, s.state) for s in steps if s.task == "labctl sweep"]
    assert sorted(sweep) == [("bad", "failed"), ("bad", "started"), ("good", "changed"), ("good", "started")]
    assert ("bad", "skipped") in {(s.host, s.state) for s in steps if s.task == "Export the host's trials as JSONL"}
    gone = [s for s in steps if s.host == "gone"]
    assert [s.state for s in gone] == ["started", "unreachable"]
    assert gone[-1].message.startswith("Failed to connect to the host via ssh: ")
    failed = next(s for s in steps if s.state == "failed")
    assert failed.line() == f"bad: labctl sweep: failed: {failed.message}" and failed.message.endswith("(exit 2)")
    assert steps[0].line() == f"{steps[0].host}: {steps[0].task}: {steps[0].state}"


def test_prepare_reports_the_kernel_plan_as_a_fact_never_applied():
    log, steps = replay("prepare-events")
    plan = log.facts["local"]["labctl_kernel_plan"]
    assert plan["applied"] is False and plan["missing"] == [] and "none isolated" in plan["note"]
    assert set(log.facts["local"]) == {"labctl_kernel_plan"}  # hugepages 0: no pool fact
    assert {s.state for s in steps if s.task == "pip install the tree"} == {"started", "changed"}
    assert HostStats.of(log.stats, "local").failures == 0


def _failed(res: dict, **data) -> dict:
    return {"event": "runner_on_failed", "event_data": {"host": "h", "task": "t", "res": res, **data}}


@pytest.mark.parametrize("res, reason", [
    # a command that failed with a one-line error on stderr (labctl's LabError / UserError)
    ({"msg": "non-zero return code", "rc": 2, "stdout": "", "stderr": "labctl: --db x: no such store"},
     "t: labctl: --db x: no such store (exit 2)"),
    # exit 1 with a summary on stdout (a sweep with failed trials): the summary, not the progress bar
    ({"msg": "non-zero return code", "rc": 1, "stdout": "run 3: 1 ok, 1 failed -> x.db", "stderr": "run 3 ━━━ 2/2"},
     "t: run 3: 1 ok, 1 failed -> x.db (exit 1)"),
    # a typer usage error in a box: the words, not the box
    ({"msg": "non-zero return code", "rc": 2, "stdout": "",
      "stderr": "Usage: labctl [OPTIONS]\n╭─ Error ──╮\n│ No such command 'ndr'. │\n╰──────────╯"},
     "t: No such command 'ndr'. (exit 2)"),
    # a module without output: its message, with ansible-core 2.19's prefix dropped
    ({"msg": "Task failed: Could not find or access 'x.yaml'\non the Ansible Controller."},
     "t: Could not find or access 'x.yaml' on the Ansible Controller."),
    # a loop: the first failed item
    ({"msg": "One or more items failed", "results": [{"failed": False, "msg": "fine"},
                                                     {"failed": True, "msg": "item two broke"}]},
     "t: item two broke"),
])
def test_failure_reason_is_one_line(res, reason):
    assert failure_reason(_failed(res)) == reason


def test_ignored_failures_are_not_failures():
    log = EventLog()
    step = host_event(_failed({"msg": "boom"}, ignore_errors=True))
    assert step.state == "ignored"
    log(_failed({"msg": "boom"}, ignore_errors=True))
    assert log.reasons == {}


def test_playbook_events_are_not_host_steps():
    assert host_event({"event": "playbook_on_task_start", "event_data": {"task": "x"}}) is None
    assert failure_reason({"event": "runner_on_ok", "event_data": {"host": "h", "res": {}}}) is None


def test_the_first_failure_is_the_cause():
    log = EventLog()
    log(_failed({"msg": "first"}))
    log(_failed({"msg": "second"}))
    assert log.reasons == {"h": "t: first"}
