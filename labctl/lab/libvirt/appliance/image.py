"""The appliance's image: the staging root of the initramfs (busybox, ethtool, dpdk-testpmd, iperf3,
sockperf, the ``ldd`` closure of them and of the DPDK plugins, the kernel modules, ``/init``), written as
a plain cpio archive, and the kernel next to it: the ELF ``vmlinux`` QEMU enters by its PVH note where
the kernel has one, else Debian's bzImage (:mod:`labctl.lab.libvirt.appliance.pvh`: why, and the figures).

EAL loads every plugin of its plugin directory, so only the few a virtio guest needs
(``labctl.platform.GUEST_DPDK_PLUGINS``) are put there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from labctl import platform
from labctl.digest import sha256_file
from labctl.errors import ApplianceError
from labctl.lab.libvirt.appliance.key import KeyInputs
from labctl.lab.libvirt.appliance.modules import module_index, module_load_order
from labctl.lab.libvirt.appliance.pvh import elf_kernel
from labctl.lab.libvirt.appliance.tools import Progress, run, say

BUSYBOX = "/bin/busybox"
BINARIES: tuple[str, ...] = ("/sbin/ethtool", "/usr/bin/dpdk-testpmd",
                             # the tcp workloads' tools (serve mode, labctl.stack=kernel)
                             "/usr/bin/iperf3", "/usr/bin/sockperf")
# coreutils' stdbuf preload library: testpmd writes to a pipe in the appliance, and its stdio would
# hold every line until exit without _STDBUF_O=L
PRELOAD_LIBS: tuple[str, ...] = ("/usr/libexec/coreutils/libstdbuf.so",)

INIT_SH = "init.sh"
KERNEL_NAME = "vmlinuz"  # Debian's bzImage, where the kernel has no PVH entry
ELF_KERNEL_NAME = "vmlinux"  # the uncompressed ELF kernel, entered through its PVH note
INITRD_NAME = "initrd.cpio"


def init_sh_text() -> bytes:
    return resources.files("labctl.lab.libvirt.appliance").joinpath("files", INIT_SH).read_bytes()


# --- shared libraries -------------------------------------------------------------------------------------


def ldd_closure(paths: Iterable[Path]) -> set[Path]:
    """Every shared library (as ldd names it) that ``paths`` need, the loader included."""
    libs: set[Path] = set()
    for path in paths:
        proc = run(["ldd", str(path)], check=False)
        if proc.returncode != 0 and "not a dynamic executable" in (proc.stdout + proc.stderr):
            continue
        for line in proc.stdout.splitlines():
            line = line.strip()
            if "not found" in line:
                raise ApplianceError(f"{path}: {line}")
            m = re.match(r"\S+\s+=>\s+(/\S+)\s+\(", line) or re.match(r"(/\S+)\s+\(", line)
            if m:
                libs.add(Path(m.group(1)))
    return libs


def ldd_names(path: Path) -> set[str]:
    """The names of the shared libraries ``path`` needs, its whole closure as ldd lists it ("libx.so.1", the
    loader by its file name), found on this host or not; empty for a static executable. The vDSO is left out:
    the kernel maps it."""
    proc = run(["ldd", str(path)], check=False)
    names: set[str] = set()
    for line in proc.stdout.splitlines():
        m = re.match(r"\s*(\S+)\s+(?:=>|\()", line)
        if m and not m.group(1).startswith("linux-vdso"):
            names.add(Path(m.group(1)).name)
    return names


def appliance_libraries() -> set[str]:
    """The library names the stock appliance carries: those ldd lists for its binaries and plugins, and
    the plugins (the loader finds them through LD_LIBRARY_PATH, which holds the plugin directory)."""
    plugins = _plugin_files(dpdk_plugin_dir())
    names: set[str] = {p.name for p in plugins}
    for path in [Path(b) for b in BINARIES + PRELOAD_LIBS] + plugins:
        if path.exists():
            names |= ldd_names(path)
    return names


def missing_libraries(binary: Path, carried: set[str] | None = None) -> list[str]:
    """The libraries ``binary`` needs that the appliance does not carry (``carried``: its library names,
    :func:`appliance_libraries` when None). A statically linked DPDK build needs none of DPDK's: EAL loads
    its default plugin directory only in a shared build (``eal_plugins_init``, ``is_shared_build()``, DPDK's
    lib/eal/common/eal_common_options.c), and the appliance passes no ``-d``, so the plugins it carries are
    never loaded by a static binary."""
    carried = appliance_libraries() if carried is None else carried
    return sorted(ldd_names(binary) - carried)


def dpdk_plugin_dir() -> Path:
    """The EAL's plugin directory (Debian: /usr/lib/x86_64-linux-gnu/dpdk/pmds-<ABI>)."""
    found = sorted(platform.DPDK_LIBDIR.glob("pmds-*"))
    if len(found) != 1:
        raise ApplianceError(f"expected one DPDK plugin directory under {platform.DPDK_LIBDIR}, "
                             f"found {[str(p) for p in found]} (install dpdk and librte-net-virtio23)")
    return found[0]


