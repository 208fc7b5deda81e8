from __future__ import annotations

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
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any("dpdk-testpmd" in part for part in cmdline[:4]) and any("labctl-" in part for part in cmdline):
            found.append(proc)
    return found


@pytest.fixture
def no_leftovers(tmp_path):
    """Asserts, after the test, that no labctl testpmd, socket, runtime dir or hugetlbfs mount is left."""
    before_pages = _pool()
    yield
    assert labctl_processes() == []
    assert not [p for p in RUNTIME_ROOT.glob("labctl-*")] if RUNTIME_ROOT.exists() else True
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
