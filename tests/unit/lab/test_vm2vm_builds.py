"""Builds in the two vm2vm labs: a forwarder build runs guests A and B, a vswitch build the host side, and the
libvirt lab refuses a bad appliance forwarder before its vswitch starts."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from labctl.errors import PlanError
from labctl.lab.builds import Program
from labctl.lab.embedded.vm2vm import vm2vm_guest, vm2vm_vswitch
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import vm2vm as libvirt_vm2vm
from labctl.lab.libvirt.vm2vm import Vm2vmGuestLab
from labctl.lab.plan import BuildPlan, derive
from labctl.profile.load import load_profile
from tests.conftest import CPUS, DOMAINS


def _plan(name: str):
    return derive(load_profile(DOMAINS / f"{name}.yaml", cpus=CPUS).profile)


def test_a_forwarder_build_runs_both_embedded_guests_and_a_vswitch_build_the_host_side():
    plan = _plan("vm2vm")
    fwd = Program("forwarder", "/opt/p/dpdk-testpmd", (("DPDK_X", "1"),), "p")
    vs = Program("vswitch", "/opt/v/dpdk-testpmd", (), "p")
    for role in ("guest", "guestb"):
        proc = vm2vm_guest(plan, role, None, fwd)
        assert proc.argv[3] == "/opt/p/dpdk-testpmd" and proc.env == {"DPDK_X": "1"}
    assert vm2vm_vswitch(plan, None, vs).argv[3] == "/opt/v/dpdk-testpmd"
    assert vm2vm_guest(plan, "guest", None).argv[3] != "/opt/p/dpdk-testpmd"  # none: the host's


def test_libvirt_vm2vm_refuses_a_bad_appliance_forwarder_before_its_vswitch_starts(tmp_path, monkeypatch):
    xmllint = Path("/usr/bin/xmllint")
    if not xmllint.exists() or shutil.which("dpdk-testpmd") is None:
        pytest.skip("xmllint or dpdk-testpmd not installed")
    folder = tmp_path / "b"
    folder.mkdir()
    os.chmod(folder, 0o755)
    binary = folder / "dpdk-testpmd"
    shutil.copyfile(xmllint, binary)
    os.chmod(binary, 0o755)
    plan = replace(_plan("guest-vm2vm"), build=BuildPlan(label="bad", forwarder=str(binary)))
    started = []
    monkeypatch.setattr(libvirt_vm2vm, "vswitch_testpmd", lambda *a, **k: started.append(a))
    state = LabState(plan.name, tmp_path / "state.json")
    lab = Vm2vmGuestLab(plan, state, "qemu:///system", [])
    with pytest.raises(PlanError, match=r"^builds\.bad\.forwarder: .*libxml2\.so\.2"):
        lab.boot()
    assert started == [] and state.find("path") == [] and not plan.dirs.run.exists()