def _plugin_files(plugin_dir: Path) -> list[Path]:
    files = []
    for name in platform.GUEST_DPDK_PLUGINS:
        candidates = sorted(plugin_dir.glob(f"{name}.so.*[0-9]"), key=lambda p: len(p.name))
        if not candidates:
            raise ApplianceError(f"DPDK plugin {name} is missing from {plugin_dir}")
        files.append(candidates[0])  # the soname (librte_x.so.23), not librte_x.so.23.0
    return files


# --- the image ------------------------------------------------------------------------------------------------


class _Root:
    """A staging root that mirrors the host's top-level usr-merge symlinks."""

    def __init__(self, root: Path):
        self.root = root
        for top in ("bin", "sbin", "lib", "lib64"):
            host = Path("/") / top
            if host.is_symlink():
                (root / top).symlink_to(os.readlink(host))
            else:
                (root / top).mkdir(parents=True, exist_ok=True)
        for d in ("usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "proc", "sys", "dev", "tmp", "run",
                  "var", "etc/labctl", "root", "mnt"):
            (root / d).mkdir(parents=True, exist_ok=True)
        (root / "var/run").symlink_to("../run")

    def place(self, host_path: Path) -> Path:
        """Copy a host file to the same place in the root, symlinks kept as symlinks.

        Directory symlinks (/lib -> usr/lib) are resolved; a file symlink is recreated with its
        target, and the target placed too. DPDK needs this: EAL loads ``*.so`` and ``*.so.<ABI>``
        (``librte_net_virtio.so.23.0``) from its plugin directory, while ldd names the sonames.
        """
        host_path = Path(host_path)
        real_dir = Path(os.path.realpath(host_path.parent))
        src = real_dir / host_path.name
        dest = self.root / real_dir.relative_to("/") / host_path.name
        if os.path.lexists(dest):
            return dest
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target = os.readlink(src)
            dest.symlink_to(target)
            self.place(Path(target) if os.path.isabs(target) else real_dir / target)
        else:
            shutil.copyfile(src, dest)
            dest.chmod(stat.S_IMODE(src.stat().st_mode) | stat.S_IRUSR)
        return dest


def _write_cpio(root: Path, out: Path) -> None:
    """``root`` as a newc cpio archive, uncompressed (the kernel need not unpack it: ``pvh``)."""
    names = ["."]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = Path(dirpath).relative_to(root)
        for n in sorted(dirnames + filenames):
            names.append(str(rel / n) if str(rel) != "." else n)
    listing = "\n".join(names) + "\n"
    with open(out, "wb") as raw:
        proc = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet", "--reproducible",
                                 "-R", "0:0"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin and proc.stdout and proc.stderr
        # cpio reads the whole list before it writes much: feed it, then stream its output
        proc.stdin.write(listing.encode())
        proc.stdin.close()
        for chunk in iter(lambda: proc.stdout.read(1 << 20), b""):
            raw.write(chunk)
        err = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            raise ApplianceError(f"cpio failed: {err.strip()}")


def _place_forwarder(inputs: KeyInputs, root_dir: Path, progress: Progress) -> None:
    """A build's forwarder as the root's /usr/bin/dpdk-testpmd (init.sh runs it by that name), checked to
    be the binary the key was made of."""
    src = Path(inputs.forwarder_path)
    if sha256_file(src) != inputs.forwarder_sha256:
        raise ApplianceError(f"{src} changed while the appliance was being built (its sha256 is not "
                             f"{inputs.forwarder_sha256[:12]})")
    dest = root_dir / "usr/bin/dpdk-testpmd"
    dest.unlink(missing_ok=True)
    shutil.copyfile(src, dest)
    dest.chmod(0o755)
    if sha256_file(dest) != inputs.forwarder_sha256:
        raise ApplianceError(f"{src} changed while it was copied into the appliance")
    say(progress, f"dpdk-testpmd: the build's {src} (sha256 {inputs.forwarder_sha256[:12]})")


