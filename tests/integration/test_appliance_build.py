"""A forwarder build inside a libvirt guest's appliance, and forwarder builds in the embedded vm2vm lab.

The libvirt guest (vhost-user NICs, as domains/guest-vhostuser.yaml) runs build ``same``: a byte-identical copy
of Debian's dpdk-testpmd in a root-owned 0755 directory. The appliance is rebuilt carrying it (a cache entry
of its own, keyed by its sha256 too), the trial forwards, and the record names the build's binary. What is
asserted is function, never a rate's size.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import yaml

from labctl.lab.libvirt.appliance import cache as ap
from tests.conftest import DOMAINS
from tests.integration.conftest import LIBVIRT_URI, needs_dpdk, needs_libvirtd
from tests.factories import build_binary

TESTPMD = "/usr/bin/dpdk-testpmd"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _same_build(folder: Path) -> Path:
    return build_binary(folder, copy_of=TESTPMD)


def _entries_with(cache_dir: Path, sha: str) -> list[Path]:
    found = []
    for meta in cache_dir.glob("*/appliance.json"):
        if json.loads(meta.read_text()).get("forwarder_sha256") == sha:
            found.append(meta.parent)
    return found


@needs_dpdk
@needs_libvirtd
def test_a_forwarder_build_runs_in_the_libvirt_guests_appliance(clean_lab, no_leftovers, tmp_path, cli):
    same = _same_build(Path(os.environ["LABCTL_RUN_DIR"]).parent / "builds" / "same")
    cache_dir = ap.default_cache_dir()
    stock = ap.cached()
    data = yaml.safe_load((DOMAINS / "guest-vhostuser.yaml").read_text())
    data.update(name="it-abuild", uri=LIBVIRT_URI, builds={"same": {"forwarder": str(same)}}, build="same")
    data["workload"].update(duration_s=2, warmup_s=1)
    data.pop("sweep", None)
    profile = tmp_path / "abuild.yaml"
    profile.write_text(yaml.safe_dump(data))
    ours: list[Path] = []
    try:
        code, out, err = cli("run", str(profile), "--json")
        ours = _entries_with(cache_dir, _sha256(same))
        assert code == 0, err
        record = json.loads(out)
        assert record["status"] == "ok", record.get("error")
        assert record["metrics"]["mpps"] > 0
        forwarder = record["env"]["binaries"]["forwarder"]
        assert forwarder["path"] == str(same) and forwarder["sha256"] == _sha256(same)
        assert forwarder["build"] == "same" and forwarder["version"].startswith("DPDK 22.11")
        # an image of its own, keyed by the binary's sha256 too; the stock entry untouched
        assert len(ours) == 1
        meta = json.loads((ours[0] / "appliance.json").read_text())
        assert meta["forwarder_path"] == str(same)
        if stock is not None:
            assert ours[0] != stock.path and stock.path.is_dir()
            assert ap.cached() == stock
        assert ap.cached(forwarder=str(same)).path == ours[0]
    finally:
        for entry in ours:  # the cache keeps KEEP_ENTRIES newest; this test's entry goes now
            shutil.rmtree(entry, ignore_errors=True)


@needs_dpdk
@needs_libvirtd
def test_an_appliance_forwarder_build_missing_a_library_is_one_line_and_exit_2(clean_lab, no_leftovers, tmp_path,
                                                                                cli):
    # links libxml2, which the appliance does not carry
    binary = build_binary(Path(os.environ["LABCTL_RUN_DIR"]).parent / "builds" / "xml", copy_of="/usr/bin/xmllint")
    data = yaml.safe_load((DOMAINS / "guest-vhostuser.yaml").read_text())
    data.update(name="it-abad", uri=LIBVIRT_URI, builds={"bad": {"forwarder": str(binary)}}, build="bad")
    data.pop("sweep", None)
    profile = tmp_path / "abad.yaml"
    profile.write_text(yaml.safe_dump(data))
    code, out, err = cli("run", str(profile))
    assert code == 2, (out, err)
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and "builds.bad.forwarder" in lines[0] and "libxml2.so.2" in lines[0], lines
    assert _entries_with(ap.default_cache_dir(), _sha256(binary)) == []


@needs_dpdk
def test_vm2vm_embedded_runs_a_forwarder_build_in_both_guests(no_leftovers, tmp_path, cli):
    """Build ``marked``: a wrapper that notes its command line, then execs Debian's testpmd; guests A and B
    both run it, the host-side vswitch stays the host's testpmd, and the record names the build's binary."""
    folder = tmp_path / "builds" / "marked"
    folder.mkdir(parents=True)
    os.chmod(folder, 0o755)
    marks = tmp_path / "marks.txt"
    wrapper = folder / "dpdk-testpmd"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >>{marks}\nexec {TESTPMD} "$@"\n')
    os.chmod(wrapper, 0o755)
    data = yaml.safe_load((DOMAINS / "vm2vm.yaml").read_text())
    data.update(name="it-v2vbuild", builds={"marked": {"forwarder": str(wrapper)}}, build="marked")
    data["workload"].update(duration_s=2, warmup_s=0.5)
    data.pop("sweep", None)
    profile = tmp_path / "v2v.yaml"
    profile.write_text(yaml.safe_dump(data))
    code, out, err = cli("run", str(profile), "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["status"] == "ok", record.get("error")
    assert record["metrics"]["mpps"] > 0
    forwarder = record["env"]["binaries"]["forwarder"]
    assert forwarder == {"path": str(wrapper), "sha256": _sha256(wrapper), "version": forwarder["version"],
                         "build": "marked"}
    assert forwarder["version"].startswith("DPDK 22.11")
    assert record["env"]["binaries"]["vswitch"]["path"] == os.path.realpath(TESTPMD)
    prefixes = {arg for line in marks.read_text().splitlines() for arg in line.split()
                if arg.startswith("labctl-") or "-guest" in arg}
    assert any(p.endswith("-guest") for p in prefixes) and any(p.endswith("-guestb") for p in prefixes), prefixes
    assert not any(p.endswith("-vs") for p in prefixes), prefixes


@needs_dpdk
@needs_libvirtd
def test_libvirt_vm2vm_runs_a_build_in_both_appliances_and_the_vswitch(clean_lab, no_leftovers, tmp_path, cli):
    """Build ``same`` gives the forwarder both guests' appliances carry and the host-side testpmd vswitch."""
    same = _same_build(Path(os.environ["LABCTL_RUN_DIR"]).parent / "builds" / "same")
    data = yaml.safe_load((DOMAINS / "guest-vm2vm.yaml").read_text())
    data.update(name="it-gv2vbuild", uri=LIBVIRT_URI, build="same",
                builds={"same": {"forwarder": str(same), "vswitch": str(same)}})
    data["workload"].update(duration_s=2, warmup_s=1)
    data.pop("sweep", None)
    profile = tmp_path / "gv2v.yaml"
    profile.write_text(yaml.safe_dump(data))
    ours: list[Path] = []
    try:
        code, out, err = cli("run", str(profile), "--json")
        ours = _entries_with(ap.default_cache_dir(), _sha256(same))
        assert code == 0, err
        record = json.loads(out)
        assert record["status"] == "ok", record.get("error")
        assert record["metrics"]["mpps"] > 0
        binaries = record["env"]["binaries"]
        for role in ("forwarder", "vswitch"):
            assert binaries[role]["path"] == str(same) and binaries[role]["sha256"] == _sha256(same)
            assert binaries[role]["build"] == "same"
        assert len(ours) == 1  # guests A and B boot the one image
    finally:
        for entry in ours:
            shutil.rmtree(entry, ignore_errors=True)
