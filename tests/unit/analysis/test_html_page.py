"""The shareable page (labctl report --html, labctl compare --html): a rendering of the JSON document,
self-contained, escaped, small; the CLI options and their refusals."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from labctl import api
from labctl.analysis.html.figures import medians
from labctl.analysis.html.page import render_comparison, render_run
from labctl.errors import UserError
from tests import datasets
from tests.unit.analysis import html_runs

SECTIONS = ("question", "answer", "table", "plots", "environment", "steadiness", "warnings", "trials")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def _external(page: str) -> list[str]:
    """References that would fetch something: src/href/url()/@import naming a scheme other than data:."""
    refs = re.findall(r"""(?:src|href|xlink:href)\s*=\s*["']?([^"'\s>]+)""", page)
    refs += re.findall(r"""url\(\s*["']?([^"')]+)""", page) + re.findall(r"@import", page)
    return [r for r in refs if not r.startswith("#") and not r.startswith("data:")]


@pytest.fixture
def db(tmp_path):
    return tmp_path / "labctl.db"


def test_a_run_page_has_every_section_in_order_and_nothing_external(db, tmp_path):
    html_runs.embedded_sweep(db)
    out = api.report_html(tmp_path / "run.html", db)
    page = out.read_text()
    ids = [attrs["id"] for tag, attrs in _parse(page).tags if tag == "section"]
    assert ids == list(SECTIONS)
    assert page.count("<svg") == 1 and "<script" not in page
    assert _external(page) == []
    assert "default-src 'none'" in page  # the browser is told too: nothing is fetched, no script runs
    assert "<details>" in page  # the trials collapsed
    assert "recommend" in page and "guest.nics.*.queues" in page  # the advice first


def test_the_page_renders_the_json_document_that_report_format_json_prints(db, cli):
    html_runs.embedded_sweep(db)
    code, out, err = cli("report", "--db", str(db), "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc == json.loads(json.dumps(api.report_document(db), default=str))
    for key in ("rows", "notes", "question", "advice", "environment", "steadiness", "warnings", "trials"):
        assert key in doc
    page = render_run(doc)
    for row in doc["rows"]:  # every row's median as the table shows it
        assert f"{row['median']:.3f}" in page
    assert len(re.findall(r'<tr class="trial">', page)) == len(doc["trials"]) == 24


def test_names_notes_and_errors_with_markup_are_text(db, tmp_path):
    html_runs.hostile_run(db)
    page = api.report_html(tmp_path / "x.html", db).read_text()
    assert "<script" not in page
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in page
    text = "".join(_parse(page).text)
    assert html_runs.HOSTILE in text  # shown as what it is, in the title, heading, warnings and errors
    assert text.count(html_runs.HOSTILE) >= 4


def test_svg_labels_with_markup_are_escaped_by_the_svg_writer():
    doc = {"rows": [{"knobs": {"build": f"b{html_runs.HOSTILE}$x$"}, "median": 1.0, "ci": [0.9, 1.1]},
                    {"knobs": {"build": "base"}, "median": 1.2, "ci": [1.1, 1.3]}],
           "by": "build", "knobs": ["build"], "metric": "mpps"}
    svg = medians(doc)
    assert "<script" not in svg and "&lt;script&gt;" in svg and "$x$" in svg  # no mathtext either


def test_a_hundred_trial_run_stays_under_two_megabytes(db, tmp_path):
    records = datasets.search_grid(repeats=2)[:100]
    html_runs.store_run(db, "grid", records)
    out = api.report_html(tmp_path / "big.html", db)
    assert len(re.findall(r'<tr class="trial">', out.read_text())) == 100
    assert out.stat().st_size < 2 * 1024 * 1024


def test_ndr_page_has_the_loss_and_latency_plots_and_the_searches(db, tmp_path):
    html_runs.ndr_run(db)
    doc = api.report_document(db)
    assert [len(s["measurements"]) for s in doc["searches"]] == [6, 6, 6, 6]
    assert doc["searches"][0]["knobs"] == {"guest.nics.*.rx_queue_size": 256}
    page = render_run(doc)
    assert page.count("<svg") == 3
    assert 'id="searches"' in page and "10%: 22.0/33.3/70;" in page


def test_tcp_page_reports_the_tcp_rate(db, tmp_path):
    html_runs.tcp_run(db)
    page = api.report_html(tmp_path / "t.html", db).read_text()
    assert "median bandwidth_gbps" in page and "workload.sessions" in page


def test_warnings_are_those_of_labctl_report(db, tmp_path):
    html_runs.warned_run(db)
    report = api.report(db)
    page = api.report_html(tmp_path / "w.html", db).read_text()
    text = " ".join("".join(_parse(page).text).split())
    for note in report.notes:  # TCG, unsteady host
        assert note in text
    assert any("TCG" in n for n in report.notes) and any("unsteady" in n for n in report.notes)
    assert "two bands: 8.9 (n=3) and 16.4 (n=2)" in text
    assert "host unsteady before this sweep: integer-loop rate spread 140%" in text
    steadiness = page[page.index('id="steadiness"'):page.index('id="warnings"')]
    shown = " ".join("".join(_parse(steadiness).text).split())
    assert "The probe before the sweep: unsteady." in shown and re.search(r"integer-loop rate spread\s*140%", shown)
    assert re.search(r"memory copy spread\s*60%", shown) and "5 s on CPUs 0,1" in shown


def test_a_sweep_stores_its_steadiness_probe_with_the_run(tmp_path, monkeypatch):
    """`labctl sweep --steadiness S`: the probe goes in the run's info (without its samples), where the
    page and the JSON document find it."""
    from labctl.host import steadiness
    from labctl.measure.sweep import run_sweep
    from labctl.profile.knobs import flatten
    from labctl.profile.load import load_profile
    from labctl.results.record import Environment, Metrics, TrialRecord
    from labctl.results.store import Store
    from tests.conftest import DOMAINS

    probe = steadiness.Steadiness(seconds=1.0, interval_s=0.25, cpus=[0, 1], samples=[])
    monkeypatch.setattr(steadiness, "probe", lambda seconds: probe)

    def runner(loaded, repeat_index, on_event=None, session=None):
        return TrialRecord(config=flatten(loaded.profile.model_dump()), repeat_index=repeat_index,
                           metrics=Metrics(mpps=1.0, loss_ratio=0.0), env=Environment(accel="none"))

    db = tmp_path / "s.db"
    result = run_sweep(load_profile(DOMAINS / "quick.yaml", cpus=frozenset({0, 1})), db, 1, steadiness_s=1.0,
                       runner=runner)
    with Store(db) as store:
        stored = store.run(result.run_id)["info"]["steadiness"]
    assert stored["verdict"] == probe.verdict and "samples" not in stored
    assert api.report_document(db, result.run_id)["steadiness"]["probe"]["verdict"] == probe.verdict


def test_refusals_are_in_the_answer(db, tmp_path):
    html_runs.refusals_run(db)
    doc = api.report_document(db)
    assert doc["advice"]["inconclusive"]
    page = render_run(doc)
    answer = page[page.index('id="answer"'):page.index('id="table"')]
    for refusal in doc["advice"]["inconclusive"]:
        assert f"cannot decide <code>{refusal['knob']}</code>" in answer


def test_comparison_pages(db, tmp_path):
    html_runs.builds_run(db)
    result = api.compare(db, "base", None, by="build")
    page = api.compare_html(result, tmp_path / "c.html").read_text()
    assert page.count('class="verdict v-progression"') >= 6 and "<svg" in page
    assert _external(page) == []
    two = tmp_path / "two.db"
    html_runs.store_run(two, "planted", datasets.queue_rate())
    html_runs.store_run(two, "planted", datasets.queue_rate(seed=3))
    page = render_comparison(api.compare(two, "1", "2").to_dict())
    assert "run 2 (<span class=\"mono\">planted</span>) against run 1" in page


def test_cli_report_and_compare_write_pages(db, tmp_path, cli):
    html_runs.builds_run(db)
    code, out, err = cli("report", "--db", str(db), "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    assert f"wrote {tmp_path / 'r.html'}" in err and out == ""
    code, out, err = cli("compare", "--db", str(db), "--by", "build", "--baseline", "base",
                         "--html", str(tmp_path / "c.html"))
    assert code == 0, err
    assert (tmp_path / "c.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("args, message", [
    (["report", "--html", "{tmp}/r.png"], "--html {tmp}/r.png: the page is written as HTML (allowed: a path "
                                           "ending in .html or .htm)"),
    (["report", "--html", "{tmp}/no/r.html"], "--html {tmp}/no/r.html: cannot write there"),
    (["report", "--html", "{tmp}/r.html", "--rows", "x", "--by", "y"], "--rows: not with --html"),
    (["compare", "--by", "build", "--baseline", "base", "--html", "{tmp}/c.txt"], "--html {tmp}/c.txt: the page"),
])
def test_bad_html_options_are_one_line_exit_2_nothing_written(db, tmp_path, cli, args, message):
    html_runs.builds_run(db)
    args = [a.format(tmp=tmp_path) for a in args]
    code, out, err = cli(*args[:1], "--db", str(db), *args[1:])
    assert code == 2
    assert message.format(tmp=tmp_path) in err
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob("*.png"))


def test_check_html_out_refuses_before_any_work(tmp_path):
    with pytest.raises(UserError, match=r"^--html .*x\.svg: the page is written as HTML"):
        api.check_html_out(tmp_path / "x.svg")


def test_an_until_run_shows_its_within_block_verdicts_first(db):
    import random

    from labctl.measure.sweep import run_sweep
    from labctl.profile.load import load_profile
    from tests.conftest import DOMAINS
    from tests.unit.measure.test_until import runner

    loaded = load_profile(DOMAINS / "quick.yaml", cpus=frozenset({0, 1}))
    # a 20% effect of the ring size and an A/A burst, little noise: both decided at the first look
    result = run_sweep(loaded, db, runner=runner({256: 5.0, 1024: 6.0}, 0.01, [], random.Random(3)),
                       until="decided", budget="24")
    doc = api.report_document(db, result.run_id)
    assert doc["until"]["stop"] == "decided" and doc["until"]["head"].startswith("every comparison decided; mpps")
    assert {c["verdict"] for c in doc["until"]["comparisons"]} == {"better", "equivalent"}
    page = render_run(doc)
    answer = page[page.index('id="answer"'):page.index('id="table"')]
    within = answer.index("the within-block verdicts (the ones to read)")
    assert "error 0.05 spent over 1 look." in answer
    assert within < answer.index("unpaired verdicts (they pool the trials across blocks")
    assert "guest.nics.*.rx_queue_size: 1024 vs 256: better" in answer and "confidence" in answer
    # any other run has no such section
    html_runs.refusals_run(db)
    assert api.report_document(db)["until"] is None


def test_a_guest_run_page_says_how_each_trial_was_reached(db, tmp_path):
    """A libvirt run's trials table has a "reached by" column (a boot, a NIC swap, kept) and its warnings carry
    the report's note of boots and swaps; an embedded run's page has no such column."""
    records = datasets.queue_rate(repeats=2)
    ways = [{"how": "boot", "s": 22.4}, {"how": "hotplug", "s": 3.1}, {"how": "kept", "s": 0.0}]
    for i, record in enumerate(records):
        record.details["reached"] = ways[min(i, 1)] if i < len(records) - 1 else ways[2]
    html_runs.store_run(db, "guest", records, {"boots": 1, "boot_s": 22.4, "run_s": 90.0,
                                               "swaps": len(records) - 2, "swap_s": 3.1 * (len(records) - 2)})
    page = api.report_html(tmp_path / "guest.html", db).read_text()
    text = " ".join(_parse(page).text)
    assert "reached by" in text and "boot 22.4 s" in text and "swap 3.1 s" in text and "kept" in text
    assert f"NIC swaps: {len(records) - 2}" in text
    html_runs.embedded_sweep(db)
    assert "reached by" not in api.report_html(tmp_path / "embedded.html", db).read_text()
