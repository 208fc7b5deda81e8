"""``labctl compare --format post``: the rows as patch posts write them (golden text), their labels and
numbers, for one knob's values inside a run and for two runs alike."""

from __future__ import annotations

import pytest

from labctl.analysis.compare import compare_runs
from labctl import api
from labctl.analysis.post import check_format, number, render_post, row_label
from labctl.analysis.within import compare_within
from labctl.errors import UserError
from tests.factories import noisy, run_records
from tests.unit.analysis.builds_data import build_records

WITHIN = """\
build: base vs slow
64B:  4.03 vs 3.20 Mpps (-20.7% [-23.1, -14.3]) regression
256B: 3.47 vs 2.75 Mpps (-20.5% [-24.4, -18.1]) regression

build: base vs same
64B:  4.03 vs 3.95 Mpps (-2.1% [-5.5, +5.8]) cannot tell (noisy)
256B: 3.47 vs 3.53 Mpps (+1.8% [-3.2, +4.5]) no change

run 1 (demo), host lab1, Planted CPU @ 2.0GHz, accelerator tcg (TCG: the numbers are functional, not representative of KVM)
mpps (packets forwarded to the sink per second, all ports; higher is better): medians of n = 6 vs 6 trials per row
change: [98.75% interval] of the bootstrap of medians (4 rows, family-wise 95%); threshold ±5%
verdict: 2 regressions, 0 progressions, 1 no change, 1 cannot tell -> exit 1"""

RUNS = """\
run 1 vs run 2
rx_queue_size=256: 10.10 vs 9.86 Mpps (-2.4% [-9.6, +3.5]) cannot tell (noisy)
rx_queue_size=512: 10.11 vs 9.05 Mpps (-10.4% [-14.0, -7.1]) regression

host lab1, accelerator tcg (TCG: the numbers are functional, not representative of KVM)
mpps (packets forwarded to the sink per second, all ports; higher is better): medians of n = 5 vs 4 trials per row
change: [97.5% interval] of the bootstrap of medians (2 rows, family-wise 95%); threshold ±5%
verdict: 1 regression, 0 progressions, 0 no change, 1 cannot tell -> exit 1"""


def test_within_a_run_the_rows_read_as_a_patch_post():
    result = compare_within(build_records(0), "build", "base", run={"id": 1, "profile_name": "demo"})
    assert render_post(result) == WITHIN
    assert api.render_comparison(result, "post") == WITHIN  # the text compare prints with --format post


def test_two_runs_read_the_same_way():
    base = run_records(1, noisy(1, {256: 10.0, 512: 10.0}, 0.03, 5))
    cand = run_records(2, noisy(2, {256: 10.0, 512: 8.8}, 0.03, 4), first_id=100)
    assert render_post(compare_runs(base, cand, baseline_run={"id": 1}, candidate_run={"id": 2})) == RUNS


def test_a_unit_the_registry_declares_and_a_row_without_a_side():
    records = build_records(0, metric="loss_ratio", sizes={64: 0.002, 256: 0.001})
    records = [r for r in records if not (r.config["build"] == "slow" and r.repeat_index > 0)]
    text = render_post(compare_within(records, "build", "base", ["slow"], metric="loss_ratio"))
    assert "\n256B: 0.000990 vs 0.000787 ratio (-20.5% [n/a]) cannot tell (few-repeats)\n" in text
    assert "\nhost lab1, Planted CPU" in text  # no run named: none was given
    assert "loss_ratio (1 - received / offered; lower is better): medians of n = 6 vs 1 trials per row" in text


@pytest.mark.parametrize("knobs, label", [
    ({"workload.packet_size": 256}, "256B"),
    ({"workload.packet_size": 1518, "guest.nics.*.rx_queue_size": 512}, "1518B rx_queue_size=512"),
    ({"workload.burst": 32, "env.host": "lab2"}, "burst=32 host=lab2"),
    ({}, "all"),
])
def test_row_labels(knobs, label):
    assert row_label(knobs) == label


def test_numbers_show_three_significant_digits_of_the_smaller_side():
    assert number(4.6912, 2) == "4.69" and number(None, 2) == "-"


def test_format_is_table_json_or_post():
    for fmt in ("table", "json", "post"):
        check_format(fmt)
    with pytest.raises(UserError, match=r"^--format csv: a comparison is shown as table, json, post "
                                        r"\(allowed: table, json, post\)$"):
        check_format("csv")


def test_the_embedded_lab_says_it_has_no_vm():
    from tests.unit.analysis.builds_data import ENV

    records = build_records(0, env=ENV.model_copy(update={"accel": "none"}))
    assert ", accelerator none (the embedded lab: no VM)\n" in render_post(compare_within(records, "build", "base"))
