"""Fixtures of the result-store tests: a store file per test, and the store opened on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from labctl.results.store import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "labctl.db"


@pytest.fixture
def store(db: Path):
    with Store(db) as s:
        yield s
