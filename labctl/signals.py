"""SIGTERM handling: turn it into an exception so clean-up code runs, as it does for SIGINT."""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator


class Terminated(BaseException):
    """labctl received SIGTERM. A BaseException, like KeyboardInterrupt, so that no `except Exception`
    in clean-up code swallows it; the CLI reports it in one line and exits 143."""

    exit_code = 143


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated("terminated by SIGTERM")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
