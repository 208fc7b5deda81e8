"""The workload appliance: a kernel and an initramfs that boot a guest straight into its job.

``build()`` makes it from Debian packages and caches it by a hash of its inputs:

* the kernel comes from ``linux-image-amd64`` (the metapackage is resolved to the image package it
  depends on, which is fetched with ``apt-get download`` and unpacked with ``dpkg -x``; never installed);
* the initramfs (``cpio -o -H newc`` + gzip) holds busybox, the virtio stack and the uio/vfio modules of
  that kernel (decompressed, so busybox ``insmod`` can load them), ethtool, ``dpdk-testpmd`` with the
  shared libraries ``ldd`` finds for it, and the few DPDK PMD plugins a virtio guest needs (EAL loads
  every plugin of its plugin directory, so only those are put there);
* its ``/init`` is ``labctl/lab/libvirt/appliance/files/init.sh``: it reads ``labctl.mode=verify|workload`` and the
  other ``labctl.*`` parameters from the kernel command line and reports on the serial console with
  ``LABCTL-*`` lines (see ``parse_console``).

The cache key is a hash of: the kernel .deb's SHA-256 (from the apt index, checked after download), the
versions of the Debian packages whose files are copied, init.sh's content, the module and plugin lists,
and ``BUILDER_VERSION``. A build with the same inputs is a cache hit and returns at once; a build is made
in a temporary directory next to the cache entries and renamed into place, so an entry is either
complete or absent.

Only the userspace driver uio_pci_generic is usable with Debian's kernel on a guest without an IOMMU:
Debian 12 builds the kernel without ``CONFIG_VFIO_NOIOMMU``, so vfio-pci needs a virtual IOMMU in the
guest. The vfio modules are still in the initramfs for that case (``labctl.driver=vfio-pci``).
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

from labctl import platform
from labctl.errors import ApplianceError

# Bump when the builder makes a different image from the same inputs.
BUILDER_VERSION = "1"

KERNEL_META_PACKAGE = "linux-image-amd64"

# Debian packages whose files are copied into the initramfs (their versions are part of the key).
TOOL_PACKAGES: tuple[str, ...] = (
    "busybox-static",
    "ethtool",
    "dpdk-dev",  # dpdk-testpmd
    "dpdk",
    "librte-eal23",
    "librte-ethdev23",
    "librte-net-virtio23",
    "librte-mempool-ring23",
    "librte-bus-pci23",
    "libc6",
    "coreutils",
)

BUSYBOX = "/bin/busybox"
BINARIES: tuple[str, ...] = ("/sbin/ethtool", "/usr/bin/dpdk-testpmd")
# coreutils' stdbuf preload library: testpmd writes to a pipe in the appliance, and its stdio would
# hold every line until exit without _STDBUF_O=L
PRELOAD_LIBS: tuple[str, ...] = ("/usr/libexec/coreutils/libstdbuf.so",)

# Module groups, loaded by init.sh from /etc/labctl/modules.<group>. Each list is completed with its
# dependencies and put in dependency order at build time; the order below is the load order the
# virtio stack needs (virtio_ring, virtio, virtio_pci_legacy_dev, virtio_pci_modern_dev, virtio_pci,
# failover, net_failover, virtio_net).
MODULE_GROUPS: dict[str, tuple[str, ...]] = {
    "net": (
        "virtio_ring",
        "virtio",
        "virtio_pci_legacy_dev",
        "virtio_pci_modern_dev",
        "virtio_pci",
        "failover",
        "net_failover",
        "virtio_net",
        "virtio_console",
    ),
    "uio": ("uio", "uio_pci_generic"),
    "vfio": ("vfio", "vfio_iommu_type1", "vfio_pci_core", "vfio_pci"),
}

# DPDK PMD plugins: labctl.platform.GUEST_DPDK_PLUGINS (the EAL loads every plugin of its directory).
DPDK_PLUGINS = platform.GUEST_DPDK_PLUGINS
DPDK_LIBDIR = platform.DPDK_LIBDIR

KEEP_ENTRIES = 3  # cache entries kept after a build (each about 17 MB)

INIT_SH = "init.sh"
ENTRY_META = "appliance.json"
KERNEL_NAME = "vmlinuz"
INITRD_NAME = "initrd.img"

Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class Appliance:
    """A built appliance in the cache."""

    kernel: Path
    initrd: Path
    key: str
    kernel_version: str
    size_bytes: int  # kernel + initramfs on disk
    initrd_bytes: int = 0
    kernel_package: str = ""
    built: bool = False  # True when this call built it, False for a cache hit

    @property
    def path(self) -> Path:
        return self.kernel.parent

    def cmdline(self, mode: str = "verify", console: str = "ttyS0", extra: Iterable[str] = (),
                **params: object) -> str:
        """The kernel command line for ``mode`` with ``labctl.NAME=VALUE`` for every keyword."""
        return kernel_cmdline(mode, console=console, extra=extra, **params)


@dataclass(frozen=True)
class KeyInputs:
    """Everything the appliance is made from; ``compute_key`` hashes it."""

    kernel_package: str
    kernel_deb_version: str
    kernel_deb_sha256: str
    packages: Mapping[str, str]
    init_sh_sha256: str
    builder_version: str = BUILDER_VERSION
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(MODULE_GROUPS))
    plugins: tuple[str, ...] = DPDK_PLUGINS
    kernel_deb_filename: str = ""  # where apt fetches it from; not part of the key

    def canonical(self) -> str:
        data = asdict(self)
        data.pop("kernel_deb_filename")
        data["packages"] = dict(sorted(self.packages.items()))
        data["modules"] = {k: list(v) for k, v in sorted(self.modules.items())}
        data["plugins"] = list(self.plugins)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def compute_key(inputs: KeyInputs) -> str:
    """The cache key: SHA-256 of the canonical form of the inputs."""
    return hashlib.sha256(inputs.canonical().encode()).hexdigest()


# --- small helpers -----------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """LABCTL_CACHE_DIR, else /var/cache/labctl/appliance for root (QEMU runs as libvirt-qemu and
    cannot read /root), else the user's XDG cache."""
    env = os.environ.get("LABCTL_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/labctl/appliance")
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "labctl" / "appliance"


