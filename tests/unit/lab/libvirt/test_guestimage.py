"""The guest image builder (labctl image guest): the cache key, the disk layout, the cache's publish and
clean-up, the --out refusals, and the root tree's customization. The real build (mmdebstrap, loop devices)
is tests/integration/test_guest_image.py's."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from labctl.errors import GuestImageError, UserError
from labctl.digest import sha256_file
from labctl.lab.libvirt.guestimage import builder, cache, disk, inputs, layout, rootfs, tools


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "images"
    monkeypatch.setenv(cache.CACHE_ENV, str(path))
    return path


# --- the key -------------------------------------------------------------------------------------------

def test_same_inputs_same_key():
    assert inputs.compute_key(inputs.gather_inputs()) == inputs.compute_key(inputs.gather_inputs())
    a = inputs.GuestInputs(files={"x": "1"}, builder={"b.py": "2"})
    assert inputs.compute_key(a) == inputs.compute_key(replace(a, packages=tuple(reversed(a.packages))))


@pytest.mark.parametrize("change", [
    {"packages": inputs.PACKAGES + ("vim",)},
    {"suite": "trixie"},
    {"mirror": "http://mirror.example/debian"},
    {"masked_units": inputs.MASKED_UNITS[1:]},
    {"disk_bytes": 4 << 30},
    {"files": {"rootfs/etc/hostname": "other"}},
    {"builder": {"builder.py": "other"}},
    {"builder_version": "2"},
])
def test_an_input_change_changes_the_key(change):
    base = inputs.GuestInputs(files={"rootfs/etc/hostname": "h"}, builder={"builder.py": "s"})
    assert inputs.compute_key(base) != inputs.compute_key(replace(base, **change))


def test_the_key_follows_the_shipped_files_the_source_and_the_mirror(tmp_path, monkeypatch):
    files = tmp_path / "files"
    (files / "rootfs/etc").mkdir(parents=True)
    (files / "rootfs/etc/hostname").write_text("a\n")
    monkeypatch.setattr(inputs, "FILES_DIR", files)
    first = inputs.compute_key(inputs.gather_inputs())
    (files / "rootfs/etc/hostname").write_text("b\n")
    second = inputs.compute_key(inputs.gather_inputs())
    monkeypatch.setenv(inputs.MIRROR_ENV, "http://mirror.example/debian")
    third = inputs.compute_key(inputs.gather_inputs())
    assert len({first, second, third}) == 3
    assert set(inputs.gather_inputs().builder) >= {"builder.py", "inputs.py", "disk.py"}


def test_the_image_holds_what_a_user_image_needs():
    for package in ("linux-image-amd64", "systemd-sysv", "qemu-guest-agent", "dpdk-dev", "ethtool", "kmod",
                    "iproute2", "pciutils", "initramfs-tools", "udev"):
        assert package in inputs.PACKAGES


# --- the layout ----------------------------------------------------------------------------------------

def test_partition_at_one_mib_filling_the_disk():
    assert layout.partition_offset() == 1 << 20
    assert layout.partition_bytes(2 << 30) == (2 << 30) - (1 << 20)
    with pytest.raises(ValueError):
        layout.partition_bytes(1 << 20)
    with pytest.raises(ValueError):
        layout.partition_bytes((2 << 30) + 1)
    script = layout.sfdisk_script()
    assert script.startswith("label: dos\n") and "start=2048" in script and "bootable" in script


def test_mkfs_turns_off_what_extlinux_cannot_read():
    args = layout.mkfs_args("/dev/loop7", "1234", "/tmp/root tree")
    assert args[0] == "mkfs.ext4" and args[-1] == "/dev/loop7"
    assert args[args.index("-O") + 1] == "^64bit,^metadata_csum_seed"
    assert args[args.index("-U") + 1] == "1234" and args[args.index("-d") + 1] == "/tmp/root tree"


def test_boot_loader_and_fstab_name_the_root_by_uuid():
    cmdline = layout.kernel_cmdline("abcd-ef")
    assert "root=UUID=abcd-ef" in cmdline and "console=ttyS0" in cmdline.split()[2]
    conf = layout.extlinux_conf("/boot/vmlinuz-6.1", "boot/initrd.img-6.1", cmdline)
    assert "  LINUX /boot/vmlinuz-6.1\n" in conf and "  INITRD /boot/initrd.img-6.1\n" in conf
    assert f"  APPEND {cmdline}\n" in conf and "TIMEOUT 0" in conf
    assert "UUID=abcd-ef / ext4" in layout.fstab_text("abcd-ef")


def test_the_root_uuid_follows_the_key():
    """A rebuild of the same inputs (the same key) names the same root, so a profile's boot.cmdline that
    copied the cache's still boots; other inputs, another UUID."""
    key = inputs.compute_key(inputs.gather_inputs())
    first, again, other = layout.root_uuid(key), layout.root_uuid(key), layout.root_uuid("0" * 64)
    assert first == again != other
    assert str(layout.uuidlib.UUID(first)) == first and layout.uuidlib.UUID(first).version == 5
    assert f"root=UUID={first} " in layout.kernel_cmdline(first)


