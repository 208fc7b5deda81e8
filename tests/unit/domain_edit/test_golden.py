"""Golden tests over domain XMLs written by other tools (tests/golden/domain_edit/make_fixtures.py says how):
virt-install's output, a Nova-style domain (metadata, an OVS virtualport, a hostdev port, comments) and
libvirt's own output with vhost-user multiqueue. One fixed knob set applied to each: the output, diff and
lines match the golden files (``LABCTL_UPDATE_GOLDEN=1`` rewrites them), only the named elements and
attributes differ, a second application changes nothing, schema-valid stays schema-valid, and interfaces
that cannot take the settings are reported and untouched."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from lxml import etree

from labctl.domain_edit.changes import changes_from_knobs
from labctl.domain_edit.edit import apply_changes
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "domain_edit"
FIXTURES = ["virt-install", "nova", "libvirt-vhostuser"]
KNOBS = ["guest.nics.*.queues=4", "guest.nics.*.rx_queue_size=1024", "guest.nics.*.tx_queue_size=1024",
         "guest.pinning.vcpus.0=0", "guest.pinning.vcpus.1=1", "guest.pinning.emulator=0-1",
         "guest.hugepage_size=2M"]
#: the only lines the diff may add or remove
ALLOWED = re.compile(r"^[+-]\s*(<driver\b[^>]*>|<driver\b[^>]*/>|</?cputune>|<vcpupin\b[^>]*/>|<emulatorpin\b[^>]*/>"
                     r"|</?memoryBacking>|</?hugepages>|<hugepages/>|<page\b[^>]*/>)$")
needs_validator = pytest.mark.skipif(shutil.which("virt-xml-validate") is None, reason="libxml2-utils")


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (LABCTL_UPDATE_GOLDEN=1 rewrites it)"


def applied(name: str):
    source = (GOLDEN / f"{name}.xml").read_text(encoding="utf-8")
    return source, apply_changes(source, changes_from_knobs(KNOBS), source=f"{name}.xml")


@pytest.mark.parametrize("name", FIXTURES)
def test_golden_output_diff_and_lines(name):
    _, result = applied(name)
    check_golden(f"{name}.out.xml", result.xml)
    check_golden(f"{name}.diff", result.diff)
    check_golden(f"{name}.lines", "\n".join(result.lines + ["restart: " + r for r in result.restart_needed]) + "\n")


#: KNOBS as each fixture's output must carry them, per interface (queues, rx_queue_size, tx_queue_size; None:
#: no such attribute): tx_queue_size only on vhost-user (QEMU caps the other backends' tx ring at 256),
#: nothing on the e1000 and hostdev interfaces; and what needs a restart (the devices' rings and queues,
#: the hugepages). Written out so that a reader checks by eye what the golden files otherwise hold alone.
AS_ASKED = {
    "virt-install": {"drivers": [("4", "1024", None), (None, None, None), ("4", "1024", None), ("4", "1024", "1024")],
                     "restart": ["interface 0", "interface 2", "interface 3", "memoryBacking"]},
    "nova": {"drivers": [("4", "1024", None), (None, None, None)],  # interface 0 was already at 4 / 1024
             "restart": ["memoryBacking"]},
    "libvirt-vhostuser": {"drivers": [("4", "1024", "1024")] * 2,
                          "restart": ["interface 0", "interface 1", "memoryBacking"]},
}


@pytest.mark.parametrize("name", FIXTURES)
def test_the_output_carries_the_knobs(name):
    _, result = applied(name)
    root = etree.fromstring(result.xml.encode())
    drivers = [i.find("driver") for i in root.findall("devices/interface")]
    assert [tuple(None if d is None else d.get(k) for k in ("queues", "rx_queue_size", "tx_queue_size"))
            for d in drivers] == AS_ASKED[name]["drivers"]
    assert {e.get("vcpu"): e.get("cpuset") for e in root.findall("cputune/vcpupin")} == {"0": "0", "1": "1"}
    assert root.find("cputune/emulatorpin").get("cpuset") == "0-1"
    assert root.find("memoryBacking/hugepages/page").attrib == {"size": "2048", "unit": "KiB"}
    assert [r.split(" (")[0] if r.startswith("interface") else r.split(":")[0] for r in result.restart_needed] == \
        AS_ASKED[name]["restart"]


@pytest.mark.parametrize("name", FIXTURES)
def test_only_the_named_elements_and_attributes_differ(name):
    source, result = applied(name)
    changed = [l for l in result.diff.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert changed and all(ALLOWED.match(l) for l in changed), [l for l in changed if not ALLOWED.match(l)]
    # a removed <driver> line comes back with its other attributes, in their order and quoting
    for line in (l for l in changed if l.startswith("-")):
        attrs = re.findall(r"""\s(\w+=(?:'[^']*'|"[^"]*"))""", line)
        kept = [a for a in attrs if not a.startswith(("queues=", "rx_queue_size=", "tx_queue_size="))]
        assert any(all(a in l for a in kept) for l in changed if l.startswith("+")), line
    # everything but the lines of the diff is byte for byte the input
    assert [l for l in source.splitlines() if l not in result.xml.splitlines()] == \
        [l[1:] for l in changed if l.startswith("-")]


@pytest.mark.parametrize("name", FIXTURES)
def test_a_second_application_changes_nothing(name):
    _, once = applied(name)
    twice = apply_changes(once.xml, changes_from_knobs(KNOBS))
    assert not twice.changed and twice.diff == "" and twice.xml == once.xml and twice.restart_needed == []


@needs_validator
@pytest.mark.parametrize("name", FIXTURES)
def test_schema_valid_stays_schema_valid(name, tmp_path):
    before = subprocess.run(["virt-xml-validate", str(GOLDEN / f"{name}.xml"), "domain"], capture_output=True)
    assert before.returncode == 0, before.stderr  # every fixture validates
    out = tmp_path / f"{name}.out.xml"
    out.write_text(applied(name)[1].xml, encoding="utf-8")
    after = subprocess.run(["virt-xml-validate", str(out), "domain"], capture_output=True, text=True)
    assert after.returncode == 0, after.stderr


def _interfaces(text: str) -> list[bytes]:
    root = etree.fromstring(text.encode())
    return [etree.tostring(i, method="c14n2") for i in root.findall("devices/interface")]


@pytest.mark.parametrize("name, untouched", [("virt-install", [1]), ("nova", [1]), ("libvirt-vhostuser", [])])
def test_non_applicable_interfaces_are_reported_and_untouched(name, untouched):
    source, result = applied(name)
    before, after = _interfaces(source), _interfaces(result.xml)
    for index in untouched:
        assert before[index] == after[index]
        assert re.match(rf"interface {index} .*: skipped, .*; untouched$", result.lines[index])
    for index in set(range(len(before))) - set(untouched):
        assert before[index] != after[index] or "already" in result.lines[index]
