"""Domain XML: golden files per shipped profile, libvirt's schema, and escaping."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labctl.lab.libvirt.domxml import RenderContext
from labctl.lab.libvirt.domxml import render as render_plan
from labctl.lab.plan import LabDirs, derive, tap_name
from labctl.profile.load import load_profile
from labctl.profile.schema import Profile
from tests.conftest import ROOT, shipped_profiles

GOLDEN = ROOT / "tests" / "golden"
CPUS = frozenset({0, 1})
FIXED = RenderContext(domain_type="qemu")


def render(profile: Profile, ctx: RenderContext | None = None) -> str:
    """The XML of a profile's plan, with the default run and log directories (golden files name them)."""
    name = profile.name
    return render_plan(derive(profile, LabDirs.of(name, Path("/run/labctl"), Path("/var/log/labctl"))), ctx)


def validate_xml(text: str) -> subprocess.CompletedProcess:
    return subprocess.run(["virt-xml-validate", "-", "domain"], input=text, capture_output=True, text=True)


@pytest.mark.parametrize("path", shipped_profiles(), ids=lambda p: p.stem)
def test_golden(path):
    xml = render(load_profile(path, cpus=CPUS).profile, FIXED)
    golden = GOLDEN / f"{path.stem}.xml"
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        golden.write_text(xml, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}; run with LABCTL_UPDATE_GOLDEN=1"
    assert xml == golden.read_text(encoding="utf-8")


#: What four shipped profiles ask (their YAML beside them), as their domain XML must say it under TCG: the
#: golden files are otherwise the only check of these lines, so they are written out here to be read by eye.
VHOST_256 = {"queues": "1", "rx_queue_size": "256", "tx_queue_size": "256"}
ASKED = {
    # vhost-user, 4 queues, rings 1024/1024, 4 vCPUs on CPU 1, emulator on CPU 0
    "l2fwd-vhostuser": {"drivers": [{"queues": "4", "rx_queue_size": "1024", "tx_queue_size": "1024"}] * 2,
                        "shared_memfd": True, "nomsi": True,
                        "pins": ({"0": "1", "1": "1", "2": "1", "3": "1"}, "0")},
    "guest-vhostuser": {"drivers": [VHOST_256] * 2, "shared_memfd": True, "nomsi": True, "pins": ({"0": "1"}, "1")},
    # tap: QEMU's userspace backend (no /dev/vhost-net), rx ring 1024, tx ring 256; no shared memory
    "tap-kernel": {"drivers": [{"name": "qemu", "queues": "2", "rx_queue_size": "1024", "tx_queue_size": "256"}],
                   "shared_memfd": False, "nomsi": False, "pins": ({"0": "0", "1": "1"}, "0")},
    "guest-tap": {"drivers": [{"name": "qemu", **VHOST_256}] * 2, "shared_memfd": False, "nomsi": False,
                  "pins": ({"0": "1"}, "1")},
}


@pytest.mark.parametrize("name", sorted(ASKED))
def test_the_xml_carries_what_the_profile_asks(name):
    asked = ASKED[name]
    profile = load_profile(ROOT / "domains" / f"{name}.yaml", cpus=CPUS).profile
    root = ET.fromstring(render(profile, FIXED))
    assert [d.attrib for d in root.findall("devices/interface/driver")] == asked["drivers"]
    memfd = root.find("memoryBacking/source[@type='memfd']") is not None
    shared = root.find("memoryBacking/access[@mode='shared']") is not None
    assert (memfd, shared) == (asked["shared_memfd"], asked["shared_memfd"])  # vhost-user needs shared memory
    assert ("pci=nomsi" in root.findtext("os/cmdline").split()) == asked["nomsi"]  # TCG + vhost-user only
    vcpus, emulator = asked["pins"]
    assert {e.get("vcpu"): e.get("cpuset") for e in root.findall("cputune/vcpupin")} == vcpus
    assert root.find("cputune/emulatorpin").get("cpuset") == emulator
    # the same profile on KVM: never the TCG workaround
    kvm = ET.fromstring(render(profile, RenderContext(domain_type="kvm")))
    assert "pci=nomsi" not in kvm.findtext("os/cmdline").split()


