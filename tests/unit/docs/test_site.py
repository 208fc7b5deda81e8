"""The docs site builds with warnings as errors (mkdocs build --strict, as make docs runs it), its reference
pages are the code's, and the man page is made from the same command tree."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from labctl.lab.plan import knob_kind
from labctl.profile.rules import RULES
from labctl.results.metrics import METRICS
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("mkdocs", path=os.path.dirname(sys.executable)) is None,
                                reason="mkdocs is not installed (pip install -e '.[docs]'; make setup does)")


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "hooks" / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mkdocs"), "build", "--strict",
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_site_builds_strict_with_every_page(site):
    for page in ("index.html", "quickstart/index.html", "concepts/verdicts/index.html",
                 "how-to/tune-rings-and-queues/index.html", "how-to/fleet/index.html", "reference/cli/index.html",
                 "reference/profile/index.html", "reference/rules/index.html", "reference/metrics/index.html",
                 "reference/knobs/index.html"):
        assert (site / page).is_file(), page
    assert not (site / "hooks").exists()  # the generator is not published


def test_the_reference_is_the_code_s(site):
    cli = (site / "reference/cli/index.html").read_text()
    assert "labctl sweep" in cli and "--verdict-metric" in cli and "with --until decided: what is judged" in cli
    rules = (site / "reference/rules/index.html").read_text()
    assert all(f"<code>{r.id}</code>" in rules for r in RULES)
    metrics = (site / "reference/metrics/index.html").read_text()
    assert all(f"<code>{m.name}{'.*' if m.family else ''}</code>" in metrics for m in METRICS.values())
    profile = (site / "reference/profile/index.html").read_text()
    assert "Descriptors in each receive virtqueue" in profile


def test_the_knob_page_follows_the_plan_s_classification():
    reference = _reference()
    page = reference.knobs_page()
    for path in ("guest.nics.*.rx_queue_size", "guest.memory_mib", "workload.burst", "guest.pinning.emulator"):
        assert f"| `{path}` | {knob_kind(path)} |" in page
    assert "| `workload.burst` | live |" in page and "| `guest.nics.*.rx_queue_size` | swap |" in page
    assert "| `guest.memory_mib` | boot |" in page and "| `guest.pinning.emulator` | live |" in page


def test_the_man_page_lists_every_command_and_option(tmp_path):
    reference = _reference()
    text = reference.man_page()
    assert text.startswith(".TH LABCTL 1 ")
    for name, command in reference.commands(reference.cli_tree()):
        if name != "labctl":
            assert f".SS {reference._roff(name)}" in text  # roff escapes a hyphen (bisect-show)
    assert "\\-\\-verdict\\-metric" in text
    if shutil.which("man"):
        page = tmp_path / "labctl.1"
        page.write_text(text)
        shown = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True, timeout=30,
                               env={**os.environ, "MANPAGER": "cat", "MANWIDTH": "100"})
        assert shown.returncode == 0 and "labctl sweep" in shown.stdout


def test_the_readme_names_every_knob_under_how_a_running_guest_takes_it():
    """Every knob has its place in the README (the brief's rule), in the list of its kind: a knob added to the
    schema, or moved from boot to swap, fails here until the README says so."""
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## The knobs"):text.index("## The docs")]
    listed = {}
    for kind in ("live", "swap", "boot"):
        item = re.search(rf"^- \*\*{kind}\*\*(.*?)(?=^- \*\*|^\n)", section, re.S | re.M).group(1)
        for path in re.findall(r"`([a-z_.*]+)`", item):
            listed.setdefault(path, kind)
    knobs = _reference().knob_paths()
    assert {path: knob_kind(path) for path in knobs} == {path: listed.get(path) for path in knobs}
