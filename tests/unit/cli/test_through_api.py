"""The CLI and the TUI are faces (ARCHITECTURE.md): at run time they reach labctl's core only through
labctl.api, besides the base modules of events, errors and signals. Every other import is a second voice
that drifts from the first (the TUI's copy of the CLI's trial rate had shown "ok" for TCP trials). Lazy
imports inside functions count; typing-only imports (``if TYPE_CHECKING:``) do not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.unit.workload.test_layering import runtime_imports

#: What a face may import of labctl: the api, the base modules, the faces themselves, and the version.
ALLOWED = ("labctl.api", "labctl.errors", "labctl.events", "labctl.signals", "labctl.cli", "labctl.tui",
           "labctl.fleet", "labctl.__version__")


def below_the_api(module: str) -> bool:
    """A module (or a name in one) of labctl's core that a face would reach past the api. ``labctl`` itself
    is the package a ``from labctl import api`` names, not a room."""
    return (module.startswith("labctl.")
            and not any(module == allowed or module.startswith(allowed + ".") for allowed in ALLOWED))


def faces() -> list[Path]:
    return sorted(p for room in ("cli", "tui") for p in (ROOT / "labctl" / room).rglob("*.py"))


@pytest.mark.parametrize("path", faces(), ids=lambda p: str(p.relative_to(ROOT / "labctl")))
def test_the_cli_and_the_tui_reach_the_core_only_through_the_api(path):
    wrong = sorted(module for module in runtime_imports(path) if below_the_api(module))
    assert not wrong, wrong


def test_every_face_module_is_read():
    names = {p.relative_to(ROOT / "labctl").as_posix() for p in faces()}
    assert {"cli/output.py", "cli/measure.py", "tui/model.py", "tui/screens/sweep.py"} <= names


@pytest.mark.parametrize("source, wrong", [
    ("def f():\n    from labctl.measure.until import stop_text\n", ["labctl.measure.until",
                                                                        "labctl.measure.until.stop_text"]),
    ("import labctl.profile.knobs\n", ["labctl.profile.knobs"]),
    ("from labctl import results\n", ["labctl.results"]),
    ("from labctl import api, events\nfrom labctl.tui import model\nfrom typing import TYPE_CHECKING\n"
     "if TYPE_CHECKING:\n    from labctl.results.record import TrialRecord\n", []),
])
def test_an_import_below_the_api_is_found(tmp_path, source, wrong):
    face = tmp_path / "face.py"
    face.write_text(source)
    assert sorted(m for m in runtime_imports(face) if below_the_api(m)) == wrong


def test_the_api_has_its_imports_at_the_top_one_all_and_a_reason_for_each_lazy_import():
    """Issue 39: one ``__all__``, no module-level import after the first definition, and each import left
    inside a function says why (``# lazy: ...``: the module docstring has the start-up figures)."""
    import ast

    text = (ROOT / "labctl" / "api.py").read_text()
    tree = ast.parse(text)
    lines = text.splitlines()
    body = tree.body
    first_def = next(i for i, node in enumerate(body) if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
    assert not [n.lineno for n in body[first_def:] if isinstance(n, (ast.Import, ast.ImportFrom))]
    assigns = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign))
               and any(isinstance(t, ast.Name) and t.id == "__all__"
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    assert len(assigns) == 1 and isinstance(assigns[0], ast.Assign)
    lazy = [n for f in body if isinstance(f, ast.FunctionDef) for n in ast.walk(f)
            if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert lazy  # the CLI's start-up keeps some
    unexplained = [n.lineno for n in lazy if "# lazy:" not in lines[(n.end_lineno or n.lineno) - 1]]
    assert not unexplained, f"labctl/api.py: imports inside functions without a '# lazy:' reason at lines {unexplained}"
    assert len(lines) <= 600
