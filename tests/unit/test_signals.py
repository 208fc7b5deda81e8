"""Stopping work cleanly on any thread: SIGTERM and a face's cancel reach the work as exceptions."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from labctl import signals
from labctl.errors import Cancelled, Terminated


#: longer than any test waits: the worker's sleep ends early only when a cancel or SIGTERM wakes it
FOREVER_S = 3600.0


def _worker(scope, outcome: dict, sleeping: threading.Event | None = None) -> None:
    try:
        with signals.stoppable(scope):
            try:
                if sleeping is not None:
                    sleeping.set()
                signals.sleep(FOREVER_S)
            finally:
                outcome["cleaned"] = True  # a trial's teardown runs here
    except BaseException as exc:  # noqa: BLE001 - the test looks at what arrived
        outcome["raised"] = type(exc)


def test_cancel_stops_work_on_a_worker_thread_at_once():
    """The worker sleeps for an hour; only the cancel can end that sleep within the join's bound."""
    scope, outcome, sleeping = signals.CancelScope(), {}, threading.Event()
    worker = threading.Thread(target=_worker, args=(scope, outcome, sleeping), daemon=True)
    worker.start()
    assert sleeping.wait(30)
    assert worker.is_alive() and outcome == {}  # still asleep: nothing has ended it yet
    scope.cancel()
    worker.join(60)
    assert not worker.is_alive()  # woken by the cancel: its sleep had an hour to go
    assert outcome == {"cleaned": True, "raised": Cancelled}


def test_sigterm_reaches_work_on_a_worker_thread():
    """A face that runs trials on threads installs the handler; SIGTERM then stops every scope."""
    previous = signal.getsignal(signal.SIGTERM)
    asked_to_exit = threading.Event()
    try:
        signals.install(on_terminate=asked_to_exit.set)
        outcome: dict = {}
        sleeping = threading.Event()
        worker = threading.Thread(target=_worker, args=(signals.CancelScope(), outcome, sleeping), daemon=True)
        worker.start()
        assert sleeping.wait(30)
        os.kill(os.getpid(), signal.SIGTERM)
        worker.join(60)
        assert not worker.is_alive() and outcome == {"cleaned": True, "raised": Terminated} and asked_to_exit.is_set()
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_on_the_main_thread_raises_terminated_and_the_handler_is_restored():
    previous = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(Terminated):
        with signals.stoppable():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signals.sleep(5)
            finally:
                cleaned.append(True)
    assert cleaned == [True] and signal.getsignal(signal.SIGTERM) == previous


def test_checkpoint_outside_any_scope_does_nothing(monkeypatch):
    signals.checkpoint()
    slept = []
    monkeypatch.setattr(signals.time, "sleep", slept.append)
    signals.sleep(0.01)
    signals.sleep(-1.0)
    assert slept == [0.01, 0.0]  # outside a scope: a plain sleep, never negative
