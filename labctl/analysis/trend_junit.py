"""A trend as a JUnit XML report (``labctl trend --junit FILE``): the gate a CI job runs after it adds its run.

One ``<testsuite>`` per trend, one ``<testcase>`` per series (classname: the profile, name: the series'
configuration, host, accelerator and lab, and the metric). A series whose newest group starts with a
regression beyond the threshold (:func:`labctl.analysis.trend.trend_failures`) carries a ``<failure>``
naming the mark, its size, the runs on both sides and what changed at the boundary; an older regression
(a group of its own came after it) or one within the threshold passes, its marks in ``<system-out>``.
Built with ElementTree, as :mod:`labctl.analysis.junit`: names from profiles and imports stay well formed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from labctl.analysis.junit import finished, write_tree
from labctl.analysis.trend import Trend, render_trend, trend_failures


def trend_junit_tree(trend: Trend) -> ET.ElementTree:
    failing = {id(s): m for s, m in trend_failures(trend)}
    counts = {"tests": str(len(trend.series)), "failures": str(len(failing)), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", name="labctl trend", **counts)
    suite = ET.SubElement(root, "testsuite", name=f"labctl trend {trend.profile}: {trend.metric}", **counts)
    properties = ET.SubElement(suite, "properties")
    for key, value in (("profile", trend.profile), ("metric", trend.metric),
                       ("threshold_pct", f"{trend.threshold_pct:g}"), ("grouping", "jumpavg (minimum description length)"),
                       *((f"config.{k}", v) for k, v in trend.selection.items())):
        ET.SubElement(properties, "property", name=key, value=str(value))
    for s in trend.series:
        env = ", ".join(f"{k} {v}" for k, v in s.env.items() if v is not None)
        case = ET.SubElement(suite, "testcase", classname=f"labctl.trend.{trend.profile}",
                             name=f"{s.label}{f' ({env})' if env else ''} [{trend.metric}]", time="0")
        mark = failing.get(id(s))
        if mark is not None:
            failure = ET.SubElement(case, "failure", type="regression",
                                    message=f"{trend.metric} {mark.change_pct:+.1f}% at run {mark.run_id}: the newest "
                                            f"group is a regression beyond the {trend.threshold_pct:g}% threshold")
            failure.text = mark.format(trend.metric)
        out = ET.SubElement(case, "system-out")
        runs = [str(row.run_id) for row in s.rows]
        out.text = "\n".join([f"runs {', '.join(runs)}; {len(s.groups)} group(s)",
                              *(m.format(trend.metric) for m in s.marks)])
    return finished(root, suite, render_trend(trend))


def write_trend_junit(trend: Trend, path: str | Path) -> Path:
    """Write the JUnit report of ``trend`` to ``path`` (UTF-8, with an XML declaration)."""
    return write_tree(trend_junit_tree(trend), path)
