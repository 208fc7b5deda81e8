"""The shared page in a real browser: Debian's headless Chromium (network off: offline context, every
non-file request aborted, hosts resolving nowhere) loads pages rendered from planted runs in the store
(no lab runs): an embedded sweep, an NDR/PDR run, a TCP run, a build comparison, a run the advisor
refuses, an unsteady TCG two-band run and a run whose names hold markup. Each loads with no console
error and no request but itself, is screenshot at 1280x800, and its DOM holds the verdicts and rows."""

from __future__ import annotations

import time

import psutil
import pytest

from labctl import api
from tests.integration.browser import load, needs_chromium
from tests.unit.analysis import html_runs

pytestmark = [pytest.mark.integration, needs_chromium]

#: What the DOM is asked: rows of the report table and of the collapsed trials table, the answer's text,
#: the warnings, whether the trials are collapsed, and the page's width against the viewport's.
QUERY = """() => ({
  rows: document.querySelectorAll('table.report tbody tr').length,
  trials: document.querySelectorAll('table.trials tbody tr').length,
  answer: document.querySelector('#answer').innerText,
  warnings: document.querySelector('#warnings').innerText,
  collapsed: !document.querySelector('#trials details').open,
  svgs: document.querySelectorAll('svg').length,
  scripts: document.querySelectorAll('script').length,
  wide: document.documentElement.scrollWidth > window.innerWidth,
  h1: document.querySelector('h1').innerText,
})"""


def _chromiums() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("chrom")}


@pytest.fixture
def browser_dir(tmp_path, no_leftovers):
    before = _chromiums()
    yield tmp_path
    deadline = time.monotonic() + 15
    while _chromiums() - before and time.monotonic() < deadline:  # its helpers exit just after the browser
        time.sleep(0.2)
    assert _chromiums() - before == set()  # the browser and its helpers are gone


def _open(page, tmp_path):
    got = load(page, page.with_suffix(".png"), tmp_path / f"profile-{page.stem}", QUERY)
    assert got.console == [] and got.errors == [], (got.console, got.errors)
    assert got.requests == [page.resolve().as_uri()]  # nothing but the page itself
    assert page.with_suffix(".png").stat().st_size > 10_000  # a screenshot of something drawn
    assert got.dom["scripts"] == 0 and not got.dom["wide"]  # no horizontal scroll at 1280 wide
    return got


def test_run_pages_in_chromium(browser_dir):
    tmp = browser_dir
    pages = {}
    for name in ("embedded_sweep", "ndr_run", "tcp_run", "refusals_run", "warned_run"):
        db = tmp / f"{name}.db"
        getattr(html_runs, name)(db)
        pages[name] = (db, api.report_html(tmp / f"{name}.html", db))

    got = _open(pages["embedded_sweep"][1], tmp)
    assert got.dom["rows"] == 6 and got.dom["trials"] == 24 and got.dom["collapsed"]
    assert "recommend guest.nics.*.queues = 2" in got.dom["answer"]
    assert "better" in got.dom["answer"] and got.dom["svgs"] == 1

    got = _open(pages["ndr_run"][1], tmp)
    assert got.dom["rows"] == 2 and got.dom["svgs"] == 3  # medians, loss against load, latency
    assert got.dom["trials"] == 28  # 4 searches: their records and 24 measurements

    got = _open(pages["tcp_run"][1], tmp)
    assert got.dom["rows"] == 4 and "bandwidth_gbps" in got.text

    got = _open(pages["refusals_run"][1], tmp)
    refusals = api.advise(pages["refusals_run"][0]).inconclusive
    assert refusals and all(f"cannot decide {r.knob}" in got.dom["answer"] for r in refusals)

    got = _open(pages["warned_run"][1], tmp)
    warnings = " ".join(got.dom["warnings"].split())
    for note in api.report(pages["warned_run"][0]).notes:  # the same as labctl report's
        assert " ".join(note.split()) in warnings
    assert "two bands" in warnings and "TCG" in warnings and "unsteady" in warnings


def test_build_comparison_page_in_chromium(browser_dir):
    db = browser_dir / "builds.db"
    html_runs.builds_run(db)
    page = api.compare_html(api.compare(db, "base", None, by="build"), browser_dir / "builds.html")
    got = _open(page, browser_dir)
    assert got.dom["rows"] == 6 and got.dom["answer"].count("progression") >= 6
    assert "0 regression, 6 progression" in got.dom["answer"]


def test_markup_in_names_is_text_and_runs_nothing(browser_dir):
    db = browser_dir / "hostile.db"
    html_runs.hostile_run(db)
    page = api.report_html(browser_dir / "hostile.html", db)
    got = _open(page, browser_dir)
    assert got.title != "pwned" and html_runs.HOSTILE in got.title  # the name as text, never run
    assert html_runs.HOSTILE in got.dom["h1"] and html_runs.HOSTILE in got.dom["warnings"]