def test_mbr_boot_code_goes_before_the_partition_table(tmp_path, monkeypatch):
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"\0" * 1024)
    table = b"T" * 66
    with open(raw, "r+b") as f:
        f.seek(446)
        f.write(table)
    mbr = tmp_path / "mbr.bin"
    mbr.write_bytes(b"M" * 440)
    monkeypatch.setattr(disk, "MBR_BIN_PATHS", (mbr,))
    monkeypatch.setattr(disk, "_attach", lambda raw, size: "/dev/loop99")
    calls = []
    monkeypatch.setattr(disk, "run", lambda args, **kw: calls.append(args))
    disk.fill(raw, 1 << 30, tmp_path / "tree", "u", ("/boot/k", "/boot/i", "c"), tmp_path / "mnt")
    data = raw.read_bytes()
    assert data[:440] == b"M" * 440 and data[446:512] == table
    assert [c[0] for c in calls] == ["mkfs.ext4", "mount", "extlinux", "umount", "losetup"]
    assert calls[-1] == ["losetup", "--detach", "/dev/loop99"]
    assert "APPEND c" in (tmp_path / "mnt/boot/extlinux/extlinux.conf").read_text()


def test_a_failed_mkfs_still_detaches_the_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(disk, "_attach", lambda raw, size: "/dev/loop99")
    calls = []

    def fake_run(args, **kw):
        calls.append(args)
        if args[0] == "mkfs.ext4":
            raise GuestImageError("mkfs failed")

    monkeypatch.setattr(disk, "run", fake_run)
    with pytest.raises(GuestImageError):
        disk.fill(tmp_path / "raw", 1 << 30, tmp_path, "u", ("k", "i", "c"), tmp_path / "mnt")
    assert calls[-1] == ["losetup", "--detach", "/dev/loop99"]


# --- the root tree -------------------------------------------------------------------------------------

def test_mmdebstrap_is_an_argv_with_the_packages_and_no_docs(tmp_path):
    args = rootfs.mmdebstrap_args(inputs.GuestInputs(), tmp_path / "root")
    assert args[0] == "mmdebstrap" and "--variant=minbase" in args
    assert f"--include={','.join(inputs.PACKAGES)}" in args
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in args
    assert args[-3:] == ["bookworm", str(tmp_path / "root"), inputs.DEFAULT_MIRROR]


def test_customize_masks_units_writes_fstab_and_ships_files(tmp_path):
    root = tmp_path / "root"
    (root / "boot").mkdir(parents=True)
    (root / "boot/initrd.img-6.1.0-9-amd64.dpkg-bak").write_text("x")
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/fstrim.timer").write_text("a real unit the mask replaces")
    rootfs.customize(inputs.GuestInputs(), root, "the-uuid")
    for unit in inputs.MASKED_UNITS:
        assert os.readlink(root / "etc/systemd/system" / unit) == "/dev/null"
    assert "UUID=the-uuid / ext4" in (root / "etc/fstab").read_text()
    assert (root / "etc/hostname").read_text().strip() == "labctl-guest"
    assert not list((root / "boot").glob("*.dpkg-bak"))


def test_boot_files_want_one_kernel_and_its_initrd(tmp_path):
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "vmlinuz-6.1.0-9-amd64").write_text("k")
    with pytest.raises(GuestImageError, match="initramfs"):
        rootfs.boot_files(tmp_path)
    (boot / "initrd.img-6.1.0-9-amd64").write_text("i")
    assert rootfs.boot_files(tmp_path)[0] == "6.1.0-9-amd64"
    (boot / "vmlinuz-6.1.0-10-amd64").write_text("k")
    with pytest.raises(GuestImageError, match="one kernel"):
        rootfs.boot_files(tmp_path)


