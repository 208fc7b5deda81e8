"""Real guests on the real libvirtd + QEMU (TCG here), booted from the workload appliance.

The guest's own report (ethtool inside the guest) is what is asserted: vhost-user gets 4 queues
and 1024/1024 rings, tap gets rx 1024 but tx 256 (QEMU's cap), and the pins are applied.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labctl.lab.libvirt import hypervisor
from labctl.lab.libvirt.lifecycle import down, up
from labctl.profile.load import load_profile
from labctl.lab.ledger import load_state
from tests.conftest import DOMAINS, ROOT
from tests.integration.conftest import labctl_processes

URI = "qemu:///system"
CPUS = frozenset({0, 1})

pytestmark = pytest.mark.skipif(not Path("/run/libvirt/libvirt-sock").exists(), reason="libvirtd is not running")


def test_vhostuser_guest_reports_4_queues_and_1024_rings(clean_lab):
    loaded = load_profile(DOMAINS / "l2fwd-vhostuser.yaml", cpus=CPUS)
    try:
        result = up(loaded, URI)
        assert result.domain_type in ("qemu", "kvm")
        if result.domain_type == "qemu":
            assert any("TCG" in w for w in result.warnings)
        assert len(result.nics) == 2
        for nic in result.nics:
            assert nic["negotiated"] is not None, nic
            assert (nic["negotiated"]["queues"], nic["negotiated"]["rx_ring"], nic["negotiated"]["tx_ring"]) == (4, 1024, 1024)
            assert nic["differences"] == []
        applied = result.pins["applied"]
        assert applied["threads"]["vcpus"] == {0: "1", 1: "1", 2: "1", 3: "1"}
        assert applied["threads"]["emulator"] == "0" and applied["libvirt"]["emulator"] == "0"
        assert applied["vswitch"] == {"vswitch.rte-worker-1": "0"}
        assert result.pins["mismatches"] == []
        socks = sorted((Path(os.environ["LABCTL_RUN_DIR"]) / "l2fwd-vhostuser").glob("*.sock"))
        assert len(socks) == 2 and all(oct(s.stat().st_mode & 0o777) == "0o660" for s in socks)
    finally:
        down("l2fwd-vhostuser", URI)
    assert hypervisor.lookup(URI, "labctl-l2fwd-vhostuser") is None
    assert down("l2fwd-vhostuser", URI) == []


def test_tap_guest_gets_tx_256_with_reason(clean_lab, write_profile):
    path = write_profile("""
name: it-tap
backend: libvirt
guest:
  vcpus: 2
  memory_mib: 512
  nics:
    - {backend: tap, queues: 4, rx_queue_size: 1024, tx_queue_size: 256}
  pinning: {vcpus: {0: "0", 1: "1"}, emulator: "0"}
""")
    loaded = load_profile(path, cpus=CPUS)
    try:
        result = up(loaded, URI)
        [nic] = result.nics
        got = nic["negotiated"]
        assert (got["rx_ring"], got["tx_ring"]) == (1024, 256)
        # 4 queues on 2 vCPUs: the guest kernel enables 2 of the 4 the device offers, and says why
        assert got["queues"] == 2 and got["max_queues"] == 4
        assert any("min(queues, vcpus)" in reason for reason in nic["differences"])
        assert result.pins["applied"]["threads"]["vcpus"] == {0: "0", 1: "1"}
    finally:
        down("it-tap", URI)


def test_cli_up_json_and_status(clean_lab, write_profile):
    path = write_profile("""
name: it-net
backend: libvirt
guest:
  vcpus: 1
  memory_mib: 512
  nics: [{backend: network, rx_queue_size: 512}]
""")
    env = {**os.environ}
    proc = subprocess.run([sys.executable, "-m", "labctl.cli", "up", str(path), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    try:
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        nic = data["nics"][0]
        assert nic["requested"]["rx_ring"] == 512 and nic["negotiated"]["rx_ring"] == 512
        status = subprocess.run([sys.executable, "-m", "labctl.cli", "status", "--json"], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=60)
        lab = json.loads(status.stdout)["labs"][0]
        assert lab["name"] == "it-net" and lab["pins"]["requested"]["vcpus"] == {}
    finally:
        subprocess.run([sys.executable, "-m", "labctl.cli", "down", str(path)], cwd=ROOT, env=env, timeout=120)


def test_kill_9_during_up_then_down_cleans(clean_lab):
    env = {**os.environ}
    proc = subprocess.Popen([sys.executable, "-m", "labctl.cli", "up", str(DOMAINS / "l2fwd-vhostuser.yaml")],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and hypervisor.lookup(URI, "labctl-l2fwd-vhostuser") is None:
        time.sleep(0.2)
    assert hypervisor.lookup(URI, "labctl-l2fwd-vhostuser") is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert load_state("l2fwd-vhostuser").find("domain")
    assert len(labctl_processes()) == 1  # the vswitch outlives labctl by design
    removed = down("l2fwd-vhostuser")
    assert "domain labctl-l2fwd-vhostuser" in removed
    assert hypervisor.lookup(URI, "labctl-l2fwd-vhostuser") is None
    assert labctl_processes() == []


def test_workload_mode_forwards_in_the_guest(clean_lab, write_profile):
    """The appliance binds both vhost-user NICs to uio_pci_generic and forwards the vswitch's traffic."""
    path = write_profile("""
name: it-wl
backend: libvirt
guest:
  vcpus: 2
  memory_mib: 1024
  nics:
    - {backend: vhostuser, rx_queue_size: 1024, tx_queue_size: 1024}
    - {backend: vhostuser, rx_queue_size: 1024, tx_queue_size: 1024}
  pinning: {vcpus: {0: "1", 1: "1"}, emulator: "0", vhost: "0"}
workload: {mode: io, duration_s: 5}
""")
    try:
        result = up(load_profile(path, cpus=CPUS), URI, mode="workload")
        assert result.workload is not None and result.workload["final"] is True
        ports = result.workload["ports"]
        assert len(ports) == 2 and all(p["rx_packets"] > 0 and p["tx_packets"] > 0 for p in ports)
    finally:
        down("it-wl", URI)