def init_sh_text() -> bytes:
    return resources.files("labctl.lab.libvirt.appliance").joinpath("files", INIT_SH).read_bytes()


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _run(args: list[str], *, cwd: Path | None = None, check: bool = True,
         timeout: float | None = 900) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise ApplianceError(f"{args[0]} is not installed: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ApplianceError(f"{' '.join(args)} timed out after {timeout} s") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ApplianceError(f"{' '.join(args)} failed ({proc.returncode}): "
                             f"{detail[-1] if detail else 'no output'}")
    return proc


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- apt: what the kernel is, and fetching it ---------------------------------------------------------


APT_LISTS = Path("/var/lib/apt/lists")
APT_CONFIG = Path("/etc/apt")
_RESOLUTION_MEMO = ".apt-resolution.json"


def _apt_record(package: str) -> dict[str, str]:
    """The candidate version's record of ``package`` (``apt-cache show --no-all-versions``)."""
    proc = _run(["apt-cache", "show", "--no-all-versions", package], check=False)
    if proc.returncode != 0:
        return {}
    record: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if not line.strip():
            if record:
                break  # the first record is enough
            continue
        if line[0].isspace():
            continue
        k, _, v = line.partition(":")
        record[k.strip()] = v.strip()
    return record


def _apt_fingerprint() -> str:
    """Changes whenever what apt-cache would answer can change (its lists and configuration)."""
    h = hashlib.sha256()
    for base in (APT_LISTS, APT_CONFIG):
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            try:
                st = path.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _resolve_kernel_apt() -> tuple[str, str, str, str] | None:
    meta = _apt_record(KERNEL_META_PACKAGE)
    image = None
    for alt in re.split(r"[,|]", meta.get("Depends", "")):
        name = alt.strip().split(" ")[0]
        if name.startswith("linux-image-"):
            image = name
            break
    if image is None:
        return None
    rec = _apt_record(image)
    if "SHA256" not in rec or "Version" not in rec:
        return None
    return image, rec["Version"], rec["SHA256"], rec.get("Filename", "")


