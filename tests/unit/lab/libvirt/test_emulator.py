"""A QEMU build is the domain's <emulator> (golden XML), valid for libvirt's schema, and `labctl render`
shows it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labctl.lab.builds import emulator_of
from labctl.lab.libvirt.domxml import RenderContext
from labctl.lab.libvirt.domxml import render as render_plan
from labctl.lab.libvirt.lifecycle import render_profile
from labctl.lab.plan import LabDirs, derive
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS, ROOT
from tests.unit.lab.libvirt.test_domxml import needs_validator, validate_xml

QEMU = "/usr/bin/qemu-system-x86_64"
needs_qemu = pytest.mark.skipif(not os.path.isfile(QEMU) or os.path.islink(QEMU), reason="no Debian QEMU here")
GOLDEN = ROOT / "tests" / "golden" / "guest-qemu-build.xml"


def _with_build(qemu: str):
    import yaml

    from labctl.profile.load import validate_data

    data = yaml.safe_load((DOMAINS / "guest-vhostuser.yaml").read_text())
    data.update(builds={"q": {"qemu": qemu}}, build="q")
    return validate_data(data, "guest-vhostuser.yaml", cpus=frozenset({0, 1})).profile


@needs_qemu
def test_a_qemu_build_is_the_domain_s_emulator():
    profile = _with_build(QEMU)
    plan = derive(profile, LabDirs.of(profile.name, Path("/run/labctl"), Path("/var/log/labctl")))
    xml = render_plan(plan, RenderContext(domain_type="qemu", emulator=emulator_of(plan)))
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        GOLDEN.write_text(xml, encoding="utf-8")
    assert xml == GOLDEN.read_text(encoding="utf-8")
    devices = xml.split("<devices>", 1)[1].split()
    assert devices[0] == f"<emulator>{QEMU}</emulator>"  # the first device (libvirt formatdomain.html#devices)


@needs_qemu
def test_render_shows_the_resolved_emulator(tmp_path):
    link = tmp_path / "qemu-patched"
    link.symlink_to(QEMU)
    assert f"<emulator>{QEMU}</emulator>" in render_profile(_with_build(str(link)), "test:///default")


def test_without_a_build_libvirt_picks_the_emulator():
    profile = load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=frozenset({0, 1})).profile
    assert "<emulator>" not in render_profile(profile, "test:///default")


@needs_qemu
@needs_validator
def test_the_emulator_is_valid_for_libvirt_s_schema():
    proc = validate_xml(render_profile(_with_build(QEMU), "test:///default"))
    assert proc.returncode == 0, proc.stderr
