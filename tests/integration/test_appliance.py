"""The workload appliance: build (cached), boot it under QEMU (TCG) in verify and workload mode.

The first build on a machine downloads the kernel package through apt (about 70 MB); later runs use
the cache (``$LABCTL_CACHE_DIR``, else ``$XDG_CACHE_HOME/labctl/appliance`` or
``~/.cache/labctl/appliance``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labctl import platform
from labctl.errors import ApplianceError
from labctl.dpdk import testpmd  # the module: a name starting "Test" imported here would be collected as a test class
from labctl.lab.libvirt.appliance import cache as ap
from labctl.lab.libvirt.appliance.console import kernel_cmdline, parse_console
from labctl.lab.libvirt.appliance.image import KERNEL_NAME, init_sh_text
from labctl.lab.libvirt.appliance.pvh import has_pvh_entry
from labctl.lab.libvirt.appliance.key import BUILDER_VERSION, KeyInputs, compute_key

pytestmark = pytest.mark.integration

QEMU = shutil.which("qemu-system-x86_64")
BOOT_TIMEOUT = 120  # seconds, verify mode
WORKLOAD_TIMEOUT = 300  # seconds, workload mode (testpmd under TCG)

needs_qemu = pytest.mark.skipif(QEMU is None, reason="qemu-system-x86_64 is not installed")


# --- fixtures ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def appliance() -> ap.Appliance:
    messages: list[str] = []
    t0 = time.monotonic()
    app = ap.build(progress=messages.append)
    elapsed = time.monotonic() - t0
    print(f"\nappliance {app.key[:12]} ({'built' if app.built else 'cached'} in {elapsed:.1f} s): "
          f"kernel {app.kernel_version}, initramfs {app.initrd_bytes / 1e6:.1f} MB")
    return app


def _qemu_base(app: ap.Appliance, cmdline: str, memory_mb: int = 512) -> list[str]:
    assert QEMU is not None
    return [QEMU, "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", str(memory_mb),
            "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
            "-kernel", str(app.kernel), "-initrd", str(app.initrd), "-append", cmdline]


def _boot(args: list[str], timeout: float) -> tuple[str, float]:
    """Run QEMU to its exit (the guest powers off); kill it on timeout. Returns (console, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        text = out.decode(errors="replace")
        pytest.fail(f"QEMU did not power off within {timeout} s; console tail:\n{text[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"QEMU exited {proc.returncode}:\n{text[-3000:]}"
    return text, time.monotonic() - t0


@pytest.fixture
def mq_tap():
    """A multiqueue tap device, removed afterwards."""
    if os.geteuid() != 0 or not Path("/dev/net/tun").exists():
        pytest.skip("a tap device needs root and /dev/net/tun")
    name = f"lctap{os.getpid() % 100000}"
    subprocess.run(["ip", "tuntap", "add", "dev", name, "mode", "tap", "multi_queue"], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "link", "del", name], check=False, capture_output=True)


# --- cache key ---------------------------------------------------------------------------------------------


def _inputs(**changes) -> KeyInputs:
    base = KeyInputs(
        kernel_package="linux-image-6.1.0-99-amd64",
        kernel_deb_version="6.1.999-1",
        kernel_deb_sha256="0" * 64,
        packages={"busybox-static": "1:1.35.0-4", "ethtool": "1:6.1-1", "dpdk-dev": "22.11.11"},
        init_sh_sha256=hashlib.sha256(b"#!/bin/sh\n").hexdigest(),
    )
    return dataclasses.replace(base, **changes)


def test_key_is_a_function_of_the_inputs():
    assert compute_key(_inputs()) == compute_key(_inputs())
    # the order in which package versions were collected does not matter
    shuffled = dict(reversed(list(_inputs().packages.items())))
    assert compute_key(_inputs(packages=shuffled)) == compute_key(_inputs())
    # where apt fetches the .deb from is not an input, its hash is
    assert compute_key(_inputs(kernel_deb_filename="pool/x.deb")) == compute_key(_inputs())
    different = [
        _inputs(init_sh_sha256=hashlib.sha256(b"#!/bin/sh\necho changed\n").hexdigest()),
        _inputs(kernel_deb_sha256="1" * 64),
        _inputs(packages={**_inputs().packages, "dpdk-dev": "22.11.12"}),
        _inputs(builder_version=BUILDER_VERSION + ".test"),
        _inputs(plugins=platform.GUEST_DPDK_PLUGINS + ("librte_net_null",)),
    ]
    keys = {compute_key(i) for i in different} | {compute_key(_inputs())}
    assert len(keys) == len(different) + 1


def test_key_changes_when_init_sh_changes(appliance):
    current = ap.gather_inputs(update_apt=False)
    assert compute_key(current) == appliance.key  # what the build used
    assert current.init_sh_sha256 == hashlib.sha256(init_sh_text()).hexdigest()
    edited = dataclasses.replace(
        current, init_sh_sha256=hashlib.sha256(init_sh_text() + b"\n# edited\n").hexdigest())
    assert compute_key(edited) != appliance.key


def test_second_build_is_a_cache_hit(appliance):
    again = ap.build()
    assert again.key == appliance.key
    assert again.built is False
    assert again.kernel == appliance.kernel and again.initrd == appliance.initrd
    assert ap.cached() == again
    # nothing half-written is left next to the entries
    leftovers = [p.name for p in appliance.path.parent.iterdir() if p.name.startswith(".build-")]
    assert leftovers == []


def test_appliance_files(appliance):
    assert appliance.kernel.stat().st_size > 1_000_000
    assert appliance.size_bytes == appliance.kernel.stat().st_size + appliance.initrd.stat().st_size
    # Debian's amd64 kernel has a PVH entry: the entry holds it as the ELF QEMU enters directly
    assert appliance.kernel.name == "vmlinux" and has_pvh_entry(appliance.kernel.read_bytes())
    assert appliance.initrd.read_bytes()[:6] == b"070701"  # a plain newc cpio archive, nothing to unpack
    listing = subprocess.run(["cpio", "-t", "--quiet", "-F", str(appliance.initrd)],
                             capture_output=True, text=True, check=True).stdout.split()
    for path in ("init", "usr/bin/busybox", "usr/sbin/ethtool", "usr/bin/dpdk-testpmd",
                 "etc/labctl/modules.net", "etc/labctl/modules.uio",
                 "usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_virtio.so.23.0",
                 "usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_mempool_ring.so.23.0",
                 "usr/libexec/coreutils/libstdbuf.so"):
        assert path in listing, path
    modules = [p for p in listing if p.startswith("usr/lib/modules/")]
    assert any(p.endswith("/virtio_net.ko") for p in modules)
    assert any(p.endswith("/uio_pci_generic.ko") for p in modules)
    assert not any(p.endswith((".ko.xz", ".ko.zst", ".ko.gz")) for p in modules)


def test_kernel_cmdline():
    line = kernel_cmdline("workload", fwd="mac", burst=64, tx_first=True, rxq=None)
    assert line == "console=ttyS0 labctl.mode=workload labctl.fwd=mac labctl.burst=64 labctl.tx_first=1"
    with pytest.raises(ValueError):
        kernel_cmdline("workload", fwd="io mac")
    with pytest.raises(ValueError):
        kernel_cmdline("reboot")


# --- booting ---------------------------------------------------------------------------------------------


@needs_qemu
def test_verify_mode_reports_each_nic(appliance, mq_tap, tmp_path):
    channel = tmp_path / "channel.out"
    args = _qemu_base(appliance, appliance.cmdline("verify", channel="org.labctl.0"))
    args += [
        "-netdev", f"tap,id=n0,ifname={mq_tap},script=no,downscript=no,queues=2,vhost=off",
        "-device", ("virtio-net-pci,netdev=n0,mq=on,vectors=6,rx_queue_size=1024,"
                    "mac=52:54:00:00:10:01"),
        "-netdev", "user,id=n1",
        "-device", "virtio-net-pci,netdev=n1,rx_queue_size=512,mac=52:54:00:00:10:02",
        "-device", "virtio-serial-pci",
        "-chardev", f"file,id=ch0,path={channel}",
        "-device", "virtserialport,chardev=ch0,name=org.labctl.0",
    ]
    console, seconds = _boot(args, BOOT_TIMEOUT)
    print(f"\nverify boot to power-off under TCG: {seconds:.1f} s")
    report = parse_console(console)
    assert report.done, console[-3000:]
    assert report.errors == []
    assert report.boot and report.boot["kernel"] == appliance.kernel_version
    nics = {n["mac"]: n for n in report.nics}
    assert set(nics) == {"52:54:00:00:10:01", "52:54:00:00:10:02"}, report.nics
    tap, user = nics["52:54:00:00:10:01"], nics["52:54:00:00:10:02"]
    for nic in (tap, user):
        assert nic["driver"] == "virtio_net"
        assert nic["ifname"].startswith("eth")
        assert nic["tx_ring"] == 256 and nic["tx_ring_max"] == 256
    assert tap["combined"] == 2 and tap["max_combined"] == 2  # 2 queue pairs, 2 vCPUs
    assert tap["rx_ring"] == 1024 and tap["rx_ring_max"] == 1024
    assert user["combined"] == 1 and user["max_combined"] == 1
    assert user["rx_ring"] == 512 and user["rx_ring_max"] == 512
    # the same lines went to the virtio-serial channel
    via_channel = parse_console(channel.read_text())
    assert via_channel.done
    assert sorted(n["mac"] for n in via_channel.nics) == sorted(nics)


@needs_qemu
def test_workload_mode_runs_testpmd(appliance):
    # two NICs on one QEMU hub: what one port sends the other receives, so tx_first loops traffic
    forwarder = testpmd.TestpmdOptions(forward_mode="io", nb_cores=1, burst=32, rxd=512, txd=512, total_mbufs=16384)
    cmdline = appliance.cmdline("workload", testpmd=",".join(forwarder.argv()), duration=12, period=4, tx_first=1)
    args = _qemu_base(appliance, cmdline, memory_mb=1024) + [
        "-netdev", "hubport,id=h0,hubid=0", "-device", "virtio-net-pci,netdev=h0",
        "-netdev", "hubport,id=h1,hubid=0", "-device", "virtio-net-pci,netdev=h1",
    ]
    console, seconds = _boot(args, WORKLOAD_TIMEOUT)
    print(f"\nworkload boot to power-off under TCG: {seconds:.1f} s")
    report = parse_console(console)
    assert report.done, console[-4000:]
    assert report.errors == [], report.errors
    assert {"testpmd": "ready"} in report.info, console[-4000:]
    assert len(report.nics) == 2
    periodic = [s for s in report.stats if not s["final"]]
    assert periodic, console[-4000:]
    final = report.final_stats
    assert final is not None
    assert [p["port"] for p in final["ports"]] == [0, 1]
    for key in ("rx_packets", "tx_packets", "tx_dropped", "rx_dropped"):
        assert key in final and all(key in p for p in final["ports"])
    # functional, not a throughput: the looped burst was forwarded at all
    assert final["rx_packets"] > 0 and final["tx_packets"] > 0
    assert final["rx_packets"] >= periodic[-1]["rx_packets"]


def test_failed_build_leaves_no_entry(tmp_path, monkeypatch):
    """A build that dies half-way leaves neither an entry nor its temporary directory."""
    monkeypatch.setattr(ap, "_fetch_kernel_deb", lambda *a, **k: tmp_path / "none.deb")

    def half_then_fail(inputs, key, deb, work, entry, progress):
        (entry / KERNEL_NAME).write_bytes(b"half a kernel")
        raise ApplianceError("cpio failed: simulated")

    monkeypatch.setattr(ap, "_stage", half_then_fail)
    with pytest.raises(ApplianceError, match="simulated"):
        ap.build(cache_dir=tmp_path, force=True)
    # only the lock and apt's memo remain: no entry, no .build-* directory
    assert sorted(p.name for p in tmp_path.iterdir()) == [".apt-resolution.json", ".lock"]
    assert ap.cached(tmp_path) is None
