"""SVG snapshots of every screen at 80x24 (pytest-textual-snapshot), on fixed data: no clock, no value
of this host (``pytest --snapshot-update tests/tui`` rewrites them after a deliberate change)."""

from __future__ import annotations

import time

import pytest

from labctl import api
from labctl.tui.app import LabctlApp
from tests.tui.conftest import SIZE, ScriptedSweep


@pytest.fixture
def here(fixed, tmp_path, monkeypatch):
    """The fixed data under relative paths (the snapshots show paths): the test runs in its tmp dir."""
    monkeypatch.chdir(tmp_path)
    return {**fixed, "db": "grid.db", "profile": "domains/quick.yaml", "profiles_dir": "domains"}


async def settle(pilot, predicate=None, timeout: float = 10.0) -> None:
    """Wait for the workers' answers (and ``predicate``), then for the screen to repaint."""
    deadline = time.monotonic() + timeout
    while (predicate is not None and not predicate()) or any(
            w.is_running for w in pilot.app.workers if w.group != "measure"):
        if time.monotonic() > deadline:
            raise AssertionError("the app did not settle")
        await pilot.pause(0.02)
    await pilot.pause()


def snap(snap_compare, app, *keys: str, predicate=None) -> bool:
    async def before(pilot):
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        await settle(pilot, predicate and (lambda: predicate(pilot.app)))

    try:
        return snap_compare(app, terminal_size=SIZE, run_before=before)
    finally:
        for scope in list(app.scopes):
            scope.cancel()


def test_host(snap_compare, here):
    assert snap(snap_compare, LabctlApp(**here), "p", predicate=lambda app: not app.busy)


def test_labs(snap_compare, here):
    assert snap(snap_compare, LabctlApp(**here, mode="labs"))


class Bars:
    class Row:
        def __init__(self, burst, median, ci):
            self.knobs, self.median, self.ci, self.n = {"workload.burst": burst}, median, ci, 3

    rows = [Row(32, 5.12, (4.80, 5.60)), Row(64, 6.34, (5.90, 6.71))]


@pytest.fixture
def scripted(monkeypatch):
    sweep = ScriptedSweep()
    monkeypatch.setattr(api, "sweep", sweep)
    monkeypatch.setattr(api, "report", lambda db, run=None, *a, **k: Bars())
    return sweep


def test_sweep_in_flight(snap_compare, here, scripted):
    app = LabctlApp(**here, mode="sweep", overrides={"workload.duration_s": 1, "workload.warmup_s": 0})
    assert snap(snap_compare, app, "g", predicate=lambda app: scripted.waiting.is_set()
                and "burst=64" in str(app.screen.query_one("#bars").content))


def test_quit_while_a_sweep_runs_asks(snap_compare, here, scripted):
    app = LabctlApp(**here, mode="sweep")
    assert snap(snap_compare, app, "g", "q", predicate=lambda app: scripted.waiting.is_set())


def test_results(snap_compare, here):
    assert snap(snap_compare, LabctlApp(**here, mode="results"), "1", "down", "down", "2",
                predicate=lambda app: "B vs A" in str(app.screen.query_one("#compare").content))


def test_advice(snap_compare, here):
    assert snap(snap_compare, LabctlApp(**here, mode="advice"),
                predicate=lambda app: "recommend" in str(app.screen.query_one("#advice").content))


def test_write_tuned_profile_dialog(snap_compare, here):
    assert snap(snap_compare, LabctlApp(**here, mode="advice"), "w")