def test_kernel_package_of_a_release():
    versions = {"linux-image-amd64": "6.1.1-1", "linux-image-6.1.0-9-amd64": "6.1.1-1", "dpdk": "22.11"}
    assert rootfs.kernel_package(versions, "6.1.0-9-amd64") == ("linux-image-6.1.0-9-amd64", "6.1.1-1")
    assert rootfs.kernel_package({"dpdk": "1"}, "6.1.0-9-amd64") == ("", "")


# --- the cache -----------------------------------------------------------------------------------------

def _fake_build(calls):
    def build_entry(inp, key, work, entry, progress=None):
        calls.append(work)
        (work / "scratch").write_text("scratch")
        for name in (builder.IMAGE_NAME, layout.KERNEL_NAME, layout.INITRD_NAME):
            (entry / name).write_bytes(name.encode())
        (entry / builder.CMDLINE_NAME).write_text("root=UUID=x console=ttyS0\n")
        return {"key": key, "format": "qcow2", "virtual_size": 2 << 30,
                "sha256": sha256_file(entry / builder.IMAGE_NAME), "kernel_release": "6.1.0-9-amd64",
                "kernel_package": "linux-image-6.1.0-9-amd64", "kernel_package_version": "6.1.1-1",
                "dpdk_version": "22.11.11-0+deb12u1", "build_seconds": 1.0}
    return build_entry


def test_build_publishes_an_entry_then_hits_the_cache(cache_dir, monkeypatch):
    calls: list[Path] = []
    monkeypatch.setattr(cache, "build_entry", _fake_build(calls))
    first = cache.build_guest_image()
    assert first.built and first.path.read_bytes() == b"guest.qcow2" and first.cmdline.endswith("ttyS0")
    assert first.entry.name == "guest-" + inputs.compute_key(inputs.gather_inputs())
    assert oct(first.entry.stat().st_mode & 0o777) == "0o755"  # QEMU (libvirt-qemu) reads it
    assert not list(cache_dir.glob(cache.BUILD_PREFIX + "*")) and not calls[0].exists()
    second = cache.build_guest_image()
    assert not second.built and len(calls) == 1 and cache.cached() == second
    forced = cache.build_guest_image(force=True)
    assert forced.built and len(calls) == 2 and len(list(cache_dir.glob("guest-*"))) == 1


def test_a_failed_build_leaves_no_entry_and_no_work_dir(cache_dir, monkeypatch):
    def failing(inp, key, work, entry, progress=None):
        (entry / builder.IMAGE_NAME).write_text("half")
        raise GuestImageError("mmdebstrap failed")

    monkeypatch.setattr(cache, "build_entry", failing)
    with pytest.raises(GuestImageError):
        cache.build_guest_image()
    assert [p.name for p in cache_dir.iterdir() if not p.name.startswith(".guest")] == []
    assert cache.cached() is None


def test_a_killed_builds_work_dir_is_removed_by_the_next_build(cache_dir, monkeypatch):
    stale = cache_dir / (cache.BUILD_PREFIX + "dead")
    (stale / "root/etc").mkdir(parents=True)
    old_entry = cache_dir / "guest-old"
    old_entry.mkdir()
    (old_entry / cache.ENTRY_META).write_text("{not json")
    monkeypatch.setattr(cache, "build_entry", _fake_build([]))
    cache.build_guest_image()
    assert not stale.exists()


def test_prune_keeps_the_newest_entries(cache_dir, monkeypatch):
    monkeypatch.setattr(cache, "build_entry", _fake_build([]))
    for n in range(cache.KEEP_ENTRIES + 2):
        monkeypatch.setattr(cache, "gather_inputs", lambda n=n: inputs.GuestInputs(builder_version=str(n)))
        info = cache.build_guest_image()
        os.utime(info.entry / cache.ENTRY_META, (n, n))
    cache.clean_stale(cache_dir)
    assert len(list(cache_dir.glob("guest-*"))) == cache.KEEP_ENTRIES
    assert cache.load_entry(info.entry) is not None  # the newest stays


def test_load_entry_wants_every_file(cache_dir, monkeypatch):
    monkeypatch.setattr(cache, "build_entry", _fake_build([]))
    info = cache.build_guest_image()
    info.initrd.unlink()
    assert cache.load_entry(info.entry) is None


# --- --out ---------------------------------------------------------------------------------------------

