"""The one trial loop: a plain trial and an NDR/PDR search trial run in the same loop, so an interruption,
a cancel or a failure leaves the same state whichever it hit; their records carry the loop's timings."""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import pytest

from labctl import signals
from labctl.errors import Cancelled, WorkloadError
from labctl.lab.plan import derive
from labctl.measure import ndr as ndr_module
from labctl.measure.ndr import NdrResult, Bound, SearchSettings, ndr_trial
from labctl.measure.session import open_session
from labctl.measure.trial import run_trial
from labctl.profile.load import load_profile
from labctl.results.record import Environment
from labctl.results.store import Store
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})
SETTINGS = SearchSettings(precision=0.2, final_trial_s=1.0)


class FakeLab:
    """A lab up for its plan with labgen as its host side; ``paced.trial`` (a plain trial's window, an
    NDR search's measurement) runs ``during`` instead of measuring."""

    def __init__(self, plan, during):
        self.plan, self.during = plan, during
        self.pids: dict[str, int] = {}
        self.timings = {"lab_up_s": 0.25}
        self.host_kind, self.pollers = "vhost-user", 1
        self.generator = SimpleNamespace(run_trial=lambda _spec: SimpleNamespace(achieved_rate_pps=1e6))
        self.paced = SimpleNamespace(spec=lambda rate, duration, warmup: (rate, duration, warmup),
                                     rate_per_port=lambda _rate: 0.0, trial=self._trial)
        self.closed = False

    def _trial(self, spec, monitor, phase):
        phase("warm-up")
        self.during()
        raise AssertionError("not reached: the trial was to be interrupted")

    def record_warnings(self):
        return []

    def details(self):
        return {"host_side": "fake"}

    def pins(self):
        return {}

    def environment(self, pins, shared):
        return Environment(accel="none")

    def close(self):
        self.closed = True


class FakeSession:
    """The part of LabSession the loop uses: acquire, release, leftovers, the CPU claim, calibrations."""

    def __init__(self, during, waited_s: float = 0.0):
        self.during, self.leftovers, self.calibrations = during, None, {}
        self.cpus = SimpleNamespace(cpus=frozenset({0}), waited_s=waited_s)
        self.released: list[bool] = []
        self.lab: FakeLab | None = None

    def acquire(self, plan, warnings):
        self.lab = FakeLab(plan, self.during)
        return self.lab

    def release(self, lab, failed):
        assert lab is self.lab
        lab.close()
        self.released.append(failed)
        return []


