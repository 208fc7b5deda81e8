"""The host's resource kinds in the ledger: processes, DPDK runtimes, tagged processes, files,
directories, mounts, tap devices and sysctl changes (see :mod:`labctl.lab.ledger`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import psutil

from labctl.lab.ledger import Resource, ResourceKind, resource_kind
from labctl.host.processes import stop_process, tagged_processes
from labctl.owner import process_alive, process_started

__all__ = ["process_alive", "stop_process", "dpdk_processes"]


def dpdk_processes(prefix: str) -> list[psutil.Process]:
    """Every process started with ``--file-prefix PREFIX``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(cmdline[i] == "--file-prefix" and cmdline[i + 1] == prefix for i in range(len(cmdline) - 1)):
            found.append(proc)
    return found


@resource_kind
class ProcessKind(ResourceKind):
    """A process labctl started: ident is the pid, ``started`` its start time (a reused pid is spared)."""

    name = "process"

    def remove(self, resource: Resource) -> None:
        stop_process(int(resource.ident), resource.data.get("started"))

    def verify(self, resource: Resource) -> bool:
        return process_alive(int(resource.ident), resource.data.get("started"))


@resource_kind
class DpdkKind(ResourceKind):
    """A DPDK file prefix: every process started with it is stopped (recorded before it was started, so
    a labctl killed between starting it and recording its pid still leaves nothing running)."""

    name = "dpdk"

    def remove(self, resource: Resource) -> None:
        for proc in dpdk_processes(resource.ident):
            with contextlib.suppress(psutil.Error):
                stop_process(proc.pid, process_started(proc.pid))

    def verify(self, resource: Resource) -> bool:
        return bool(dpdk_processes(resource.ident))


@resource_kind
class TaggedKind(ResourceKind):
    """Processes started with ``LABCTL_TAG=<ident>`` in their environment (a lab's host-side iperf3 and
    sockperf clients and servers): recorded once before the first is started, so whatever a killed
    labctl left running is found by its tag, never by a name alone. ``names`` narrows the search."""

    name = "tagged"

    def remove(self, resource: Resource) -> None:
        for proc in tagged_processes(resource.ident, resource.data.get("names", ())):
            with contextlib.suppress(psutil.Error):
                stop_process(proc.pid, process_started(proc.pid), timeout_s=5.0)

    def verify(self, resource: Resource) -> bool:
        return bool(tagged_processes(resource.ident, resource.data.get("names", ())))


@resource_kind
class PathKind(ResourceKind):
    """A file or socket."""

    name = "path"

    def remove(self, resource: Resource) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(resource.ident)

    def verify(self, resource: Resource) -> bool:
        return os.path.lexists(resource.ident)


@resource_kind
class DirKind(ResourceKind):
    """A directory labctl made, removed with what it holds."""

    name = "dir"

    def remove(self, resource: Resource) -> None:
        shutil.rmtree(resource.ident, ignore_errors=True)

    def verify(self, resource: Resource) -> bool:
        return os.path.isdir(resource.ident)


@resource_kind
class MountKind(ResourceKind):
    """A mount point (the lab's hugetlbfs), unmounted and its directory removed."""

    name = "mount"

    def remove(self, resource: Resource) -> None:
        if os.path.ismount(resource.ident):
            subprocess.run(["umount", resource.ident], check=False, capture_output=True)
        with contextlib.suppress(OSError):
            os.rmdir(resource.ident)

    def verify(self, resource: Resource) -> bool:
        return os.path.ismount(resource.ident)


@resource_kind
class TapKind(ResourceKind):
    """A tap device (QEMU creates it for a managed <target dev>; labctl deletes what is left)."""

    name = "tap"

    def remove(self, resource: Resource) -> None:
        if self.verify(resource):
            subprocess.run(["ip", "link", "delete", resource.ident], check=False, capture_output=True)

    def verify(self, resource: Resource) -> bool:
        return Path(f"/sys/class/net/{resource.ident}").exists()


@resource_kind
class SysctlKind(ResourceKind):
    """A counter labctl raised (the 2 MiB hugepage pool): ``added`` is given back, never more."""

    name = "sysctl"

    def remove(self, resource: Resource) -> None:
        added = int(resource.data.get("added", 0))
        if added > 0:
            path = Path(resource.ident)
            current = int(path.read_text(encoding="ascii").strip() or 0)
            path.write_text(f"{max(current - added, 0)}\n", encoding="ascii")

    def verify(self, resource: Resource) -> bool:
        return int(resource.data.get("added", 0)) > 0
