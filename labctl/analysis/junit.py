"""A comparison as a JUnit XML report, the format CI systems display (GitLab's test reports, GitHub
actions that publish JUnit, Jenkins' junit step).

One ``<testsuite>`` per comparison, one ``<testcase>`` per configuration (classname: the profile,
name: the configuration's knobs and the metric). A regression carries a ``<failure>`` with its figures;
"cannot tell" is ``<skipped>`` with the reason; a progression or "no change" passes. The runs and the
environment changes are ``<properties>`` of the suite and its ``<system-out>``. Built with ElementTree
(no XML is written by string formatting), so values with ``<``, ``&`` or quotes stay well formed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from labctl.analysis.compare import Comparison, ConfigVerdict
from labctl.analysis.comparison_text import render_comparison


def _testcase(suite: ET.Element, comparison: Comparison, item: ConfigVerdict, classname: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=classname, name=f"{item.label} [{comparison.metric}]",
                         time="0")
    figures = item.figures(comparison.metric)
    if item.verdict == "regression":
        failure = ET.SubElement(case, "failure", type="regression",
                                message=f"{comparison.metric} {item.change}: regression beyond the "
                                        f"{comparison.threshold_pct:g}% threshold")
        failure.text = f"{figures}\n{item.reason}\nconfig key {item.key}"
    elif item.verdict == "cannot tell":
        ET.SubElement(case, "skipped", message=f"cannot tell: {item.reason}")
    out = ET.SubElement(case, "system-out")
    out.text = "\n".join([f"{item.verdict}: {item.reason}", figures, *item.notes])


def junit_tree(comparison: Comparison) -> ET.ElementTree:
    """The JUnit document of a comparison."""
    base, cand = comparison.baseline, comparison.candidate
    by = getattr(comparison, "by", "")
    name = f"labctl compare {comparison.metric}: run {base.get('id')} -> run {cand.get('id')}"
    if by:
        values = ", ".join(map(str, getattr(comparison, "candidate_values", [])))
        name = (f"labctl compare {comparison.metric}: run {base.get('id')}, {by} "
                f"{getattr(comparison, 'baseline_value', None)} -> {values}")
    counts = {"tests": str(len(comparison.items)), "failures": str(comparison.count("regression")),
              "errors": "0", "skipped": str(comparison.count("cannot tell"))}
    root = ET.Element("testsuites", name="labctl compare", **counts)
    suite = ET.SubElement(root, "testsuite", name=name, **counts)
    properties = ET.SubElement(suite, "properties")
    for key, value in (("metric", comparison.metric), ("threshold_pct", f"{comparison.threshold_pct:g}"),
                       ("confidence", f"{comparison.confidence:.6g}"), ("baseline_run", base.get("id")),
                       ("candidate_run", cand.get("id")), ("baseline_db", base.get("db")),
                       ("candidate_db", cand.get("db")), ("by", by or None),
                       ("baseline_value", getattr(comparison, "baseline_value", None) if by else None)):
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=str(value))
    for change in comparison.env_changes:
        ET.SubElement(properties, "property", name=f"env.{change.field}" + (f" [{change.between}]" if change.between else ""),
                      value=f"{', '.join(change.before)} -> {', '.join(change.after)}")
    profile = base.get("profile_name") or cand.get("profile_name") or "labctl"
    for item in comparison.items:
        _testcase(suite, comparison, item, f"labctl.compare.{profile}")
    return finished(root, suite, render_comparison(comparison))


def finished(root: ET.Element, suite: ET.Element, text: str) -> ET.ElementTree:
    """The document of ``root``: ``text`` (the report as printed) as the suite's ``<system-out>``, indented."""
    out = ET.SubElement(suite, "system-out")
    out.text = text
    ET.indent(root)
    return ET.ElementTree(root)


def write_junit(comparison: Comparison, path: str | Path) -> Path:
    """Write the JUnit report of ``comparison`` to ``path`` (UTF-8, with an XML declaration)."""
    return write_tree(junit_tree(comparison), path)


def write_tree(tree: ET.ElementTree, path: str | Path) -> Path:
    """Write a JUnit document to ``path`` (UTF-8, with an XML declaration)."""
    path = Path(path)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
