"""The fleet is a face (ARCHITECTURE.md): at run time it reaches labctl's core only through labctl.api,
besides the base modules every room may use."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from tests.unit.workload.test_layering import runtime_imports

BASE = ("labctl.errors", "labctl.events", "labctl.signals", "labctl.faults", "labctl.api")


def outside(module: str) -> bool:
    """A module of labctl's core: not the fleet's own, not the api, not a base module (nor a name in one)."""
    return (module.startswith("labctl.") and not module.startswith("labctl.fleet")
            and not any(module == base or module.startswith(base + ".") for base in BASE))


@pytest.mark.parametrize("path", sorted((ROOT / "labctl" / "fleet").glob("*.py")), ids=lambda p: p.name)
def test_fleet_reaches_the_core_only_through_the_api(path):
    wrong = sorted(module for module in runtime_imports(path) if outside(module))
    assert not wrong, wrong