def _stage(inputs: KeyInputs, key: str, deb: Path, work: Path, entry: Path,
           progress: Progress) -> tuple[str, str]:
    """Unpack the kernel, fill the initramfs root, write the kernel and initrd.cpio into ``entry``; returns
    (kernel release, the kernel's file name in the entry)."""
    kx = work / "kernel"
    say(progress, f"dpkg -x {deb.name}")
    run(["dpkg", "-x", str(deb), str(kx)])
    vmlinuz = sorted((kx / "boot").glob("vmlinuz-*"))
    if len(vmlinuz) != 1:
        raise ApplianceError(f"{deb.name} holds {len(vmlinuz)} kernels")
    kver = vmlinuz[0].name[len("vmlinuz-"):]
    moddir = kx / "lib/modules" / kver
    if not moddir.is_dir():
        moddir = kx / "usr/lib/modules" / kver

    root_dir = work / "root"
    root_dir.mkdir()
    root = _Root(root_dir)

    # modules: dependency order per group, decompressed
    index, builtin = module_index(moddir)
    loaded: dict[str, bytes] = {}
    target_moddir = root_dir / "usr/lib/modules" / kver
    for group, wanted in inputs.modules.items():
        order = module_load_order(wanted, index, builtin, loaded)
        lines = []
        for name in order:
            rel = index[name].relative_to(moddir)
            for suffix in (".xz", ".zst", ".gz"):
                if rel.name.endswith(".ko" + suffix):
                    rel = rel.with_name(rel.name[: -len(suffix)])
            dest = target_moddir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(loaded[name])
            lines.append(f"{name} {rel}")
        (root_dir / "etc/labctl" / f"modules.{group}").write_text("\n".join(lines) + "\n")
        say(progress, f"modules.{group}: {' '.join(order)}")
    if not os.path.lexists(root_dir / "lib/modules"):  # lib is a real directory on this host
        (root_dir / "lib/modules").symlink_to("../usr/lib/modules")

    # binaries, their libraries, the DPDK plugins and theirs
    binaries = [Path(b) for b in BINARIES + PRELOAD_LIBS]
    for b in binaries:
        if not b.exists():
            raise ApplianceError(f"{b} is missing (install ethtool, dpdk-dev, coreutils, iperf3 and sockperf)")
    plugin_dir = dpdk_plugin_dir()
    plugins = _plugin_files(plugin_dir)
    libs = ldd_closure(binaries + plugins)
    for path in sorted(set(binaries) | set(plugins) | libs):
        root.place(path)
    if inputs.forwarder_path:
        _place_forwarder(inputs, root_dir, progress)
    # busybox and its applets
    bb = root.place(Path(BUSYBOX))
    bb_in_root = "/" + str(bb.relative_to(root_dir))
    applets = run([BUSYBOX, "--list-full"]).stdout.split()
    for applet in applets:
        link = root_dir / applet  # bin/sh goes through the root's bin -> usr/bin symlink
        link.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(link):
            link.symlink_to(bb_in_root)

    # EAL loads every .so in its plugin directory: it must hold only the plugins and what testpmd
    # links from there, all of whose dependencies were collected above
    staged_plugins = sorted(p.name for p in (root_dir / str(plugin_dir).lstrip("/")).iterdir())

    # init and build facts; /etc/labctl/env is sourced by init.sh
    env = {
        "LD_LIBRARY_PATH": f"/usr/lib/x86_64-linux-gnu:{plugin_dir}",
        "LABCTL_STDBUF_PRELOAD": PRELOAD_LIBS[0],
        "LABCTL_KERNEL_VERSION": kver,
    }
    (root_dir / "etc/labctl/env").write_text(
        "".join(f"{k}='{v}'\nexport {k}\n" for k, v in env.items()))
    init = root_dir / "init"
    init.write_bytes(init_sh_text())
    init.chmod(0o755)
    (root_dir / "etc/labctl/build.json").write_text(json.dumps(
        {"key": key, "kernel_version": kver, "kernel_package": inputs.kernel_package,
         "packages": dict(inputs.packages), "plugins": staged_plugins,
         **({"forwarder": {"path": inputs.forwarder_path, "sha256": inputs.forwarder_sha256}}
            if inputs.forwarder_path else {})}, indent=1) + "\n")
    (root_dir / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root_dir / "etc/group").write_text("root:x:0:\n")
    try:
        os.mknod(root_dir / "dev/console", 0o600 | stat.S_IFCHR, os.makedev(5, 1))
        os.mknod(root_dir / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pass  # init.sh reopens /dev/console after mounting devtmpfs

    elf = elf_kernel(vmlinuz[0].read_bytes())
    if elf is not None:
        (entry / ELF_KERNEL_NAME).write_bytes(elf)
        say(progress, f"{ELF_KERNEL_NAME}: the ELF kernel with its PVH entry, {len(elf) / 1e6:.1f} MB")
    else:
        shutil.copyfile(vmlinuz[0], entry / KERNEL_NAME)
        say(progress, f"{KERNEL_NAME}: the bzImage (no PVH entry found in it)")
    say(progress, "cpio -o -H newc")
    _write_cpio(root_dir, entry / INITRD_NAME)
    return kver, ELF_KERNEL_NAME if elf is not None else KERNEL_NAME
