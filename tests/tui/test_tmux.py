"""``labctl tui`` as a user runs it: its own process on a real terminal (a tmux pane), over a store
imported from the recorded data, driven by keys, each screen read back with ``capture-pane``.

What the Pilot tests cannot show: the command line starts the app, the screens fit the terminal
(80x24 and a larger one), the footer lists every key, and ``q`` ends the process with status 0."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from labctl import api
from tests.conftest import ROOT
from tests.tmux_support import Pane, needs_tmux
from tests.tui.conftest import GRID

pytestmark = [needs_tmux, pytest.mark.serial]  # a terminal's timing: not beside the parallel unit tests
GRID_R5 = ROOT / "benchmarks" / "data" / "embedded-grid-r5.jsonl"
SCREEN_KEYS = "h Host l Labs s Sweep r Results a Advice q Quit"


@pytest.fixture(scope="module")
def recorded_store(tmp_path_factory) -> Path:
    """Two recorded runs: run 1 the 24-configuration grid with 3 repeats (72 trials), run 2 the same
    grid with 5 repeats (120 trials)."""
    db = tmp_path_factory.mktemp("recorded") / "recorded.db"
    assert api.import_trials(GRID, db) == (1, 72)
    assert api.import_trials(GRID_R5, db) == (2, 120)
    return db


@pytest.fixture
def recorded_db(recorded_store) -> Iterator[Path]:
    """A copy at a short path: the header shows the store's path whole only where it fits (a pytest
    temporary path under xdist, pytest-413/popen-gw0/..., is cut with an ellipsis at 80 columns)."""
    short = Path(tempfile.mkdtemp(prefix="lt", dir="/tmp"))
    db = short / "recorded.db"
    shutil.copy(recorded_store, db)
    yield db
    shutil.rmtree(short, ignore_errors=True)


def title(screen: str) -> str:
    return screen.splitlines()[0]


def footer(screen: str) -> str:
    return screen.splitlines()[-1]


def body(screen: str) -> list[str]:
    return screen.splitlines()[1:-1]


def flat(screen: str) -> str:
    """The screen's words joined by single blanks (wrapped lines joined)."""
    return " ".join(screen.split())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_each_screen_in_a_terminal(recorded_db, tmp_path, size):
    argv = [sys.executable, "-m", "labctl.cli", "tui", "--db", str(recorded_db), "domains/quick.yaml"]
    with Pane(argv, cwd=ROOT, size=size, config_dir=tmp_path) as pane:
        # Host: the doctor report of this host (its values are this host's: only the rows are known)
        # the footer on the last row: the app laid out at the pane's size (a resize can come after a first paint)
        host = pane.wait_until(lambda s: "labctl — Host" in s and "lab embedded" in s and footer(s).endswith(SCREEN_KEYS),
                               "the Host screen at the pane's size")
        assert "labctl — Host" in title(host)
        for row in ("cpu", "numa", "isolated", "hugepages", "kvm", "kernel", "dpdk", "lab libvirt"):
            assert any(line.startswith(row + " ") for line in body(host)), row
        assert "steadiness: not measured" in host
        assert footer(host).startswith("p Probe steadiness") and footer(host).endswith(SCREEN_KEYS)
        lines = host.splitlines()
        assert len(lines) <= size[1] and max(map(len, lines)) <= size[0]

        # Labs: the shipped profiles, the one in use marked; no lab is up in this test's state dir
        pane.send("l")
        labs = pane.wait_for("labctl — Labs", "no labs are up", SCREEN_KEYS)
        assert "✓ domains/quick.yaml  quick (embedded, sweeps 2 knobs)  [in use]" in labs
        assert "Labs that are up" in labs
        assert footer(labs).startswith("⏎ Use profile u Up d Down") and footer(labs).endswith(SCREEN_KEYS)

        # Sweep: the profile in use and the store; no run of it yet (the store holds imported runs)
        pane.send("s")
        sweep = pane.wait_for("labctl — Sweep", "no trials yet", SCREEN_KEYS)
        assert f"profile: domains/quick.yaml store: {recorded_db}" in flat(sweep)  # a long path wraps
        assert "no run yet" in sweep and "ETA --:--" in sweep
        assert "Rate per configuration: median Mpps [95% CI] n" in sweep
        assert footer(sweep) == "g Start t Tune u Resume c Cancel " + SCREEN_KEYS

        # Results: the runs newest first, the newest run's configurations
        pane.send("r")
        # the runs' names too: the runs table sizes its columns as its rows land, and a capture taken
        # between two of its refreshes showed the names cut ("import:") while the rest was there
        results = pane.wait_for("labctl — Results", "run 2: 24 configurations", "import:embedded-grid-r5.jsonl",
                                "import:embedded-grid.jsonl", SCREEN_KEYS)
        runs = [line.split() for line in body(results) if line.split()[:1] in (["1"], ["2"])][:2]
        assert [r[:4] for r in runs] == [["2", "import:embedded-grid-r5.jsonl", "imported", "120/120"],
                                         ["1", "import:embedded-grid.jsonl", "imported", "72/72"]]
        assert "A/B  queues  rx_queue_size  burst  median mpps  95% CI" in results
        assert row_of(results, "256", "16") == ["1", "256", "16", "8.890", "[5.570,", "10.931]", "5"]
        assert footer(results).startswith("o Sort / Filter 1 A 2 B") and footer(results).endswith(SCREEN_KEYS)

        # into run 1: the runs table (tab from the configurations), down to run 1, enter
        pane.send("Tab", "Down", "Enter")
        results = pane.wait_for("run 1: 24 configurations")
        assert row_of(results, "512", "128") == ["1", "512", "128", "9.739", "[7.711,", "10.726]", "3"]
        assert "run 2: 24 configurations" not in results

        # Advice: of the run chosen in Results, with its recommended knob
        pane.send("a")
        advice = pane.wait_for("labctl — Advice", "Advice for run 1: 72 trials, loss limit 0.10%", SCREEN_KEYS)
        assert "recommend guest.nics.*.rx_queue_size = 1024: +22.0% [+4.9, +54.4] mpps" in advice
        assert "inconclusive guest.nics.*.queues" in advice
        assert footer(advice) == "w Write tuned profile " + SCREEN_KEYS

        # back to Host: the screen kept its state
        pane.send("h")
        assert "lab embedded" in pane.wait_for("labctl — Host")

        pane.send("q")
        assert pane.wait_exit() == 0
        assert not psutil.pid_exists(pane.pid) or psutil.Process(pane.pid).status() == psutil.STATUS_ZOMBIE


def row_of(screen: str, rx: str, burst: str) -> list[str] | None:
    """The cells of the queues=1 configuration row with ``rx`` and ``burst`` (None: not on the screen)."""
    for line in screen.splitlines():
        cells = line.split()
        if cells[:3] == ["1", rx, burst]:
            return cells[:7]
    return None


def test_a_bad_profile_fails_in_one_line_before_any_screen(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nbackend: embedded\nguest:\n  nics:\n    - {backend: vhostuser, rx_queue_size: 300}\n")
    argv = [sys.executable, "-m", "labctl.cli", "tui", "--db", str(tmp_path / "x.db"), str(bad)]
    with Pane(argv, cwd=ROOT, config_dir=tmp_path) as pane:
        assert pane.wait_exit() == 2
        screen = pane.capture()
        assert "rx_queue_size: 300 is not allowed" in screen and "labctl — " not in screen
