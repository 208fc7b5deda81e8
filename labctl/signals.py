"""Stopping work cleanly: SIGTERM and a face's cancel become exceptions where the work runs.

Work that creates resources runs inside :func:`stoppable`. On the main thread, SIGTERM then raises
:class:`~labctl.errors.Terminated` at once (as SIGINT raises KeyboardInterrupt), so the ``finally``
blocks that tear a lab down run. A thread cannot receive a signal: work on a face's worker thread (the
TUI) runs in a :class:`CancelScope`, and SIGTERM (caught on the main thread by the handler that
:func:`install` or a main-thread :func:`stoppable` sets) or the face's ``scope.cancel()`` marks every
scope; the work raises ``Terminated`` or :class:`~labctl.errors.Cancelled` at its next checkpoint.
Every wait in labctl is a checkpoint: :func:`sleep`, :func:`checkpoint` in polling loops (testpmd's
prompt, vhost-user links, the guest's report), so a cancelled trial stops within a fraction of a second.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any, Callable, Iterator

from labctl.errors import Cancelled, Interrupted, Terminated

__all__ = ["CancelScope", "stoppable", "install", "checkpoint", "sleep", "current"]


class CancelScope:
    """A piece of work that can be told to stop; thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: type[Interrupted] = Cancelled

    def cancel(self, reason: type[Interrupted] = Cancelled) -> None:
        if not self._event.is_set():
            self._reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise self._reason(self._reason.message)

    def sleep(self, seconds: float) -> None:
        """Sleep, waking (and raising) at once when cancelled."""
        self._event.wait(max(seconds, 0.0))
        self.check()


_local = threading.local()
_active: set[CancelScope] = set()
_lock = threading.Lock()


def current() -> CancelScope | None:
    """The scope of the work this thread runs, if any."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def checkpoint() -> None:
    """Raise ``Terminated``/``Cancelled`` here if this thread's work was told to stop."""
    scope = current()
    if scope is not None:
        scope.check()


def sleep(seconds: float) -> None:
    """``time.sleep`` that a cancel or SIGTERM interrupts (at once, on any thread)."""
    scope = current()
    if scope is None:
        time.sleep(max(seconds, 0.0))
    else:
        scope.sleep(seconds)


def cancel_all(reason: type[Interrupted] = Terminated) -> None:
    """Tell every piece of work in flight, on any thread, to stop."""
    with _lock:
        scopes = list(_active)
    for scope in scopes:
        scope.cancel(reason)


def _raise_terminated(signum: int, frame: Any) -> None:
    cancel_all(Terminated)
    raise Terminated(Terminated.message)


def install(on_terminate: Callable[[], None] | None = None) -> None:
    """For faces that run work on other threads (the TUI): on the main thread, make SIGTERM stop every
    scope in flight and then call ``on_terminate`` (e.g. ask the app to exit once its workers are done)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signals.install() must be called on the main thread")

    def handler(signum: int, frame: Any) -> None:
        cancel_all(Terminated)
        if on_terminate is not None:
            on_terminate()

    signal.signal(signal.SIGTERM, handler)


@contextlib.contextmanager
def stoppable(scope: CancelScope | None = None) -> Iterator[CancelScope]:
    """Run work that SIGTERM and ``scope.cancel()`` stop cleanly (see the module docstring).

    Nested uses join the outer scope. On the main thread SIGTERM raises ``Terminated`` here unless a
    face has installed its own handler (:func:`install`)."""
    outer = current()
    if outer is not None and scope is None:
        yield outer
        return
    scope = scope or CancelScope()
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(scope)
    with _lock:
        _active.add(scope)
    previous = None
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield scope
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        with _lock:
            _active.discard(scope)
        stack.pop()
