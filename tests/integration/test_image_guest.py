"""The user's own guest (issue 29), under TCG on this host: a disk image booted through labctl's overlay,
reached through the QEMU guest agent, forwarding with its own testpmd or a command template.

One image build for the module (``build_guest_image``: cached under /var/cache/labctl, rebuilt only when its
inputs change). Asserted: function, never a rate's size: trials ok, rates above zero, the rings the guest's
driver negotiated (read in the guest before binding), the image's sha256 unchanged, the record's image
fields, and nothing left (no domain, overlay, socket, process, hugepages). A non-bootable image fails
within its agent bound with the one-line message, and leaves nothing either.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labctl import api
from labctl.digest import sha256_file as sha256_of
from labctl.lab.libvirt.agent import CHANNEL
from labctl.lab.libvirt.guestimage import build_guest_image  # a broken import fails the module, never skips it
from labctl.results.store import Store
from tests.conftest import ROOT
from tests.integration.conftest import needs_dpdk, needs_libvirtd

pytestmark = [needs_dpdk, needs_libvirtd]


@pytest.fixture(scope="module")
def guest_image():
    info = build_guest_image()
    return info, sha256_of(str(info.path))


def image_profile(write_profile, name: str, image, forwarder: str, extra: str = "", boot: str = "",
                  sweep: str = "  {}", agent_timeout_s: int = 240) -> Path:
    return write_profile(f"""name: {name}
backend: libvirt
uri: qemu:///system
guest:
  image: {image}
{boot}  agent_timeout_s: {agent_timeout_s}
  vcpus: 2
  memory_mib: 1536
  nics:
    - {{backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}}
    - {{backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}}
  pinning: {{vhost: "0"}}
workload:
  forwarder: {forwarder}
{extra}  rxd: 256
  txd: 256
  duration_s: 2
  warmup_s: 1
sweep:
{sweep}
""", f"{name}.yaml")


def direct_boot(info) -> str:
    if not getattr(info, "kernel", None):
        return ""
    cmdline = getattr(info, "cmdline", "") or "root=/dev/vda rw console=ttyS0"
    initrd = f"\n    initrd: {info.initrd}" if getattr(info, "initrd", None) else ""
    return f"  boot:\n    kernel: {info.kernel}{initrd}\n    cmdline: \"{cmdline}\"\n"


def owner_of(path) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, st.st_mode


def image_identity(path) -> str:
    """The identity a record must carry, computed here: the file's size and the sha256 of its first MiB."""
    real = Path(path).resolve()
    with open(real, "rb") as image:
        first_mib = image.read(1 << 20)
    return f"{real.stat().st_size}:{hashlib.sha256(first_mib).hexdigest()}"


def bzimage_release(kernel) -> str:
    """The release a Linux bzImage was built as, from its own header (the x86 boot protocol's
    ``kernel_version`` field at 0x20E: the offset, less 0x200, of "RELEASE (builder) #1 SMP ...")."""
    with open(kernel, "rb") as image:
        head = image.read(64 * 1024)
    assert head[0x202:0x206] == b"HdrS", f"{kernel}: not a bzImage"
    start = int.from_bytes(head[0x20E:0x210], "little") + 0x200
    return head[start:head.index(b"\0", start)].decode().split()[0]


def check_image_record(record, info) -> None:
    assert record.status == "ok", record.error
    assert record.metrics.mpps > 0 and record.env.accel in ("kvm", "tcg")
    assert record.env.image["path"] == str(Path(info.path).resolve()) and record.env.image["format"] == "qcow2"
    assert record.env.image["identity"] == image_identity(info.path)
    # uname -r read in the booted guest, against the release of the kernel it booted (read from the
    # image's vmlinuz itself) and the one its build recorded
    assert record.env.image["guest_kernel"] == bzimage_release(info.kernel) == info.kernel_release
    assert record.details["guest_counters"] == "host-side"
    if record.env.accel == "tcg":
        assert any("TCG" in w for w in record.warnings)


def test_run_with_a_command_template(clean_lab, no_leftovers, write_profile, guest_image):
    """`labctl run` of the user's forwarder as a template (here the image's own testpmd, written by hand)."""
    info, sha = guest_image
    template = ("dpdk-testpmd -l {cores} -n 1 --in-memory --iova-mode=pa --file-prefix it-cmd -a {pci0} -a {pci1} "
                "-- --forward-mode=io --nb-cores=1 --rxd={rxd} --txd={txd} --burst={burst} --rxq={queues} "
                "--txq={queues} --stats-period 2 --no-lsc-interrupt")
    path = image_profile(write_profile, "it-imgcmd", info.path, "command", extra=f"  command: '{template}'\n",
                         boot=direct_boot(info))
    record = api.run(api.load(path))
    check_image_record(record, info)
    argv = record.details["forwarder"]["argv"]
    assert argv[:3] == ["dpdk-testpmd", "-l", "0-1"] and "--rxd=256" in argv and "-a" in argv
    assert sha256_of(str(info.path)) == sha  # the user's image was never written


