"""Lock files under a race: many processes, a lock unlinked on every release (defect 3 of the faults issue).

The per-lab lock (``ledger.locked``) used to unlink its file on release while another process waited on
it: the waiter then held a lock on a deleted file while a third process locked a new one. These tests
race 20 processes on it and check mutual exclusion with a shared counter file (read, pause, write back:
two holders at once lose an increment) and an ``O_EXCL`` marker (two holders at once fail to create it).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from labctl.errors import StateError
from labctl.lab.lockfile import LockFile

PROCESSES = 20
ROUNDS = 40


def _critical(counter: Path, marker: Path) -> None:
    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # FileExistsError: two holders at once
    os.close(fd)
    value = int(counter.read_text() or 0)
    time.sleep(0.0005)
    counter.write_text(str(value + 1))
    os.unlink(marker)


def _worker_lockfile(lock_path: str, counter: str, marker: str, errors) -> None:
    try:
        for _ in range(ROUNDS):
            lock = LockFile(lock_path)
            lock.acquire(60.0)
            try:
                _critical(Path(counter), Path(marker))
            finally:
                lock.release(unlink=True)  # the hard case: every release removes the file
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        errors.put(repr(exc))


def _worker_ledger(state_dir: str, counter: str, marker: str, errors) -> None:
    os.environ["LABCTL_STATE_DIR"] = state_dir
    from labctl.lab.ledger import locked

    try:
        for _ in range(ROUNDS):
            with locked("fx-race", wait_s=60.0):  # no state file: every release unlinks the lock file
                _critical(Path(counter), Path(marker))
    except BaseException as exc:  # noqa: BLE001
        errors.put(repr(exc))


def _race(target, first_arg: str, tmp_path: Path) -> None:
    counter, marker = tmp_path / "counter", tmp_path / "inside"
    counter.write_text("0")
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=target, args=(first_arg, str(counter), str(marker), errors)) for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(240)
    assert all(p.exitcode == 0 for p in procs)
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert found == []
    assert int(counter.read_text()) == PROCESSES * ROUNDS


def test_twenty_processes_unlinking_lockfile_keep_mutual_exclusion(tmp_path):
    _race(_worker_lockfile, str(tmp_path / "x.lock"), tmp_path)


def test_twenty_processes_on_the_lab_lock_keep_mutual_exclusion(tmp_path):
    """Defect 3 as the ledger meets it: the lab's lock file is removed whenever no state is left."""
    _race(_worker_ledger, str(tmp_path / "state"), tmp_path)
    assert not (tmp_path / "state" / "fx-race.lock").exists()  # still tidy: no lock file left behind


def test_a_waiter_on_an_unlinked_file_never_holds_it_beside_a_new_holder(tmp_path):
    """The interleaving of defect 3, step by step: B has the old file open when A unlinks and releases it,
    C locks the new file; B's lock on the deleted inode must not count."""
    path = tmp_path / "l.lock"
    a = LockFile(path)
    assert a.try_acquire()
    b = LockFile(path)
    stale = os.open(path, os.O_RDWR)  # what the old code's waiter held open
    a.release(unlink=True)
    c = LockFile(path)
    assert c.try_acquire()
    import fcntl

    fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old waiter "gets" the deleted file's lock...
    assert not b.try_acquire()  # ...but LockFile checks the inode: B waits for C
    os.close(stale)
    c.release()
    assert b.try_acquire()
    b.release()


def test_a_symlink_at_a_lock_path_is_refused(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "l.lock").symlink_to(victim)
    with pytest.raises(StateError, match="symbolic link"):
        LockFile(tmp_path / "l.lock").try_acquire()
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("wait_s, waits", [(0, False), (0.2, True)], ids=["zero", "bounded"])
def test_wait_zero_fails_at_once_and_a_bounded_wait_polls_first(tmp_path, wait_s, waits):
    """``wait_s=0`` tries once and fails: it never polls (``on_wait`` is called on every poll of a wait);
    a positive ``wait_s`` does wait (it polls) before it gives up."""
    holder = LockFile(tmp_path / "l.lock")
    holder.acquire(0)
    polls: list[None] = []
    with pytest.raises(StateError, match="held by another process"):
        LockFile(tmp_path / "l.lock").acquire(wait_s, on_wait=lambda: polls.append(None))
    assert bool(polls) == waits
    holder.release()
