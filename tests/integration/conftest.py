from __future__ import annotations

import os
import shutil
import sqlite3
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
        dpdk = any("dpdk-testpmd" in part or part.endswith("/labgen") for part in cmdline[:4])
        if dpdk and any(run_dir in part for part in cmdline):
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


LIBVIRT_URI = "qemu:///system"
needs_libvirtd = pytest.mark.skipif(not Path("/run/libvirt/libvirt-sock").exists(), reason="libvirtd is not running")


def dpdk_processes_of(prefix: str) -> list[psutil.Process]:
    """DPDK processes whose --file-prefix starts with ``prefix`` (a test's own lab names)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(cmdline[i] == "--file-prefix" and cmdline[i + 1].startswith(prefix) for i in range(len(cmdline) - 1)):
            found.append(proc)
    return found


@pytest.fixture(autouse=True)
def appliance_cache(monkeypatch):
    """The appliance cache is shared across tests (the first build downloads the kernel)."""
    monkeypatch.setenv("LABCTL_CACHE_DIR", os.environ.get("LABCTL_CACHE_DIR", "/var/cache/labctl/appliance"))


@pytest.fixture
def clean_lab(tmp_path, monkeypatch):
    """Run and log dirs QEMU (user libvirt-qemu) can reach: pytest's tmp dirs are private to root."""
    import shutil

    shared = Path("/run/labctl-test") / tmp_path.name
    shared.mkdir(parents=True, exist_ok=True)
    for directory in (shared.parent, shared):
        directory.chmod(0o755)
    monkeypatch.setenv("LABCTL_RUN_DIR", str(shared / "run"))
    monkeypatch.setenv("LABCTL_LOG_DIR", str(shared / "log"))
    yield
    run = shared / "run"
    socks = list(run.rglob("*.sock")) if run.exists() else []
    shutil.rmtree(shared, ignore_errors=True)
    assert socks == [], "sockets left behind"
    from labctl.lab.libvirt import hypervisor

    leftovers = [d["domain"] for d in hypervisor.labctl_domains(LIBVIRT_URI)]
    for name in leftovers:
        hypervisor.remove_domain(LIBVIRT_URI, name)
    assert leftovers == [], "a test left a labctl domain defined"
    assert labctl_processes() == [] and dpdk_processes_of("labctl-it-") == []
    taps = [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("lct")]
    assert taps == []




def run_until_measuring(argv: list[str], timeout_s: float = 300.0):
    """Start a labctl command (SIGINT at its default, as from a terminal) and return its Popen once it has
    said "[measure]" on stderr: a trial is in its measurement window."""
    import subprocess
    import time

    from tests.conftest import ROOT, default_sigint

    proc = subprocess.Popen(argv, cwd=ROOT, env=os.environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.time() + timeout_s
    lines: list[str] = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "[measure]" in line or not line:
            break
    if not any("[measure]" in line for line in lines):
        proc.kill()
        proc.communicate()
        raise AssertionError(f"no trial reached its window: {lines[-5:]}")
    return proc


def _ovs_installed() -> bool:
    from labctl.lab.ovs import commands as ovs_cmd

    return Path(ovs_cmd.VSWITCHD).exists()


needs_ovs = pytest.mark.skipif(not _ovs_installed(), reason="openvswitch-switch-dpdk not installed")


def ovs_daemons(lab: str) -> list:
    """ovsdb-server/ovs-vswitchd processes of a lab (their command lines name the lab's OVS directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if ("ovsdb-server" in cmdline or "ovs-vswitchd" in cmdline) and f"ovs-{lab}" in cmdline:
            found.append(proc)
    return found


def stored_trials(db) -> list[tuple[int, str]]:
    """(seq, status) of every trial in the store at ``db``, in the order stored; [] before its tables exist
    (a sweep watched from outside has created the file but not yet its tables)."""
    if not Path(db).exists():
        return []
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT seq, status FROM trials ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return []
