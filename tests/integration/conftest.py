from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from labctl.dpdk.telemetry import RUNTIME_ROOT


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


needs_dpdk = pytest.mark.skipif(shutil.which("dpdk-testpmd") is None, reason="dpdk-testpmd not installed")


def labctl_processes() -> list[psutil.Process]:
    """This test's DPDK processes: their command lines name its run directory (LABCTL_RUN_DIR, a
    temporary directory per test), so other labctl sessions on this host are not counted."""
    run_dir = os.environ.get("LABCTL_RUN_DIR", "/run/labctl")
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any("dpdk-testpmd" in part for part in cmdline[:4]) and any(run_dir in part for part in cmdline):
            found.append(proc)
    return found


def _runtime_dirs() -> set[str]:
    """labctl DPDK runtime directories that no running process owns (a live process's directory is that
    process's; one left behind by a process that has gone is a leak)."""
    if not RUNTIME_ROOT.exists():
        return set()
    owned = set()
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        owned.update(cmdline[i + 1] for i in range(len(cmdline) - 1) if cmdline[i] == "--file-prefix")
    return {p.name for p in RUNTIME_ROOT.glob("labctl-*") if p.name not in owned}


@pytest.fixture
def no_leftovers(tmp_path):
    """Asserts, after the test, that it left no labctl testpmd, socket, runtime dir or hugetlbfs mount
    (compared with what was there before it: other labctl sessions on this host are not this test's)."""
    before_pages = _pool()
    before_procs = {p.pid for p in labctl_processes()}
    before_dirs = _runtime_dirs()
    yield
    assert [p for p in labctl_processes() if p.pid not in before_procs] == []
    assert _runtime_dirs() - before_dirs == set()
    run = tmp_path / "run"
    assert not run.exists() or not any(run.rglob("*")), list(run.rglob("*"))
    mounts = Path("/proc/mounts").read_text()
    assert str(tmp_path) not in mounts
    assert _pool() == before_pages


def _pool() -> int:
    try:
        return int(Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages").read_text())
    except OSError:
        return 0
