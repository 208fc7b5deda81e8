"""The host's measurement lock: overlapping CPUs never measure at once, whatever the lab names
(defect 1 of the faults issue, on the lock itself; tests/integration/test_shared_host.py runs it for real)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from labctl.errors import CpusBusyError
from labctl.host.cpuset import online_cpus
from labctl.lab.hostlock import CpuClaim, holder_of, plan_cpus
from labctl.lab.plan import derive
from labctl.profile.load import load_profile
from tests.conftest import CPUS, DOMAINS


def _hold(cpus, ready, release, released):
    claim = CpuClaim("fx-holder")
    claim.acquire(cpus)
    ready.set()
    release.wait(30)
    claim.release()
    released.set()  # after the release: a waiter that got the CPUs before this is set did not wait


@pytest.fixture
def holder():
    ctx = multiprocessing.get_context("fork")
    ready, release, released = ctx.Event(), ctx.Event(), ctx.Event()
    procs = []

    def start(cpus):
        proc = ctx.Process(target=_hold, args=(frozenset(cpus), ready, release, released))
        proc.start()
        assert ready.wait(10)
        procs.append(proc)
        return proc, release, released

    yield start
    if all(p.is_alive() for p in procs):  # a killed holder may have died inside the event's own lock
        release.set()
    for proc in procs:
        proc.join(10)


def test_plan_cpus_are_the_pins_or_every_online_cpu():
    pinned = derive(load_profile(DOMAINS / "quick.yaml", cpus=CPUS).profile)
    assert plan_cpus(pinned) == {0, 1}  # vswitch PMD on 0, the guest forwarder on 1
    data = load_profile(DOMAINS / "quick.yaml", cpus=CPUS).profile.model_dump()
    data["guest"]["pinning"] = {"vcpus": {}, "vhost": None, "emulator": None}
    from labctl.profile.schema import Profile

    assert plan_cpus(derive(Profile.model_validate(data))) == online_cpus()  # unpinned: it floats


def test_a_second_claim_waits_and_says_for_whom(holder):
    """The holder is told to let go only once the waiter has said whom it waits for; the waiter's claim
    returns only after the holder has released (the event order, not a time)."""
    proc, release, released = holder({0})
    assert holder_of(0)["pid"] == proc.pid and holder_of(0)["lab"] == "fx-holder"
    notes = []
    claim = CpuClaim("fx-waiter", on_event=lambda e: notes.append(e.message))
    import threading

    def release_once_waiting() -> None:
        while not notes:
            time.sleep(0.01)
        release.set()

    releaser = threading.Thread(target=release_once_waiting, daemon=True)
    releaser.start()
    claim.acquire({0, 1})
    assert released.is_set()  # it waited for the holder's release
    assert notes and f"pid {proc.pid} (lab fx-holder, CPUs 0)" in notes[0] and "CPUs 0-1" in notes[0]
    assert holder_of(0)["lab"] == "fx-waiter" and holder_of(1)["lab"] == "fx-waiter"
    claim.release()
    releaser.join(5)


def test_no_wait_fails_at_once_naming_the_holder(holder):
    proc, _release, _released = holder({1})
    claim = CpuClaim("fx-b", wait=False)
    with pytest.raises(CpusBusyError, match=rf"CPU 1 is being measured by pid {proc.pid} \(lab fx-holder"):
        claim.acquire({0, 1})
    assert CpusBusyError.exit_code == 1
    assert not claim.held
    other = CpuClaim("fx-c", wait=False)
    other.acquire({0})  # the failed claim let CPU 0 go again
    other.release()


def test_disjoint_cpus_do_not_wait(holder):
    holder({0})
    claim = CpuClaim("fx-d", wait=False)
    claim.acquire({1})  # without wait: a busy CPU 1 would raise CpusBusyError here
    assert claim.held and holder_of(1)["lab"] == "fx-d" and holder_of(0)["lab"] == "fx-holder"
    claim.release()


def test_a_killed_holder_frees_its_cpus(holder):
    proc, _release, _released = holder({0, 1})
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(5)
    claim = CpuClaim("fx-e", wait=False)
    claim.acquire({0, 1})  # without wait: a lock the dead holder still had would raise CpusBusyError here
    assert claim.held and holder_of(0)["lab"] == holder_of(1)["lab"] == "fx-e"
    claim.release()


def test_a_waiter_is_stopped_by_a_cancel(holder):
    from labctl import signals
    from labctl.errors import Cancelled

    holder({0})
    scope = signals.CancelScope()
    import threading

    threading.Timer(0.3, scope.cancel).start()
    with signals.stoppable(scope), pytest.raises(Cancelled):
        CpuClaim("fx-f").acquire({0})