def test_ring_and_queue_sweep_with_the_images_testpmd(clean_lab, no_leftovers, write_profile, tmp_path, guest_image):
    """guest.nics.*.rx_queue_size 256/512 by queues 1/2 with the image's dpdk-testpmd (2 vCPUs): one boot, every
    later configuration reached by swapping the running guest's NICs (issue 40); the host side restarts with each
    queue count; the rings the guest's driver negotiated (ethtool -g in the guest, before binding) and the queue
    pairs it enabled (ethtool -l through the agent) are the ones asked for."""
    from itertools import product

    info, sha = guest_image
    path = image_profile(write_profile, "it-img", info.path, "testpmd", boot=direct_boot(info),
                         sweep="  guest.nics.*.rx_queue_size: [256, 512]\n  guest.nics.*.queues: [1, 2]")
    db = tmp_path / "img.db"
    owner = owner_of(info.path)
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (4, 0)
    with Store(db) as store:
        records = store.trials(result.run_id)
        run_info = store.run(result.run_id)["info"]
    asked = [(r.config["guest.nics.0.rx_queue_size"], r.config["guest.nics.0.queues"]) for r in records]
    assert sorted(asked) == sorted(product([256, 512], [1, 2]))
    assert [r.details["reached"]["how"] for r in records] == ["boot", "hotplug", "hotplug", "hotplug"]
    assert (run_info["boots"], run_info["swaps"]) == (1, 3)
    for record, (rx, queues) in zip(records, asked):
        check_image_record(record, info)
        assert record.details["forwarder"]["argv"][0] == "dpdk-testpmd"
        assert f"--rxq={queues}" in record.details["forwarder"]["argv"]
        assert {nic["negotiated"]["rx_ring"] for nic in record.details["nics"]} == {rx}
        assert {nic["negotiated"]["queues"] for nic in record.details["nics"]} == {queues}
        assert {nic["negotiated"]["max_queues"] for nic in record.details["nics"]} == {queues}
        assert record.details["guest_counters"] == "host-side"
    assert sha256_of(str(info.path)) == sha
    assert owner_of(info.path) == owner  # never relabelled: libvirt chowns a backing file it finds itself


def test_up_then_apply_live_swaps_the_running_guests_nics(clean_lab, no_leftovers, write_profile, tmp_path, guest_image,
                                                         monkeypatch):
    """Issue 40's face: ``labctl up`` of the user's image guest, then ``labctl apply labctl-NAME --set
    'guest.nics.*.rx_queue_size=1024' --live``: both NICs swapped on the running domain (the same domain ID,
    so no restart), ``--verify`` reads 1024 negotiated through the agent, and ``labctl down`` removes the
    domain with the XML ``apply`` kept of it. The commands a person types, each its own labctl."""
    import libvirt

    originals = tmp_path / "state" / "domain-originals"
    monkeypatch.setenv("LABCTL_STATE_DIR", str(tmp_path / "state"))
    info, sha = guest_image
    path = image_profile(write_profile, "it-imglive", info.path, "testpmd", boot=direct_boot(info))

    def labctl(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "labctl.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                              timeout=420)

    domain = "labctl-it-imglive"
    try:
        up = labctl("up", str(path))
        assert up.returncode == 0, up.stderr[-2000:]
        assert up.stdout.count("rx 256->256") == 2, up.stdout
        conn = libvirt.open("qemu:///system")
        try:
            booted = conn.lookupByName(domain).ID()
            applied = labctl("apply", domain, "--set", "guest.nics.*.rx_queue_size=1024", "--live")
            assert applied.returncode == 0, applied.stderr[-2000:]
            assert applied.stdout.count("swapped live (unplugged, plugged again with rx_queue_size 1024") == 2, applied.stdout
            assert conn.lookupByName(domain).ID() == booted  # the same running domain: swapped, not restarted
        finally:
            conn.close()
        verified = labctl("apply", domain, "--verify")
        assert verified.returncode == 0, verified.stderr[-2000:]
        assert verified.stdout.count("rx 1024->1024") == 2, verified.stdout
        assert len(list(originals.glob("*.json"))) == 1  # what --undo would restore, while the domain exists
    finally:
        down = labctl("down", "it-imglive")
    assert down.returncode == 0, down.stderr[-2000:]
    assert list(originals.glob("*.json")) == []  # removed with the domain it belonged to
    assert sha256_of(str(info.path)) == sha


def test_non_bootable_image_fails_within_the_bound(clean_lab, no_leftovers, write_profile, tmp_path):
    empty = Path("/run/labctl-test") / tmp_path.name / "empty.qcow2"
    empty.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(empty), "64M"], check=True)
    path = image_profile(write_profile, "it-imgnone", empty, "testpmd", agent_timeout_s=12)
    record = api.run(api.load(path))
    assert record.status == "failed"
    assert CHANNEL in record.error and "qemu-guest-agent" in record.error and "\n" not in record.error
    # the profile's bound fired (not some other failure, nor a longer default wait)
    assert f"the guest agent on channel {CHANNEL} did not answer within 12 s" in record.error
    from labctl.lab.ledger import load_state

    assert load_state("it-imgnone").resources == []
    assert not list((Path("/run/labctl-test") / tmp_path.name).rglob("overlay.qcow2"))