def test_out_refusals_are_user_errors_naming_out(cache_dir, tmp_path):
    with pytest.raises(UserError, match="^--out: .* is a directory"):
        cache.check_out(tmp_path, force=False)
    with pytest.raises(UserError, match="^--out: the directory .* does not exist"):
        cache.check_out(tmp_path / "no" / "x.qcow2", force=False)
    mine = tmp_path / "mine.qcow2"
    mine.write_text("the user's own file")
    with pytest.raises(UserError, match="^--out: .* not a guest image labctl made"):
        cache.check_out(mine, force=False)
    cache.check_out(mine, force=True)
    cache.check_out(tmp_path / "new.qcow2", force=False)


def test_copy_to_out_and_replace_a_previous_copy(cache_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "build_entry", _fake_build([]))
    info = cache.build_guest_image()
    out = tmp_path / "guest.qcow2"
    copied = cache.copy_image(info, out)
    assert copied.out == out and out.read_bytes() == info.path.read_bytes()
    cache.check_out(out, force=False)  # a copy this cache made may be replaced
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_api_refuses_before_building(cache_dir, tmp_path, monkeypatch):
    from labctl import api

    monkeypatch.setattr(cache, "build_entry", lambda *a, **k: pytest.fail("built before checking --out"))
    (tmp_path / "x.qcow2").write_text("user data")
    with pytest.raises(UserError):
        api.build_guest_image(tmp_path / "x.qcow2")
    assert (tmp_path / "x.qcow2").read_text() == "user data"


def test_cli_image_guest_json_and_exit_2(cli, cache_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "build_entry", _fake_build([]))
    code, out, err = cli("image", "guest", "--out", str(tmp_path / "g.qcow2"), "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["out"] == str(tmp_path / "g.qcow2") and info["kernel_release"] == "6.1.0-9-amd64"
    assert info["dpdk_version"] == "22.11.11-0+deb12u1" and info["format"] == "qcow2"
    (tmp_path / "other.qcow2").write_text("x")
    code, out, err = cli("image", "guest", "--out", str(tmp_path / "other.qcow2"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("--out:")


# --- releasing a build's mounts and loops --------------------------------------------------------------

def test_release_removes_a_plain_work_dir(tmp_path):
    work = tmp_path / ".build-guest-x"
    (work / "a/b").mkdir(parents=True)
    assert tools.mounts_under(work) == []
    tools.release(work)
    assert not work.exists()


def test_mounts_under_reads_proc_mounts(monkeypatch, tmp_path):
    real_read = Path.read_text
    base = os.path.realpath(tmp_path)
    table = (f"proc {base}/w/root/proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n"
             f"/dev/loop3 {base}/w/mnt ext4 rw 0 0\n/dev/loop4 {base}/w\\040x ext4 rw 0 0\n")
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: table if str(self) == "/proc/self/mounts"
                        else real_read(self, *a, **k))
    assert tools.mounts_under(tmp_path / "w") == [f"{base}/w/root/proc", f"{base}/w/mnt"]


def test_a_timed_out_tool_is_stopped_with_its_whole_process_group():
    import sys

    import psutil

    child = ("import subprocess, sys, time\n"
             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
             "print(p.pid, flush=True)\ntime.sleep(60)\n")
    with pytest.raises(GuestImageError, match="timed out after 1 s"):
        tools.run([sys.executable, "-c", child], timeout=1)
    # the tool's own child (as mmdebstrap's dpkg) is gone too, not left writing in the build directory
    alive = [p for p in psutil.process_iter(["cmdline", "status"])
             if "time.sleep(60)" in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_a_missing_tool_is_one_guest_image_error():
    with pytest.raises(GuestImageError, match="not installed"):
        tools.run(["labctl-no-such-tool-x"])
    assert tools.run(["cat"], input_text="abc").stdout == "abc"


def test_release_stops_a_killed_builds_process_still_working_in_its_directory(tmp_path):
    import subprocess
    import sys

    work = tmp_path / ".build-guest-dead"
    (work / "root").mkdir(parents=True)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], cwd=work / "root")
    try:
        assert [p.pid for p in tools.processes_in(work)] == [orphan.pid]
        assert f"process {orphan.pid}" in tools.release(work)
        orphan.wait(timeout=10)  # gone (already reaped by release: no exit code to read)
        assert not work.exists()
    finally:
        orphan.kill()
        orphan.wait()
