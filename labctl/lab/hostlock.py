"""The host's measurement lock: trials whose CPUs overlap never measure at the same time.

Labs share CPUs, not names: two labs with different names pinned to the same CPUs used to measure at
once (0.63 vs 3.64 Mpps, both "ok"). So every lab that is up for a trial holds one lock per host CPU it
may run on (:func:`plan_cpus`), in one host-wide directory (``LABCTL_LOCK_DIR``, default
``/run/lock/labctl``; not under the run directory, so that labs with their own run directories still
exclude each other).

- One lock file per CPU (``cpu<N>.lock``), a :class:`labctl.lab.lockfile.LockFile` that is never
  unlinked; the kernel drops a dead holder's ``flock``, so a ``kill -9`` leaves no stale lock.
- A claim takes its CPUs in ascending order: two claims can never each hold a CPU the other waits for
  (no cycle, so no deadlock). A claim that must grow while held (a guest kept up whose next trial pins
  elsewhere) releases everything and takes the new set in order again.
- The holder writes ``{"pid", "started", "lab", "cpus"}`` into each file it holds, so a waiter says whom
  it waits for (an event ``note``); ``wait=False`` (``--no-wait``) fails at once with
  :class:`~labctl.errors.CpusBusyError` naming the holder.
- Waiting polls through :func:`labctl.signals.sleep`: SIGTERM and a face's cancel stop a waiter.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from labctl.errors import CpusBusyError
from labctl.events import OnEvent, notify
from labctl.host.cpuset import format_cpuset, online_cpus, parse_cpuset
from labctl.lab.lockfile import LockFile, read_holder
from labctl.owner import me
from labctl.safefs import make_dir

DEFAULT_LOCK_DIR = "/run/lock/labctl"


def lock_dir() -> Path:
    return Path(os.environ.get("LABCTL_LOCK_DIR", DEFAULT_LOCK_DIR))


def plan_cpus(plan: Any) -> frozenset[int]:
    """The host CPUs a lab of ``plan`` may run its busy threads on: the vswitch / generator PMD cores,
    the vCPU (embedded: forwarder) pins and, for a guest, the emulator pin; every online CPU as soon as
    one of them is unpinned (it floats). DPDK main lcores float but sleep: they are not counted."""
    sets: list[frozenset[int] | None] = [*plan.pins.vcpu_cpus, *plan.vswitch.pmds]
    if plan.generator.kind == "labgen":
        sets += list(plan.generator.workers)
    if plan.lab == "libvirt":
        sets.append(parse_cpuset(plan.pins.emulator) if plan.pins.emulator else None)
    if any(s is None for s in sets) or not sets:
        return online_cpus()
    return frozenset().union(*sets)  # type: ignore[arg-type]


def holder_of(cpu: int) -> dict[str, Any] | None:
    """Who holds CPU ``cpu``'s lock, as it wrote itself there (None: nobody said)."""
    text = read_holder(lock_dir() / f"cpu{cpu}.lock")
    try:
        holder = json.loads(text) if text else None
    except ValueError:
        return None
    return holder if isinstance(holder, dict) else None


def describe_holder(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "another process"
    return f"pid {holder.get('pid')} (lab {holder.get('lab')}, CPUs {holder.get('cpus')})"


class CpuClaim:
    """The CPUs one lab measures on, held from its set-up to its teardown."""

    def __init__(self, lab: str, on_event: OnEvent | None = None, wait: bool = True):
        self.lab = lab
        self.on_event = on_event
        self.wait = wait
        self.cpus: frozenset[int] = frozenset()
        self._locks: list[LockFile] = []
        self.waited_s = 0.0

    @property
    def held(self) -> bool:
        return bool(self._locks)

    def acquire(self, cpus: Iterable[int]) -> None:
        """Hold every CPU of ``cpus`` (waiting, or failing at once when ``wait`` is false)."""
        wanted = frozenset(cpus)
        if self._locks and wanted <= self.cpus:
            return
        self.release()
        directory = make_dir(lock_dir(), 0o755)  # other users may read who holds a CPU; only root locks
        owner = {**me(), "lab": self.lab, "cpus": format_cpuset(wanted)}
        text = json.dumps(owner, sort_keys=True)
        t0 = time.monotonic()
        try:
            for cpu in sorted(wanted):
                lock = LockFile(directory / f"cpu{cpu}.lock")
                if not lock.try_acquire():
                    self._wait_for(lock, cpu, wanted)
                lock.write(text)
                self._locks.append(lock)
        except BaseException:
            self.release()
            raise
        self.cpus = wanted
        self.waited_s = time.monotonic() - t0

    def _wait_for(self, lock: LockFile, cpu: int, wanted: frozenset[int]) -> None:
        told: list[str] = []

        def say() -> None:
            who = describe_holder(holder_of(cpu))
            if who not in told:
                told.append(who)
                notify(self.on_event, "note", lab=self.lab,
                       message=f"waiting for CPU {cpu}: {who} is measuring on it "
                               f"(this trial needs CPUs {format_cpuset(wanted)})")

        if not self.wait:
            raise CpusBusyError(f"lab {self.lab}: CPU {cpu} is being measured by {describe_holder(holder_of(cpu))} "
                                f"(this trial needs CPUs {format_cpuset(wanted)}; without --no-wait it waits)")
        say()
        lock.acquire(None, on_wait=say)

    def release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()
        self._locks = []
        self.cpus = frozenset()
