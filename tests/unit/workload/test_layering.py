"""workload/ and dpdk/ sit below lab/ (ARCHITECTURE.md's stack): at run time they import nothing of lab/,
measure/, cli/, tui/, fleet/ or api; typing-only imports (``if TYPE_CHECKING:``) are allowed, e.g. the lab
interface :mod:`labctl.lab.interface`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

ABOVE = ("labctl.lab", "labctl.measure", "labctl.cli", "labctl.tui", "labctl.fleet", "labctl.api", "advisor")


def runtime_imports(path: Path) -> set[str]:
    """Every module ``path`` imports outside ``if TYPE_CHECKING:`` blocks (function-level imports count);
    ``from labctl import api`` gives both ``labctl`` and ``labctl.api``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def imports_above(room: str, above: tuple[str, ...]) -> list[str]:
    """``FILE: MODULE`` for every run-time import of ``above`` (or below it) in ``labctl/room``, its
    sub-packages included."""
    return sorted(f"{path.relative_to(ROOT)}: {module}"
                  for path in sorted((ROOT / "labctl" / room).rglob("*.py"))
                  for module in runtime_imports(path)
                  if any(module == up or module.startswith(up + ".") for up in above))


@pytest.mark.parametrize("room", ["workload", "dpdk", "host", "profile"])
def test_lower_rooms_import_nothing_above_them(room):
    wrong = imports_above(room, ABOVE)
    assert not wrong, wrong


def test_typing_only_imports_are_not_counted(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from labctl.lab.plan import LabPlan\n"
                      "def f():\n    from labctl.lab.kinds import stop_process\n")
    assert runtime_imports(source) == {"typing", "typing.TYPE_CHECKING", "labctl.lab.kinds",
                                       "labctl.lab.kinds.stop_process"}


def test_a_room_imported_by_name_is_counted(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("from labctl import lab, signals\n")
    assert runtime_imports(source) == {"labctl", "labctl.lab", "labctl.signals"}


def test_lab_imports_nothing_above_it():
    """lab/ sits below measure/, domain_edit/ and the faces: a live change that applies advice (domain_edit)
    lives in measure/live_changes.py, not in lab/ (it was there, importing domain_edit at run time)."""
    wrong = imports_above("lab", ("labctl.measure", "labctl.domain_edit", "labctl.cli", "labctl.tui", "labctl.fleet",
                                  "labctl.api", "advisor"))
    assert not wrong, wrong