def test_vm2vm_guest_b_is_a_domain_of_its_own():
    profile = load_profile(ROOT / "domains" / "guest-vm2vm.yaml", cpus=CPUS).profile
    plan = derive(profile, LabDirs.of(profile.name, Path("/run/labctl"), Path("/var/log/labctl")))
    a, b = render_plan(plan, FIXED), render_plan(plan.peer(), FIXED)
    golden = GOLDEN / "guest-vm2vm-b.xml"
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        golden.write_text(b, encoding="utf-8")
    assert b == golden.read_text(encoding="utf-8")
    root_a, root_b = ET.fromstring(a), ET.fromstring(b)
    assert root_b.findtext("name") == root_a.findtext("name") + "-b"
    sockets = lambda root: [s.get("path") for s in root.iter("source") if s.get("path", "").endswith(".sock")]
    macs = lambda root: [m.get("address") for m in root.iter("mac")]
    assert sockets(root_b) == ["/run/labctl/guest-vm2vm/vhost-b0.sock", "/run/labctl/guest-vm2vm/vhost-b1.sock"]
    assert not set(sockets(root_a)) & set(sockets(root_b)) and not set(macs(root_a)) & set(macs(root_b))


needs_validator = pytest.mark.skipif(shutil.which("virt-xml-validate") is None, reason="libxml2-utils/libvirt-clients")


@needs_validator
@pytest.mark.parametrize("path", shipped_profiles(), ids=lambda p: p.stem)
@pytest.mark.parametrize("domain_type", ["kvm", "qemu", "test"])
def test_schema_valid(path, domain_type):
    xml = render(load_profile(path, cpus=CPUS).profile, RenderContext(domain_type=domain_type))
    proc = validate_xml(xml)
    assert proc.returncode == 0, proc.stderr


@needs_validator
def test_cli_render_pipes_into_virt_xml_validate(tmp_path):
    for path in shipped_profiles():
        rendered = subprocess.run([str(ROOT / ".venv/bin/labctl"), "render", str(path)],
                                  capture_output=True, text=True)
        assert rendered.returncode == 0, rendered.stderr
        assert validate_xml(rendered.stdout).returncode == 0


def profile(**guest) -> Profile:
    return Profile.model_validate({"name": "x", "guest": guest})


def test_vhostuser_gets_shared_memfd_memory_and_socket():
    root = ET.fromstring(render(profile(nics=[{"backend": "vhostuser", "queues": 2}]), FIXED))
    assert root.find("memoryBacking/source").get("type") == "memfd"
    assert root.find("memoryBacking/access").get("mode") == "shared"
    iface = root.find("devices/interface")
    assert iface.get("type") == "vhostuser" and iface.find("source").get("mode") == "client"
    assert iface.find("driver").attrib == {"queues": "2", "rx_queue_size": "256", "tx_queue_size": "256"}


def test_hugepages_with_vhostuser_are_shared_hugepages():
    root = ET.fromstring(render(profile(hugepages=True, nics=[{"backend": "vhostuser"}]), FIXED))
    assert root.find("memoryBacking/hugepages/page").get("size") == "2048"
    assert root.find("memoryBacking/access") is not None and root.find("memoryBacking/source") is None


def test_tap_uses_userspace_backend_without_shared_memory():
    root = ET.fromstring(render(profile(nics=[{"backend": "tap", "queues": 2, "rx_queue_size": 1024}]), FIXED))
    assert root.find("memoryBacking") is None
    driver = root.find("devices/interface/driver")
    assert driver.get("name") == "qemu" and driver.get("rx_queue_size") == "1024"
    assert len(root.find("devices/interface/target").get("dev")) <= 15


def test_pci_nomsi_only_for_vhostuser_under_tcg():
    vhost = profile(nics=[{"backend": "vhostuser"}])
    tap = profile(nics=[{"backend": "tap"}])
    assert "pci=nomsi" in render(vhost, RenderContext(domain_type="qemu"))
    assert "pci=nomsi" not in render(vhost, RenderContext(domain_type="kvm"))
    assert "pci=nomsi" not in render(tap, RenderContext(domain_type="qemu"))


def test_cpu_model_per_accelerator():
    p = profile()
    assert ET.fromstring(render(p, RenderContext(domain_type="kvm"))).find("cpu").get("mode") == "host-passthrough"
    assert ET.fromstring(render(p, RenderContext(domain_type="qemu"))).find("cpu").get("mode") == "maximum"


def test_pinning_rendered():
    root = ET.fromstring(render(profile(vcpus=2, pinning={"vcpus": {0: "0", 1: "1"}, "emulator": "0-1"}), FIXED))
    pins = {e.get("vcpu"): e.get("cpuset") for e in root.findall("cputune/vcpupin")}
    assert pins == {"0": "0", "1": "1"} and root.find("cputune/emulatorpin").get("cpuset") == "0-1"


def test_special_characters_are_escaped():
    ctx = RenderContext(cmdline="console=ttyS0 x=<&\"'>")
    xml = render(profile(), ctx)
    assert "x=&lt;&amp;\"'&gt;" in xml
    assert "x=<&\"'>" in ET.fromstring(xml).find("os/cmdline").text


