"""Lock files that may be unlinked by their holder without a race.

A ``flock`` lives on an inode, not on a path. The old scheme (open, lock, ..., unlink, unlock) let a
process that had opened the file before the unlink get the lock on the deleted inode while a third
process created a new file at the same path and locked that one: two holders. Here:

1. open the path (``O_CREAT | O_NOFOLLOW``: a symlink planted there is refused, never followed),
2. ``flock`` the descriptor,
3. compare the descriptor's (device, inode) with the path's (``os.stat`` after the lock): when they
   differ (the holder unlinked it, maybe somebody made a new one), close and start again.

Only a holder ever unlinks the path, and it does so while it still holds the lock (:meth:`LockFile.release`
with ``unlink=True``). So whenever a process passes step 3 the path names the inode it locked, and no
other process can pass step 3 on that inode's successor until the holder has unlocked: one holder at a
time. An unlinked inode that a waiter still has open is not freed, so its number cannot be reused by
the new file while the waiter compares. ``tests/unit/lab/test_lockfile.py`` races 20 processes on it.

Every wait polls with ``LOCK_NB`` and :func:`labctl.signals.sleep`, so SIGTERM and a face's cancel stop
a waiter at once.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path
from typing import Callable

from labctl import signals
from labctl.errors import StateError

POLL_S = 0.05


class LockFile:
    """One exclusive lock on ``path`` (created 0640, never through a symlink)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.fd: int | None = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if it is free now; True when held."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise StateError(f"lock {self.path}: is a symbolic link; labctl does not follow it "
                                     "(remove it after checking who planted it)") from None
                raise StateError(f"lock {self.path}: cannot open: {exc.strerror}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            try:
                now = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                now = None
            mine = os.fstat(fd)
            if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                self.fd = fd
                return True
            os.close(fd)  # the holder unlinked it after we opened it: lock the file that is there now

    def acquire(self, wait_s: float | None = None, on_wait: Callable[[], None] | None = None) -> None:
        """Wait for the lock (``wait_s``: at most that long, then :class:`StateError`; None: as long as it
        takes; 0: fail at once). ``on_wait`` is called on every poll while waiting."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while not self.try_acquire():
            if deadline is not None and time.monotonic() >= deadline:
                raise StateError(f"lock {self.path}: held by another process")
            if on_wait is not None:
                on_wait()
            signals.sleep(POLL_S)

    def write(self, text: str) -> None:
        """Replace the lock file's content (who holds it) while holding it."""
        assert self.fd is not None
        data = text.encode("utf-8")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self, unlink: bool = False) -> None:
        """Unlock; ``unlink``: remove the path first, while the lock is still held (see the module docstring)."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            if unlink:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            else:
                os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def read_holder(path: str | Path) -> str:
    """What a lock file says about its holder ('' when nothing, or unreadable); never follows a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, 4096).decode("utf-8", "replace")
    finally:
        os.close(fd)
