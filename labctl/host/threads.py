"""Reading threads back from the kernel: names and CPU affinity of a process's threads, the DPDK
workers' and QEMU's vCPU and emulator threads (what a pin became, not what was asked)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from labctl import platform
from labctl.host.cpuset import format_cpuset

_QEMU_VCPU = re.compile(r"^CPU (\d+)/(TCG|KVM)$")


def _threads(pid: int) -> list[tuple[int, str]]:
    found = []
    try:
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            try:
                name = Path(f"/proc/{pid}/task/{tid}/comm").read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                continue
            found.append((tid, name))
    except OSError:
        pass
    return found


def _affinity(tid: int) -> str | None:
    try:
        return format_cpuset(os.sched_getaffinity(tid))
    except OSError:
        return None


def dpdk_worker_pins(role: str, pid: int) -> dict[str, str]:
    """Affinity of a DPDK process's worker threads (rte-worker-N / lcore-worker-N)."""
    return {f"{role}.{name}": aff for tid, name in _threads(pid)
            if name.startswith(("rte-worker", "lcore-worker")) and (aff := _affinity(tid)) is not None}


def named_thread_pins(pid: int, prefix: str) -> dict[str, str]:
    """Affinity of a process's threads whose name starts with ``prefix`` (OVS's ``pmd-c01/id:8``), by name."""
    return {name: aff for tid, name in _threads(pid) if name.startswith(prefix) and (aff := _affinity(tid)) is not None}


def qemu_thread_pins(pid: int) -> dict[str, Any]:
    """vCPU threads ("CPU n/TCG|KVM") and the emulator (main) thread of a QEMU process."""
    pins: dict[str, Any] = {"vcpus": {}, "emulator": _affinity(pid)}
    for tid, name in _threads(pid):
        match = _QEMU_VCPU.match(name)
        if match:
            pins["vcpus"][int(match.group(1))] = _affinity(tid)
    return pins


def qemu_thread_kind(name: str, main: bool = False) -> str:
    """What a QEMU thread does, from its name: ``vcpuN`` ("CPU N/TCG|KVM"), ``emulator`` (the main
    thread: the main loop, QEMU's userspace virtio-net backend on tap NICs), ``io`` ("IO <iothread>"),
    ``vhost`` ("vhost-<pid>": vhost-net workers are QEMU's threads since Linux 6.4), ``worker`` (the
    thread pool), else ``other`` (call_rcu, ...)."""
    match = _QEMU_VCPU.match(name)
    if match:
        return f"vcpu{match.group(1)}"
    if main:
        return "emulator"
    if name.startswith("IO "):
        return "io"
    if name.startswith("vhost-"):
        return "vhost"
    if name == "worker":
        return "worker"
    return "other"


def vhost_worker_tids(pid: int) -> list[int]:
    """The vhost-net worker threads of a QEMU process (Linux 6.4 and later name them ``vhost-<pid>``)."""
    return [tid for tid, name in _threads(pid) if name.startswith("vhost-")]


def qemu_pid(domain: str) -> int | None:
    for root in platform.LIBVIRT_QEMU_RUN_DIRS:
        try:
            return int((root / f"{domain}.pid").read_text().strip())
        except (OSError, ValueError):
            continue
    return None