def _resolve_kernel_once(memo_dir: Path | None = None) -> tuple[str, str, str, str] | None:
    """Ask apt-cache (about 1.5 s here), or reuse the answer while apt's lists are unchanged."""
    memo = memo_dir / _RESOLUTION_MEMO if memo_dir is not None else None
    fingerprint = _apt_fingerprint()
    if memo is not None:
        try:
            saved = json.loads(memo.read_text())
            if saved.get("fingerprint") == fingerprint and saved.get("kernel_meta") == \
                    KERNEL_META_PACKAGE:
                return tuple(saved["result"])  # type: ignore[return-value]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    found = _resolve_kernel_apt()
    if found is not None and memo is not None and memo_dir is not None and memo_dir.is_dir():
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fingerprint, "kernel_meta": KERNEL_META_PACKAGE,
                                   "result": list(found)}))
        os.replace(tmp, memo)
    return found


def resolve_kernel(progress: Progress = None, memo_dir: Path | None = None,
                   update_apt: bool = True) -> tuple[str, str, str, str]:
    """(image package, version, SHA-256, pool filename) of the kernel ``linux-image-amd64`` pulls in.

    With ``update_apt``, runs ``apt-get update`` once when the apt lists do not know the packages
    (as root only). ``memo_dir`` keeps apt-cache's answer there while apt's lists are unchanged.
    ``LABCTL_KERNEL_DEB=/path/to/linux-image-*.deb`` uses that file instead (offline builds).
    """
    local = os.environ.get("LABCTL_KERNEL_DEB")
    if local:
        path = Path(local)
        if not path.is_file():
            raise ApplianceError(f"LABCTL_KERNEL_DEB={local}: no such file")
        info = _run(["dpkg-deb", "-f", str(path), "Package", "Version"]).stdout
        fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
        return fields.get("Package", path.name), fields.get("Version", ""), _sha256_file(path), str(path)
    found = _resolve_kernel_once(memo_dir)
    if found is None and update_apt and os.geteuid() == 0:
        _say(progress, "apt lists do not know the kernel: apt-get update")
        _run(["apt-get", "update", "-qq"], timeout=900)
        found = _resolve_kernel_once(memo_dir)
    if found is None:
        raise ApplianceError(f"apt cannot resolve {KERNEL_META_PACKAGE} to a kernel image package "
                             "(run apt-get update)")
    return found


