"""up / down / status on libvirt's test driver."""

from __future__ import annotations

import json

import pytest

from labctl.errors import HypervisorError
from labctl.lab.ledger import load_state
from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.lifecycle import down, status, up
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS

TEST_URI = "test:///default"


CPUS = frozenset({0, 1})


@pytest.fixture
def tap_profile():
    return load_profile(DOMAINS / "tap-kernel.yaml", cpus=CPUS)


def test_up_status_down_on_test_driver(tap_profile, cli):
    result = up(tap_profile, TEST_URI)
    assert result.domain == "labctl-tap-kernel" and result.state == "running" and result.domain_type == "test"
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel").isActive()
    labs = status(TEST_URI)
    assert [lab["name"] for lab in labs] == ["tap-kernel"] and labs[0]["state"] == "running"
    code, out, _ = cli("status", "--json", "--uri", TEST_URI)
    assert code == 0 and json.loads(out)["labs"][0]["domain"] == "labctl-tap-kernel"
    removed = down("tap-kernel")
    assert "domain labctl-tap-kernel" in removed
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel") is None
    assert load_state("tap-kernel").resources == [] and not load_state("tap-kernel").path.exists()
    assert down("tap-kernel") == []  # a second down is a no-op


def test_cli_up_down(cli):
    code, out, _ = cli("up", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 0 and "running" in out
    code, _, err = cli("up", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 2 and "already up" in err
    code, out, _ = cli("down", str(DOMAINS / "tap-kernel.yaml"), "--uri", TEST_URI)
    assert code == 0 and "removed" in out
    code, out, _ = cli("down", "tap-kernel")
    assert code == 0 and "nothing to remove" in out


def test_embedded_profile_cannot_go_up(cli):
    code, _, err = cli("up", str(DOMAINS / "quick.yaml"))
    assert code == 2 and "embedded" in err


def test_failed_define_leaves_nothing(tap_profile, monkeypatch, tmp_path):
    def refuse(uri, xml, start=True):
        raise HypervisorError("libvirt refused the domain: simulated")

    monkeypatch.setattr(hypervisor, "define_and_start", refuse)
    with pytest.raises(HypervisorError):
        up(tap_profile, TEST_URI)
    assert not load_state("tap-kernel").resources
    assert not (tmp_path / "run" / "tap-kernel").exists()


def test_down_finds_domain_without_state_file(tap_profile):
    up(tap_profile, TEST_URI)
    load_state("tap-kernel").path.unlink()  # the state file is lost
    assert "domain labctl-tap-kernel" in down("tap-kernel", TEST_URI)
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel") is None


def test_down_removes_a_domain_whose_define_was_still_in_flight(tap_profile, monkeypatch):
    """labctl up killed while libvirtd probes QEMU (the first define on a host with an empty capabilities
    cache): libvirtd finishes the define after labctl is gone. down must wait for it, then remove it."""
    up(tap_profile, TEST_URI)
    dom = hypervisor.lookup(TEST_URI, "labctl-tap-kernel")
    xml = dom.XMLDesc()
    dom.destroy()
    dom.undefine()  # not defined yet, as libvirt sees it; the state file records the domain
    probes = []

    def define_lands_during_the_probe(uri):
        probes.append(uri)
        if len(probes) == 1:
            hypervisor.connect(uri).defineXML(xml)

    monkeypatch.setattr(hypervisor, "probe_emulators", define_lands_during_the_probe)
    down("tap-kernel")
    assert probes == [TEST_URI]
    assert hypervisor.lookup(TEST_URI, "labctl-tap-kernel") is None
