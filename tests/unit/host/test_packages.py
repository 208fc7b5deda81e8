"""labctl/host/packages.py: the one package list parsed, dpkg asked, the missing ones named with the apt
command that installs them all (labctl doctor)."""

from __future__ import annotations

import shutil

import pytest

from labctl.host import packages
from labctl.host.doctor import Doctor, describe_host
from labctl.host.facts import gather
from tests.conftest import ROOT


def test_the_list_is_parsed_names_in_order_comments_dropped():
    text = "# header\nqemu-system-x86 qemu-utils  # the emulator\n\ndpdk\tdpdk-dev\nqemu-utils\n"
    assert packages.parse_list(text) == ["qemu-system-x86", "qemu-utils", "dpdk", "dpdk-dev"]


def test_the_list_is_the_checkout_s_one_list():
    names = packages.listed()
    assert names == packages.parse_list((ROOT / "scripts" / "apt-packages.txt").read_text())
    for wanted in ("qemu-system-x86", "libvirt-daemon", "dpdk", "openvswitch-switch-dpdk", "iperf3", "sockperf",
                   "mmdebstrap", "chromium"):
        assert wanted in names


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian host")
def test_a_missing_package_is_named_with_one_install_line():
    result = packages.check(["dpkg", "labctl-no-such-package", "coreutils", "labctl-no-such-other"])
    assert result.known
    assert result.missing == ["labctl-no-such-package", "labctl-no-such-other"]
    assert result.describe() == "2 of 4 missing: labctl-no-such-package, labctl-no-such-other"
    assert result.command == "apt-get install --no-install-recommends labctl-no-such-package labctl-no-such-other"


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian host")
def test_nothing_missing_needs_no_command():
    result = packages.check(["dpkg", "coreutils"])
    assert result.missing == [] and result.command == ""
    assert result.describe() == "all 2 of labctl's Debian packages are installed"


def test_without_dpkg_it_says_it_cannot_tell(monkeypatch):
    monkeypatch.setattr(packages.shutil, "which", lambda name: None)
    result = packages.check(["qemu-utils"])
    assert not result.known and result.command == ""
    assert result.describe().startswith("cannot tell: dpkg-query is not available")


def test_the_doctor_says_it(monkeypatch):
    facts = gather()
    object.__setattr__(facts, "packages", packages.Packages(["a", "b", "c"], ["b", "c"]))
    lines = dict(describe_host(Doctor(facts)))
    assert lines["packages"] == "2 of 3 missing: b, c"
    assert lines["install"] == "apt-get install --no-install-recommends b c"
    assert facts.to_dict()["packages"] == {"listed": 3, "missing": ["b", "c"], "known": True,
                                           "command": "apt-get install --no-install-recommends b c"}


def test_an_installed_package_is_not_told_to_run_make(monkeypatch):
    from labctl import shipped
    from labctl.host import facts

    monkeypatch.setattr(facts.shutil, "which", lambda name: None)
    monkeypatch.setattr(shipped, "is_checkout", lambda: True)
    assert "(make setup)" in facts.lab_backends({})["embedded"]
    monkeypatch.setattr(shipped, "is_checkout", lambda: False)
    said = facts.lab_backends({})
    assert "make" not in said["embedded"] + said["libvirt"]
    assert said["embedded"] == "unavailable: dpdk-testpmd is not installed (the install line below)"