def sigint() -> None:
    """SIGINT to this process, as a terminal's ^C: Python raises KeyboardInterrupt in the main thread."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)


def run_kind(kind: str, session: FakeSession, on_record=None, on_event=None):
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    if kind == "plain":
        return run_trial(loaded, session=session, on_event=on_event)
    record, _result = ndr_trial(loaded, SETTINGS, session, on_record or (lambda _r: None), on_event)
    return record


def interrupted_state(kind: str, tmp_path, during) -> dict:
    """Run one trial of ``kind`` as plan entry 0 of a run and interrupt it with ``during``; what is left."""
    db = tmp_path / f"{kind}.db"
    session = FakeSession(during)
    phases: list[str] = []
    on_event = lambda e: phases.append(e.message) if e.kind == "phase" else None  # noqa: E731
    raised = None
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with open_session(db, "quick", {}, [{"seq": 0, "config": {}, "repeat_index": 0}]) as run:
            with run.trial(0):
                run_kind(kind, session, run.add_measurement, on_event)
    except BaseException as exc:  # noqa: BLE001 - what the interruption raised is what is compared
        raised = type(exc)
    finally:
        signal.signal(signal.SIGINT, previous)
    with Store(db) as store:
        stored = [(t.status, t.error) for t in store.trials(status=None)]
        status = store.runs()[-1]["status"]
        missing = [e["seq"] for e in store.missing_plan(store.runs()[-1]["id"])]
    return {"raised": raised, "released": session.released, "lab_closed": session.lab.closed,
            "last_phase": phases[-1], "run": status, "trials": stored, "resumes": missing}


def test_sigint_mid_search_leaves_what_sigint_mid_trial_leaves(tmp_path):
    """SIGINT while an NDR search measures (its first calibration trial) and while a plain trial
    measures: both raise KeyboardInterrupt after the teardown phase, release the lab as a failed trial
    (a guest is powered off), and leave the run aborted with the plan entry aborted (resumable)."""
    plain = interrupted_state("plain", tmp_path, sigint)
    search = interrupted_state("ndr", tmp_path, sigint)
    assert plain == search
    assert plain["raised"] is KeyboardInterrupt and plain["released"] == [True] and plain["lab_closed"]
    assert plain["last_phase"] == "teardown" and plain["run"] == "aborted"
    assert plain["trials"] == [("aborted", "interrupted")] and plain["resumes"] == [0]


def test_a_search_broken_by_a_cancel_is_aborted_not_failed(tmp_path):
    """A face's cancel stops the lab's processes under the trial: the error that follows (here a
    WorkloadError) is the cancel's, so the trial raises Cancelled, as a plain trial does; before the one
    loop, an NDR search stored it as a failed trial."""
    scope = signals.CancelScope()

    def cancelled_then_broken():
        scope.cancel()
        raise WorkloadError("labgen exited (killed by the cancel)")

    states = []
    for kind in ("plain", "ndr"):
        with signals.stoppable(scope):
            states.append(interrupted_state(kind, tmp_path, cancelled_then_broken))
        scope = signals.CancelScope()
    assert states[0] == states[1] and states[0]["raised"] is Cancelled
    assert states[0]["trials"] == [("aborted", "interrupted")]


def test_a_broken_search_is_a_failed_trial_with_the_loop_s_timings():
    def broken():
        raise WorkloadError("labgen exited")

    for kind in ("plain", "ndr"):
        session = FakeSession(broken, waited_s=0.5)
        record = run_kind(kind, session)
        assert record.status == "failed" and record.error == "labgen exited", kind
        assert session.released == [True]
        assert record.details["cpu_wait_s"] == 0.5
        assert {"lab_up_s", "teardown_s", "trial_s"} <= set(record.details["timings"])
        assert record.finished_at is not None and record.finished_at >= record.started_at


def test_a_search_trial_records_the_loop_s_timings_and_cpu_wait(monkeypatch):
    """The search's own record: NDR/PDR in its metrics, and what every trial of the loop records (set-up
    timings, teardown_s, trial_s, cpu_wait_s), which an NDR search's record lacked before."""
    stored = []

    def find(lab, base, settings, on_record, on_event=None, latency=True, calibrations=None):
        on_record(base.model_copy(update={"details": {**base.details, "role": "search"}}))
        return NdrResult("mlrsearch", Bound(1.0, 0.9, 1.1), Bound(2.0, 1.9, 2.1), trials=1, trial_seconds=1.0)

    monkeypatch.setattr(ndr_module, "find_ndr", find)
    session = FakeSession(lambda: None, waited_s=0.25)
    loaded = load_profile(DOMAINS / "quick.yaml", cpus=CPUS)
    record, result = ndr_trial(loaded, SETTINGS, session, stored.append)
    assert record.status == "ok" and result is not None and session.released == [False]
    assert record.metrics.ndr_mpps == 1.0 and record.metrics.pdr_mpps == 2.0 and record.details["role"] == "ndr"
    assert record.details["cpu_wait_s"] == 0.25
    assert {"lab_up_s", "teardown_s", "trial_s"} <= set(record.details["timings"])
    assert [r.details["role"] for r in stored] == ["search"] and "timings" not in stored[0].details


@pytest.mark.parametrize("kind", ["plain", "ndr"])
def test_the_loop_uses_the_plan_derived_once(kind, monkeypatch):
    import labctl.measure.trial as trial_module

    derived = []
    original = trial_module.derive
    monkeypatch.setattr(trial_module, "derive", lambda profile: derived.append(original(profile)) or derived[-1])
    session = FakeSession(lambda: (_ for _ in ()).throw(WorkloadError("stop")))
    run_kind(kind, session)
    assert len(derived) == 1 and session.lab.plan is derived[0]
    assert derived[0] == derive(load_profile(DOMAINS / "quick.yaml", cpus=CPUS).profile)
