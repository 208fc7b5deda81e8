"""A DPDK process started with its runtime recorded first, so a labctl killed at any point leaves nothing
running that ``labctl down`` cannot find.

DPDK names a process's runtime by its ``--file-prefix`` (DPDK "EAL parameters", Linux guide): its runtime
directory is ``/var/run/dpdk/<prefix>`` when run as root (telemetry socket, config; DPDK
``lib/eal/linux/eal.c`` ``eal_create_runtime_dir``), and every process started with the prefix can be
found by its command line. Recording the prefix and the
directory before the start, and the pid with its start time after it, is what lets the crash paths remove
a process whose pid was never written down. The ledger is passed in (typed by :class:`Ledger`): its
resource kinds ``dpdk``, ``dir`` and ``process`` are :mod:`labctl.lab.kinds`'.
"""

from __future__ import annotations

from typing import Any, Protocol

from labctl.dpdk.eal import EalOptions
from labctl.dpdk.telemetry import RUNTIME_ROOT
from labctl.owner import process_started


class Ledger(Protocol):
    """Where created resources are recorded (:class:`labctl.lab.ledger.LabState`)."""

    def record(self, kind: str, ident: str, **data: Any) -> Any:
        """Record a resource about to be created, on disk before it returns."""


class DpdkProcess(Protocol):
    """A DPDK application labctl starts (testpmd, labgen)."""

    role: str
    eal: EalOptions

    def start(self) -> int:
        """Start it; its pid."""

    def start_daemon(self) -> int:
        """Start it to outlive labctl; its pid."""


def start_recorded(ledger: Ledger, proc: DpdkProcess, daemon: bool = False) -> int:
    """Record the DPDK file prefix and runtime directory, start ``proc`` (as a daemon: it outlives
    labctl), record its pid with its start time; the pid."""
    ledger.record("dpdk", proc.eal.file_prefix)
    ledger.record("dir", str(RUNTIME_ROOT / proc.eal.file_prefix))
    pid = proc.start_daemon() if daemon else proc.start()
    ledger.record("process", str(pid), role=proc.role, started=process_started(pid))
    return pid
