from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOMAINS = ROOT / "domains"


def default_sigint() -> None:
    """``preexec_fn`` for a labctl a test signals: SIGINT as a terminal delivers it (a suite started in the
    background by a shell without job control inherits SIGINT ignored, and so would labctl)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pytest_collection_modifyitems(items):
    """Only the unit and TUI tests run in parallel (make test: pytest-xdist); every other test (the
    integration tests, the fault matrix, the store and file faults) is ``serial``: it runs after them,
    one at a time, with the host to itself."""
    for item in items:
        if not str(item.fspath).startswith((str(ROOT / "tests" / "unit"), str(ROOT / "tests" / "tui"))):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path, monkeypatch, request):
    """Every test gets its own state, run and log directories. Unit tests get their own CPU locks too;
    tests that measure on the real host (integration, faults) share the host's (labctl.lab.hostlock), so
    they never measure at the same time as another labctl's trial on the same CPUs."""
    monkeypatch.setenv("LABCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("LABCTL_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("LABCTL_LOG_DIR", str(tmp_path / "log"))
    if "tests/unit" in str(request.node.fspath):
        monkeypatch.setenv("LABCTL_LOCK_DIR", str(tmp_path / "cpu-locks"))
    yield


@pytest.fixture
def write_profile(tmp_path):
    def write(text: str, name: str = "p.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def cli(capsys):
    """Run labctl in-process; returns (exit code, stdout, stderr)."""
    from labctl.cli import run

    def invoke(*args: str):
        code = run(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def shipped_profiles() -> list[Path]:
    return sorted(DOMAINS.glob("*.yaml"))


CPUS = frozenset({0, 1})
os.environ.setdefault("LABCTL_TEST", "1")
