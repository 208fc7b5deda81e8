"""A NIC swap on a running domain (labctl.lab.libvirt.hotplug), against a recorded-behaviour stand-in for a
libvirt domain: libvirt's test driver has no device hot-plug (virDomainDetachDeviceFlags is unsupported there),
and the real daemon is tests/integration/test_hotswap.py's. The stand-in removes a detached device only when
its guest "answers" (after a number of reads of the live XML, or never), as QEMU does after the guest's ACPI
eject."""

from __future__ import annotations

import pytest

from labctl.errors import SwapError
from labctl.lab.libvirt import hotplug
from labctl.lab.libvirt.domxml import RenderContext, render
from labctl.lab.plan import derive
from labctl.profile.load import validate_data
from tests.factories import HotplugDomain


CPUS = frozenset({0, 1})


def FakeDomain(plan, answer_after: int | None = 1, refuse_mac: str | None = None) -> HotplugDomain:
    return HotplugDomain(render(plan, RenderContext(domain_type="test")), answer_after, refuse_mac)


def _plan(rx: int = 256, queues: int = 1, backend: str = "vhostuser"):
    data = {"name": "fx-hot", "backend": "libvirt", "guest": {"vcpus": 2, "nics": [
        {"backend": backend, "rx_queue_size": rx, "queues": queues}] * 2}}
    return derive(validate_data(data, "p", cpus=CPUS).profile)


def test_a_swap_unplugs_waits_for_the_guest_and_plugs_the_new_settings_at_the_same_address():
    old, new = _plan(256), _plan(1024, queues=2)
    dom = FakeDomain(old, answer_after=2)
    before = {hotplug.mac_of(i): i.find("address").attrib for i in hotplug.live_interfaces(dom)}
    order = []
    steps = hotplug.swap_nics("test:///default", dom, old, new, RenderContext(),
                              between=lambda: order.append(list(dom.calls)))
    macs = [n.mac for n in old.nics]
    assert order == [[("detach", macs[0]), ("detach", macs[1])]]  # between: every NIC unplugged, none plugged
    assert dom.calls[2:] == [("attach", macs[0]), ("attach", macs[1])]
    after = hotplug.live_interfaces(dom)
    assert [hotplug.mac_of(i) for i in after] == macs
    for interface in after:
        driver = interface.find("driver").attrib
        assert (driver["rx_queue_size"], driver["queues"]) == ("1024", "2")
        assert interface.find("address").attrib == before[hotplug.mac_of(interface)]  # the same PCI slot
        assert hotplug.alias_of(interface).startswith("ua-labctl-nic")
    assert set(steps) == {"detach_s", "between_s", "attach_s"}


def test_a_guest_that_never_releases_its_nic_is_a_swap_error_within_the_bound():
    old = _plan(256)
    dom = FakeDomain(old, answer_after=None)
    with pytest.raises(SwapError, match=r"did not release ua-labctl-nic0, ua-labctl-nic1 within 0 s \(no ACPI eject"):
        hotplug.swap_nics("test:///default", dom, old, _plan(1024), RenderContext(), timeout_s=0.3)
    assert [c for c, _ in dom.calls] == ["detach", "detach"]  # nothing attached


def test_a_device_qemu_refuses_is_a_swap_error_naming_it():
    old = _plan(256)
    dom = FakeDomain(old, refuse_mac=old.nics[1].mac)
    with pytest.raises(SwapError, match=r"labctl-fx-hot: attaching nic1: .*does not support hotplugging"):
        hotplug.swap_nics("test:///default", dom, old, _plan(1024), RenderContext())


def test_a_swap_keeps_the_nics_count_macs_and_backends():
    with pytest.raises(SwapError, match="count, MACs or backends differ"):
        hotplug.swap_nics("test:///default", FakeDomain(_plan()), _plan(), _plan(backend="tap"), RenderContext())


def test_a_nic_missing_from_the_running_domain_is_a_swap_error():
    old = _plan()
    dom = FakeDomain(old)
    devices = dom.root.find("devices")
    devices.remove(devices.findall("interface")[1])
    with pytest.raises(SwapError, match=r"no interface for nic1"):
        hotplug.swap_nics("test:///default", dom, old, _plan(1024), RenderContext())


def test_the_removal_event_answers_before_the_live_xml_is_read_again():
    """VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED ends the wait (the live XML is only read once a second)."""
    old = _plan()
    dom = FakeDomain(old, answer_after=None)
    watch = hotplug.RemovalWatch("test:///default", dom)
    watch._conn = object()  # as if subscribed: the events alone answer
    watch._removed(None, None, "ua-labctl-nic0", None)
    watch._removed(None, None, "ua-labctl-nic1", None)
    assert watch.wait({"ua-labctl-nic0", "ua-labctl-nic1"}, {n.mac for n in old.nics}, 5.0, "x") < 0.5
    watch._failed(None, None, "ua-labctl-nic1", None)
    with pytest.raises(SwapError, match="refused to release ua-labctl-nic1"):
        watch.wait({"ua-labctl-nic1"}, set(), 5.0, "x")
    watch._conn = None


GOLDEN = __import__("pathlib").Path(__file__).resolve().parents[3] / "golden" / "swap"


@pytest.mark.parametrize("stem", ["guest-vhostuser", "guest-tap", "guest-e1000", "tap-kernel", "guest-image",
                                  "guest-ovs", "guest-vm2vm"])
def test_golden_interfaces_a_swap_attaches(stem, monkeypatch):
    """What a swap hands libvirt's attach for each NIC of a shipped profile (its <model>, <driver> queues and rings,
    MAC, alias, and the PCI address of the device it replaces): the golden files fix it."""
    import os

    from labctl.profile.load import load_profile
    from labctl.profile import userimage
    from tests.conftest import DOMAINS

    monkeypatch.setattr(userimage, "identity_of", lambda path: "size+sha256")  # the image's file need not exist
    monkeypatch.setenv("LABCTL_RUN_DIR", "/run/labctl")  # labctl's default: the sockets' paths as a user sees them
    plan = derive(load_profile(DOMAINS / f"{stem}.yaml", cpus=CPUS).profile)
    dom = FakeDomain(plan)
    sent: list[str] = []
    attach = dom.attachDeviceFlags
    dom.attachDeviceFlags = lambda xml, flags: (sent.append(xml), attach(xml, flags))[1]
    hotplug.swap_nics("test:///default", dom, plan, plan, RenderContext())
    text = "\n".join(sent) + "\n"
    golden = GOLDEN / f"{stem}.xml"
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}; run with LABCTL_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")
