"""The Results screen's page key: ``w`` writes the shown run's HTML page into the current directory
and shows its path under the notes."""

from __future__ import annotations

from textual.widgets import DataTable

from labctl.tui.app import LabctlApp
from tests.tui.conftest import SIZE
from tests.tui.test_screens import run, text, until


def test_w_writes_the_runs_page_and_shows_its_path(fixed, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    page = tmp_path / "labctl-run-1.html"

    async def go():
        app = LabctlApp(**fixed, mode="results")
        async with app.run_test(size=SIZE) as pilot:
            configs = app.screen.query_one("#configs", DataTable)
            await until(pilot, lambda: configs.row_count == 24)
            assert not page.exists()
            await pilot.press("w")
            await until(pilot, lambda: f"page: {page}" in text(app, "#notes"), timeout=60)
            assert page.read_text().startswith("<!DOCTYPE html>")
            assert "import:embedded-grid.jsonl" in page.read_text()  # the run's name, in the page

    run(go())
