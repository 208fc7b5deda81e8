"""Stopping work cleanly on any thread: SIGTERM and a face's cancel reach the work as exceptions."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from labctl import signals
from labctl.errors import Cancelled, Terminated


def _worker(scope, outcome: dict) -> None:
    try:
        with signals.stoppable(scope):
            try:
                signals.sleep(30)
            finally:
                outcome["cleaned"] = True  # a trial's teardown runs here
    except BaseException as exc:  # noqa: BLE001 - the test looks at what arrived
        outcome["raised"] = type(exc)


def test_cancel_stops_work_on_a_worker_thread_at_once():
    scope, outcome = signals.CancelScope(), {}
    worker = threading.Thread(target=_worker, args=(scope, outcome))
    worker.start()
    time.sleep(0.2)
    started = time.monotonic()
    scope.cancel()
    worker.join(5)
    assert not worker.is_alive() and time.monotonic() - started < 1.0
    assert outcome == {"cleaned": True, "raised": Cancelled}


def test_sigterm_reaches_work_on_a_worker_thread():
    """A face that runs trials on threads installs the handler; SIGTERM then stops every scope."""
    previous = signal.getsignal(signal.SIGTERM)
    asked_to_exit = threading.Event()
    try:
        signals.install(on_terminate=asked_to_exit.set)
        outcome: dict = {}
        worker = threading.Thread(target=_worker, args=(signals.CancelScope(), outcome))
        worker.start()
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGTERM)
        worker.join(5)
        assert outcome == {"cleaned": True, "raised": Terminated} and asked_to_exit.is_set()
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


def test_checkpoint_outside_any_scope_does_nothing():
    signals.checkpoint()
    started = time.monotonic()
    signals.sleep(0.01)
    assert time.monotonic() - started >= 0.01
