"""A build's forwarder in a libvirt guest's appliance: the cache key per binary, the library check, the refusals
(one line, before anything is created), and what the builder stages."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from labctl.errors import PlanError, UserError
from labctl.lab.ledger import LabState
from labctl.lab.libvirt import domain as domain_module
from labctl.lab.libvirt.appliance import cache as cache_module
from labctl.lab.libvirt.appliance import image as image_module
from labctl.lab.libvirt.appliance.key import KeyInputs, compute_key
from labctl.lab.libvirt.domain import GuestDomain, appliance_forwarder
from labctl.lab.plan import BuildPlan, derive
from labctl.profile.load import load_profile
from tests.conftest import CPUS, DOMAINS

TESTPMD = Path("/usr/bin/dpdk-testpmd")
needs_testpmd = pytest.mark.skipif(not TESTPMD.exists(), reason="dpdk-testpmd not installed")


def _inputs(**kw) -> KeyInputs:
    return KeyInputs(kernel_package="linux-image-6.1.0-x-amd64", kernel_deb_version="6.1.1-1",
                     kernel_deb_sha256="a" * 64, packages={"dpdk": "22.11.11-1~deb12u1", "libc6": "2.36-9"},
                     init_sh_sha256="b" * 64, **kw)


def test_the_stock_key_is_unchanged_and_a_forwarder_build_keys_by_its_sha256():
    stock = _inputs()
    # the canonical form (so the key) of the stock appliance holds no forwarder field at all
    assert "forwarder" not in stock.canonical()
    assert compute_key(stock) == compute_key(_inputs(forwarder_sha256="", forwarder_path="/somewhere"))
    one = _inputs(forwarder_sha256="1" * 64, forwarder_path="/opt/a/dpdk-testpmd")
    two = _inputs(forwarder_sha256="2" * 64, forwarder_path="/opt/a/dpdk-testpmd")
    moved = _inputs(forwarder_sha256="1" * 64, forwarder_path="/opt/b/dpdk-testpmd")
    assert len({compute_key(stock), compute_key(one), compute_key(two)}) == 3
    assert compute_key(one) == compute_key(moved)  # the bytes key the image, not where they lie


def test_gather_inputs_hashes_the_forwarder(monkeypatch, tmp_path):
    monkeypatch.setattr(cache_module, "resolve_kernel", lambda *a, **k: ("img", "1", "c" * 64, "pool/img.deb"))
    monkeypatch.setattr(cache_module, "package_versions", lambda: {"dpdk": "1"})
    binary = tmp_path / "dpdk-testpmd"
    binary.write_bytes(b"\x7fELF not really")
    stock = cache_module.gather_inputs(update_apt=False)
    built = cache_module.gather_inputs(update_apt=False, forwarder=str(binary))
    assert stock.forwarder_sha256 == "" and stock.forwarder_path == ""
    assert built.forwarder_sha256 == hashlib.sha256(binary.read_bytes()).hexdigest()
    assert built.forwarder_path == str(binary)
    assert compute_key(stock) != compute_key(built)


def _entry(cache_dir: Path, name: str, meta: dict) -> Path:
    path = cache_dir / name
    path.mkdir(parents=True)
    (path / "vmlinuz").write_bytes(b"k")  # an entry without kernel_file holds the bzImage
    (path / "initrd.cpio").write_bytes(b"i")
    (path / "appliance.json").write_text(json.dumps({"key": name, "kernel_version": "6.1", **meta}))
    return path


def test_without_apt_cached_finds_the_entry_carrying_the_same_forwarder(monkeypatch, tmp_path):
    from labctl.errors import ApplianceError

    def no_apt(*_a, **_k):
        raise ApplianceError("no apt lists")

    monkeypatch.setattr(cache_module, "gather_inputs", no_apt)
    binary = tmp_path / "bin" / "dpdk-testpmd"
    binary.parent.mkdir()
    binary.write_bytes(b"build")
    sha = hashlib.sha256(b"build").hexdigest()
    cache_dir = tmp_path / "cache"
    _entry(cache_dir, "stock", {})
    os.utime(cache_dir / "stock" / "appliance.json", (1, 1))
    _entry(cache_dir, "built", {"forwarder_sha256": sha, "forwarder_path": str(binary)})
    assert cache_module.cached(cache_dir).path.name == "stock"  # the newest entry is the build's: not taken
    assert cache_module.cached(cache_dir, forwarder=str(binary)).path.name == "built"


def test_ldd_names_lists_the_closure_by_name_without_the_vdso(monkeypatch):
    out = ("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibrte_eal.so.23 => /lib/x86_64-linux-gnu/librte_eal.so.23 (0x1)\n"
           "\tlibxml2.so.2 => not found\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n")
    monkeypatch.setattr(image_module, "run", lambda args, **k: type("P", (), {"stdout": out, "returncode": 0})())
    assert image_module.ldd_names(Path("/x")) == {"librte_eal.so.23", "libxml2.so.2", "ld-linux-x86-64.so.2"}
    static = "\tstatically linked\n"
    monkeypatch.setattr(image_module, "run", lambda args, **k: type("P", (), {"stdout": static, "returncode": 1})())
    assert image_module.ldd_names(Path("/x")) == set()


@needs_testpmd
def test_the_library_check_refuses_a_binary_needing_what_the_appliance_lacks():
    carried = image_module.appliance_libraries()
    assert {"librte_eal.so.23", "libc.so.6", "librte_net_virtio.so.23"} <= carried
    assert image_module.missing_libraries(TESTPMD, carried) == []
    xmllint = Path("/usr/bin/xmllint")
    if not xmllint.exists():
        pytest.skip("xmllint (libxml2-utils) not installed")
    assert "libxml2.so.2" in image_module.missing_libraries(xmllint, carried)


def _plan(tmp_path, **build):
    plan = derive(load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=CPUS).profile)
    return replace(plan, build=BuildPlan(label="b", **build))


def _root_owned_copy(tmp_path, source: Path, name: str = "dpdk-testpmd") -> Path:
    folder = tmp_path / "builds"
    folder.mkdir(exist_ok=True)
    os.chmod(folder, 0o755)
    dest = folder / name
    shutil.copyfile(source, dest)
    os.chmod(dest, 0o755)
    return dest


@needs_testpmd
def test_appliance_forwarder_is_none_without_a_build_and_the_resolved_path_with_one(tmp_path):
    assert appliance_forwarder(derive(load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=CPUS).profile)) is None
    same = _root_owned_copy(tmp_path, TESTPMD)
    link = tmp_path / "builds" / "link"
    link.symlink_to(same)
    assert appliance_forwarder(_plan(tmp_path, forwarder=str(link))) == str(same)


@needs_testpmd
def test_an_env_on_an_appliance_forwarder_build_is_refused_in_one_line(tmp_path):
    same = _root_owned_copy(tmp_path, TESTPMD)
    plan = _plan(tmp_path, forwarder=str(same), env=(("LD_LIBRARY_PATH", "/opt/dpdk/lib"),))
    with pytest.raises(PlanError) as err:
        appliance_forwarder(plan)
    text = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in text
    assert text.startswith("builds.b.env:") and "allowed" in text


def test_a_missing_library_is_refused_before_anything_is_created(tmp_path, monkeypatch):
    xmllint = Path("/usr/bin/xmllint")
    if not xmllint.exists() or not TESTPMD.exists():
        pytest.skip("xmllint or dpdk-testpmd not installed")
    binary = _root_owned_copy(tmp_path, xmllint)
    plan = _plan(tmp_path, forwarder=str(binary))
    state = LabState(plan.name, tmp_path / "state.json")
    built = []
    monkeypatch.setattr(cache_module, "cached", lambda **k: built.append(k))
    monkeypatch.setattr(cache_module, "build", lambda **k: built.append(k))
    guest = GuestDomain(plan, state, "qemu:///system")
    with pytest.raises(PlanError) as err:
        guest.boot(host_side=lambda: built.append("host side"))
    text = str(err.value)
    assert text.startswith("builds.b.forwarder:") and "libxml2.so.2" in text and "\n" not in text
    assert built == [] and state.find("domain") == [] and not plan.dirs.run.exists()


def test_boot_asks_the_cache_for_the_build_forwarders_image(tmp_path, monkeypatch):
    monkeypatch.setattr(domain_module, "appliance_forwarder", lambda plan: "/opt/b/dpdk-testpmd")
    asked = []

    class Stop(Exception):
        pass

    def cached(**kw):
        asked.append(("cached", kw))
        return None

    def build(**kw):
        asked.append(("build", kw))
        raise Stop

    monkeypatch.setattr(cache_module, "cached", cached)
    monkeypatch.setattr(cache_module, "build", build)
    plan = derive(load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=CPUS).profile)
    guest = GuestDomain(plan, LabState(plan.name, tmp_path / "state.json"), "qemu:///system")
    with pytest.raises(Stop):
        guest.boot()
    assert asked == [("cached", {"forwarder": "/opt/b/dpdk-testpmd"}), ("build", {"forwarder": "/opt/b/dpdk-testpmd"})]


def test_the_staged_forwarder_replaces_debians_and_is_checked(tmp_path):
    binary = tmp_path / "fwd"
    binary.write_bytes(b"patched testpmd")
    sha = hashlib.sha256(b"patched testpmd").hexdigest()
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/dpdk-testpmd").write_bytes(b"debian's")
    image_module._place_forwarder(_inputs(forwarder_sha256=sha, forwarder_path=str(binary)), root, None)
    assert (root / "usr/bin/dpdk-testpmd").read_bytes() == b"patched testpmd"
    binary.write_bytes(b"changed since the key was made")
    from labctl.errors import ApplianceError

    with pytest.raises(ApplianceError, match="changed"):
        image_module._place_forwarder(_inputs(forwarder_sha256=sha, forwarder_path=str(binary)), root, None)