def package_versions(packages: Iterable[str] = TOOL_PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` (a package that is not installed maps to "")."""
    packages = list(packages)
    proc = _run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${db:Status-Status}\n", *packages],
                check=False)
    versions = dict.fromkeys(packages, "")
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition("\t")
        version, _, status = rest.partition("\t")
        name = name.split(":")[0]
        if name in versions and status == "installed":
            versions[name] = version
    return versions


def gather_inputs(progress: Progress = None, cache_dir: Path | None = None,
                  update_apt: bool = True) -> KeyInputs:
    """What the appliance would be made from now, from apt's index and dpkg (no download)."""
    image, version, sha256, filename = resolve_kernel(progress, memo_dir=cache_dir,
                                                      update_apt=update_apt)
    return KeyInputs(
        kernel_package=image,
        kernel_deb_version=version,
        kernel_deb_sha256=sha256,
        packages=package_versions(),
        init_sh_sha256=hashlib.sha256(init_sh_text()).hexdigest(),
        kernel_deb_filename=filename,
    )


def _fetch_kernel_deb(inputs: KeyInputs, cache_dir: Path, work: Path, progress: Progress) -> Path:
    """The kernel .deb, from the download cache or ``apt-get download``; its SHA-256 is checked."""
    if inputs.kernel_deb_filename.startswith("/"):
        return Path(inputs.kernel_deb_filename)  # LABCTL_KERNEL_DEB
    downloads = cache_dir / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    name = f"{inputs.kernel_package}_{inputs.kernel_deb_version.replace(':', '%3a')}_amd64.deb"
    kept = downloads / name
    if kept.is_file() and _sha256_file(kept) == inputs.kernel_deb_sha256:
        _say(progress, f"kernel package {name} from the download cache")
        return kept
    dl = work / "download"
    dl.mkdir()
    _say(progress, f"apt-get download {inputs.kernel_package}={inputs.kernel_deb_version}")
    _run(["apt-get", "download", "-q", f"{inputs.kernel_package}={inputs.kernel_deb_version}"],
         cwd=dl, timeout=1800)
    debs = sorted(dl.glob("*.deb"))
    if len(debs) != 1:
        raise ApplianceError(f"apt-get download left {len(debs)} .deb files")
    got = _sha256_file(debs[0])
    if got != inputs.kernel_deb_sha256:
        raise ApplianceError(f"{debs[0].name}: SHA-256 {got} is not the apt index's "
                             f"{inputs.kernel_deb_sha256}")
    for old in downloads.glob("*.deb"):  # keep only the current kernel package
        old.unlink(missing_ok=True)
    tmp = downloads / f".{name}.part"
    shutil.copyfile(debs[0], tmp)
    os.replace(tmp, kept)
    return kept


# --- kernel modules -----------------------------------------------------------------------------------

_MOD_SUFFIXES = (".ko.xz", ".ko.zst", ".ko.gz", ".ko")


def _module_name(filename: str) -> str:
    for suffix in _MOD_SUFFIXES:
        if filename.endswith(suffix):
            return filename[: -len(suffix)].replace("-", "_")
    raise ValueError(filename)


def _decompress_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".ko.xz"):
        return lzma.decompress(data)
    if path.name.endswith(".ko.gz"):
        return gzip.decompress(data)
    if path.name.endswith(".ko.zst"):
        proc = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=False)
        if proc.returncode != 0:
            raise ApplianceError(f"cannot decompress {path.name}: is zstd installed?")
        return proc.stdout
    return data


def _modinfo_depends(ko: bytes) -> list[str]:
    """The ``depends=`` field of a module's .modinfo section (NUL-separated key=value strings)."""
    m = re.search(rb"(?:^|\x00)depends=([^\x00]*)\x00", ko)
    if not m or not m.group(1):
        return []
    return [d.decode().replace("-", "_") for d in m.group(1).split(b",") if d]


def module_index(moddir: Path) -> tuple[dict[str, Path], set[str]]:
    """Module name -> file under ``moddir`` (lib/modules/VERSION), and the names built in."""
    index: dict[str, Path] = {}
    for path in (moddir / "kernel").rglob("*.ko*"):
        try:
            index[_module_name(path.name)] = path
        except ValueError:
            continue
    builtin: set[str] = set()
    listing = moddir / "modules.builtin"
    if listing.is_file():
        for line in listing.read_text().splitlines():
            builtin.add(_module_name(Path(line.strip()).name))
    return index, builtin


def module_load_order(wanted: Iterable[str], index: Mapping[str, Path], builtin: set[str],
                      loaded: dict[str, bytes]) -> list[str]:
    """``wanted`` with their dependencies, each after what it depends on, built-ins left out.

    ``loaded`` caches name -> decompressed module bytes (filled as a side effect).
    """
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        name = name.replace("-", "_")
        if name in order or name in builtin:
            return
        if name in visiting:
            raise ApplianceError(f"module dependency cycle at {name}")
        if name not in index:
            raise ApplianceError(f"kernel module {name} is neither in the kernel package nor built in")
        visiting.add(name)
        if name not in loaded:
            loaded[name] = _decompress_module(index[name])
        for dep in _modinfo_depends(loaded[name]):
            visit(dep)
        visiting.discard(name)
        order.append(name)

    for name in wanted:
        visit(name)
    return order


# --- shared libraries -------------------------------------------------------------------------------------


def ldd_closure(paths: Iterable[Path]) -> set[Path]:
    """Every shared library (as ldd names it) that ``paths`` need, the loader included."""
    libs: set[Path] = set()
    for path in paths:
        proc = _run(["ldd", str(path)], check=False)
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


def dpdk_plugin_dir() -> Path:
    """The EAL's plugin directory (Debian: /usr/lib/x86_64-linux-gnu/dpdk/pmds-<ABI>)."""
    found = sorted(DPDK_LIBDIR.glob("pmds-*"))
    if len(found) != 1:
        raise ApplianceError(f"expected one DPDK plugin directory under {DPDK_LIBDIR}, found "
                             f"{[str(p) for p in found]} (install dpdk and librte-net-virtio23)")
    return found[0]


def _plugin_files(plugin_dir: Path) -> list[Path]:
    files = []
    for name in DPDK_PLUGINS:
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


def _write_cpio_gz(root: Path, out: Path) -> None:
    names = ["."]
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = Path(dirpath).relative_to(root)
        for n in sorted(dirnames + filenames):
            names.append(str(rel / n) if str(rel) != "." else n)
    listing = "\n".join(names) + "\n"
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9,
                                               mtime=0) as gz:
        proc = subprocess.Popen(["cpio", "-o", "-H", "newc", "--quiet", "--reproducible",
                                 "-R", "0:0"], cwd=root, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin and proc.stdout and proc.stderr
        # cpio reads the whole list before it writes much: feed it, then stream its output
        proc.stdin.write(listing.encode())
        proc.stdin.close()
        for chunk in iter(lambda: proc.stdout.read(1 << 20), b""):
            gz.write(chunk)
        err = proc.stderr.read().decode(errors="replace")
        if proc.wait() != 0:
            raise ApplianceError(f"cpio failed: {err.strip()}")


def _stage(inputs: KeyInputs, key: str, deb: Path, work: Path, entry: Path,
           progress: Progress) -> str:
    """Unpack the kernel, fill the initramfs root, write vmlinuz and initrd.img into ``entry``."""
    kx = work / "kernel"
    _say(progress, f"dpkg -x {deb.name}")
    _run(["dpkg", "-x", str(deb), str(kx)])
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
        _say(progress, f"modules.{group}: {' '.join(order)}")
    if not os.path.lexists(root_dir / "lib/modules"):  # lib is a real directory on this host
        (root_dir / "lib/modules").symlink_to("../usr/lib/modules")

    # binaries, their libraries, the DPDK plugins and theirs
    binaries = [Path(b) for b in BINARIES + PRELOAD_LIBS]
    for b in binaries:
        if not b.exists():
            raise ApplianceError(f"{b} is missing (install ethtool, dpdk-dev and coreutils)")
    plugin_dir = dpdk_plugin_dir()
    plugins = _plugin_files(plugin_dir)
    libs = ldd_closure(binaries + plugins)
    for path in sorted(set(binaries) | set(plugins) | libs):
        root.place(path)
    # busybox and its applets
    bb = root.place(Path(BUSYBOX))
    bb_in_root = "/" + str(bb.relative_to(root_dir))
    applets = _run([BUSYBOX, "--list-full"]).stdout.split()
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
         "packages": dict(inputs.packages), "plugins": staged_plugins}, indent=1) + "\n")
    (root_dir / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root_dir / "etc/group").write_text("root:x:0:\n")
    try:
        os.mknod(root_dir / "dev/console", 0o600 | stat.S_IFCHR, os.makedev(5, 1))
        os.mknod(root_dir / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pass  # init.sh reopens /dev/console after mounting devtmpfs

    shutil.copyfile(vmlinuz[0], entry / KERNEL_NAME)
    _say(progress, "cpio -o -H newc | gzip")
    _write_cpio_gz(root_dir, entry / INITRD_NAME)
    return kver


# --- the cache ---------------------------------------------------------------------------------------------


def _load_entry(path: Path, built: bool = False) -> Appliance | None:
    meta_path = path / ENTRY_META
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    kernel, initrd = path / KERNEL_NAME, path / INITRD_NAME
    if not kernel.is_file() or not initrd.is_file():
        return None
    return Appliance(
        kernel=kernel,
        initrd=initrd,
        key=meta["key"],
        kernel_version=meta["kernel_version"],
        size_bytes=kernel.stat().st_size + initrd.stat().st_size,
        initrd_bytes=initrd.stat().st_size,
        kernel_package=meta.get("kernel_package", ""),
        built=built,
    )


def _entries(cache_dir: Path) -> list[Appliance]:
    if not cache_dir.is_dir():
        return []
    found = []
    for child in cache_dir.iterdir():
        if child.name.startswith(".") or not child.is_dir():
            continue
        app = _load_entry(child)
        if app is not None:
            found.append(app)
    return sorted(found, key=lambda a: a.kernel.parent.joinpath(ENTRY_META).stat().st_mtime)


def cached(cache_dir: Path | None = None) -> Appliance | None:
    """The cached appliance for the current inputs, or None.

    When apt cannot say what the inputs are (no apt lists, no network), the newest complete entry.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    try:
        key = compute_key(gather_inputs(cache_dir=cache_dir, update_apt=False))
    except ApplianceError:
        entries = _entries(cache_dir)
        return entries[-1] if entries else None
    return _load_entry(cache_dir / key)


def prune(cache_dir: Path | None = None, keep: int = KEEP_ENTRIES) -> list[Path]:
    """Remove all but the ``keep`` newest complete entries and stale build directories."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    removed: list[Path] = []
    if not cache_dir.is_dir():
        return removed
    entries = _entries(cache_dir)  # oldest first
    for entry in entries[: max(0, len(entries) - keep)]:
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    for stale in cache_dir.glob(".build-*"):  # a builder that was killed; we hold the lock
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
    return removed


def build(cache_dir: Path | None = None, force: bool = False, progress: Progress = None) -> Appliance:
    """Build the appliance, or return the cached one made from the same inputs."""
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    inputs = gather_inputs(progress, cache_dir=cache_dir)
    key = compute_key(inputs)
    final = cache_dir / key
    if not force:
        hit = _load_entry(final)
        if hit is not None:
            _say(progress, f"cache hit {key[:12]}")
            return hit

    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per cache directory
        if not force:
            hit = _load_entry(final)
            if hit is not None:  # another process built it meanwhile
                return hit
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=cache_dir))
        try:
            entry = work / "entry"
            entry.mkdir()
            deb = _fetch_kernel_deb(inputs, cache_dir, work, progress)
            kver = _stage(inputs, key, deb, work, entry, progress)
            meta = {
                "key": key,
                "kernel_version": kver,
                "kernel_package": inputs.kernel_package,
                "kernel_deb_version": inputs.kernel_deb_version,
                "kernel_deb_sha256": inputs.kernel_deb_sha256,
                "packages": dict(inputs.packages),
                "builder_version": inputs.builder_version,
                "init_sh_sha256": inputs.init_sh_sha256,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "build_seconds": round(time.monotonic() - t0, 1),
            }
            (entry / ENTRY_META).write_text(json.dumps(meta, indent=1) + "\n")
            if final.exists():  # force: replace the old entry, never leave a half one
                old = work / "old"
                os.rename(final, old)
            os.rename(entry, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        prune(cache_dir)
    app = _load_entry(final, built=True)
    if app is None:
        raise ApplianceError(f"the new cache entry {final} is unreadable")
    _say(progress, f"built {key[:12]}: initramfs {app.initrd_bytes / 1e6:.1f} MB")
    return app


# --- kernel command line and console ----------------------------------------------------------------------

_PARAM_RE = re.compile(r"^[A-Za-z0-9_]+$")
_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:/+-]+$")


def kernel_cmdline(mode: str = "verify", console: str = "ttyS0", extra: Iterable[str] = (),
                   **params: object) -> str:
    """``console=ttyS0 labctl.mode=MODE labctl.K=V ...``; values may not hold spaces or quotes."""
    if mode not in ("verify", "workload", "shell"):
        raise ValueError(f"unknown appliance mode {mode!r}")
    words = [f"console={console}", f"labctl.mode={mode}"]
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = int(v)
        if not _PARAM_RE.match(k) or not _VALUE_RE.match(str(v)):
            raise ValueError(f"labctl.{k}={v!r} cannot go on a kernel command line")
        words.append(f"labctl.{k}={v}")
    words.extend(extra)
    return " ".join(words)


@dataclass
class ConsoleReport:
    """The LABCTL-* lines of one boot, parsed."""

    nics: list[dict] = field(default_factory=list)
    stats: list[dict] = field(default_factory=list)
    info: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    boot: dict | None = None
    done: bool = False

    @property
    def final_stats(self) -> dict | None:
        finals = [s for s in self.stats if s.get("final")]
        return finals[-1] if finals else None


def parse_console(text: str) -> ConsoleReport:
    """Parse the serial console (or channel) output of an appliance boot."""
    report = ConsoleReport()
    targets = {"LABCTL-NIC": report.nics, "LABCTL-STATS": report.stats, "LABCTL-INFO": report.info,
               "LABCTL-WARN": report.warnings, "LABCTL-ERROR": report.errors}
    for raw in text.splitlines():
        line = raw.strip("\r")
        idx = line.find("LABCTL-")
        if idx < 0:
            continue
        line = line[idx:]
        if line.startswith("LABCTL-DONE"):
            report.done = True
            continue
        tag, _, payload = line.partition(" ")
        try:
            data = json.loads(payload)
        except ValueError:
            continue
        if tag == "LABCTL-BOOT":
            report.boot = data
        elif tag in targets:
            targets[tag].append(data)
    return report