def test_tap_names_unique_and_short():
    a, b = "a" * 40, "a" * 39 + "b"
    assert tap_name(a, 0) != tap_name(b, 0) and len(tap_name(a, 7)) <= 15


def test_kernel_nics_use_vhost_net_only_where_the_host_has_it():
    plan = derive(load_profile(ROOT / "domains" / "tcp-multiqueue.yaml", cpus=CPUS).profile)
    userspace = ET.fromstring(render_plan(plan, RenderContext())).find("devices/interface/driver")
    vhost = ET.fromstring(render_plan(plan, RenderContext(vhost_net=True))).find("devices/interface/driver")
    assert userspace.get("name") == "qemu" and vhost.get("name") == "vhost"
    assert vhost.get("queues") == "2"
    if shutil.which("virt-xml-validate"):
        assert validate_xml(render_plan(plan, RenderContext(vhost_net=True))).returncode == 0


def test_image_guest_xml_boots_the_overlay_with_the_agent_channel(tmp_path):
    """An image guest: the overlay as a virtio disk, the agent's channel, direct kernel boot with the TCG
    workaround on the user's command line; without guest.boot, the image's loader and vectors=0 (TCG)."""
    import subprocess
    import xml.etree.ElementTree as ET

    from labctl.profile.schema import Profile

    image = tmp_path / "g.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "16M"], check=True)
    profile = Profile.model_validate({"name": "img", "guest": {"image": str(image), "boot": {
        "kernel": "/k/vmlinuz", "initrd": "/k/initrd", "cmdline": "root=/dev/vda rw"}},
        "workload": {"forwarder": "testpmd"}})
    plan = derive(profile)
    root = ET.fromstring(render_plan(plan, RenderContext(domain_type="qemu")))
    assert root.find("os/kernel").text == "/k/vmlinuz"
    assert root.find("os/cmdline").text == "root=/dev/vda rw pci=nomsi"
    assert root.find("devices/disk/source").get("file") == str(plan.dirs.run / "overlay.qcow2")
    assert root.find("devices/disk/driver").get("type") == "qcow2"
    assert [c.find("target").get("name") for c in root.findall("devices/channel")] == ["org.qemu.guest_agent.0"]
    loader = derive(profile.model_copy(update={"guest": profile.guest.model_copy(update={"boot": None})}))
    root = ET.fromstring(render_plan(loader, RenderContext(domain_type="qemu")))
    assert root.find("os/boot").get("dev") == "hd" and root.find("os/kernel") is None
    props = root.findall(".//{http://libvirt.org/schemas/domain/qemu/1.0}property")
    assert [(p.get("name"), p.get("value")) for p in props] == [("vectors", "0")] * 2
    root = ET.fromstring(render_plan(loader, RenderContext(domain_type="kvm")))
    assert not root.findall(".//{http://libvirt.org/schemas/domain/qemu/1.0}override")
    assert plan.domain_key() != derive(Profile.model_validate({"name": "img"})).domain_key()


def test_image_guest_xml_declares_the_backing_chain_so_libvirt_never_relabels_the_users_image(tmp_path):
    """The user's image (and its own backing file) under the overlay, each never relabelled: left to
    find the chain itself, libvirt 9.0 chowned the backing image to libvirt-qemu and left it so."""
    from labctl.profile.userimage import probe

    base = tmp_path / "base.raw"
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", str(base), "16M"], check=True)
    image = tmp_path / "g.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(base), "-F", "raw", str(image)], check=True)
    info = probe(str(image))
    assert info.chain == ((str(image), "qcow2"), (str(base), "raw"))
    plan = derive(Profile.model_validate({"name": "img", "guest": {"image": str(image)},
                                          "workload": {"forwarder": "testpmd"}}))
    xml = render_plan(plan, RenderContext(domain_type="qemu", image_chain=info.chain))
    disk = ET.fromstring(xml).find("devices/disk")
    first = disk.find("backingStore")
    second = first.find("backingStore")
    assert (first.find("format").get("type"), first.find("source").get("file")) == ("qcow2", str(image))
    assert (second.find("format").get("type"), second.find("source").get("file")) == ("raw", str(base))
    assert list(second.find("backingStore")) == [] and second.find("backingStore").get("type") is None
    for store in (first, second):
        label = store.find("source/seclabel")
        assert (label.get("model"), label.get("relabel")) == ("dac", "no")
    if shutil.which("virt-xml-validate"):
        assert validate_xml(xml).returncode == 0
    # without the chain (labctl render: no image probed), the overlay alone, as before
    assert ET.fromstring(render_plan(plan, RenderContext(domain_type="qemu"))).find("devices/disk/backingStore") is None
