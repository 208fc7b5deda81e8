"""Facts about this host: CPUs and their topology, hugepages, KVM usability, software versions."""

from __future__ import annotations

import os
import platform as os_platform
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labctl import platform, shipped
from labctl.host import packages as host_packages
from labctl.host.cpuset import online_cpus, parse_cpuset

SYS = Path("/sys")


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return default


@dataclass(frozen=True)
class HugepagePool:
    size_kib: int
    total: int
    free: int


@dataclass(frozen=True)
class KvmStatus:
    device: bool
    modules: list[str]
    usable: bool
    reason: str

    @property
    def accel(self) -> str:
        return "kvm" if self.usable else "tcg"


@dataclass
class HostFacts:
    cpu_model: str
    cpus: list[int]
    numa_nodes: dict[int, list[int]]
    smt_siblings: dict[int, list[int]]
    isolated: list[int]
    hugepages: list[HugepagePool]
    kvm: KvmStatus
    kernel: str
    versions: dict[str, str | None]
    backends: dict[str, str] = field(default_factory=dict)
    packages: host_packages.Packages | None = None  # labctl's Debian packages: which are missing

    def to_dict(self) -> dict:
        data = asdict(self)
        data["accel"] = self.kvm.accel
        data["packages"] = self.packages.to_dict() if self.packages is not None else None
        return data


def cpu_model() -> str:
    for line in _read(Path("/proc/cpuinfo")).splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return os_platform.processor() or "unknown"


def numa_nodes() -> dict[int, list[int]]:
    nodes: dict[int, list[int]] = {}
    for entry in sorted((SYS / "devices/system/node").glob("node[0-9]*")):
        text = _read(entry / "cpulist")
        if text:
            nodes[int(entry.name[4:])] = sorted(parse_cpuset(text))
    return nodes or {0: sorted(online_cpus())}


def smt_siblings(cpus: frozenset[int]) -> dict[int, list[int]]:
    result: dict[int, list[int]] = {}
    for cpu in sorted(cpus):
        text = _read(SYS / f"devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
        result[cpu] = sorted(parse_cpuset(text)) if text else [cpu]
    return result


def isolated_cpus() -> list[int]:
    text = _read(SYS / "devices/system/cpu/isolated")
    return sorted(parse_cpuset(text)) if text else []


def hugepage_pools() -> list[HugepagePool]:
    pools = []
    for entry in sorted((SYS / "kernel/mm/hugepages").glob("hugepages-*kB")):
        size = int(re.sub(r"\D", "", entry.name))
        pools.append(HugepagePool(size, int(_read(entry / "nr_hugepages", "0") or 0),
                                  int(_read(entry / "free_hugepages", "0") or 0)))
    return pools


def kvm_status() -> KvmStatus:
    device = os.path.exists("/dev/kvm")
    modules = sorted(m for m in ("kvm", "kvm_intel", "kvm_amd", "kvm_pvm") if (SYS / "module" / m).exists())
    if not device:
        return KvmStatus(False, modules, False, "/dev/kvm is missing")
    if "kvm_intel" in modules or "kvm_amd" in modules:
        return KvmStatus(True, modules, True, "kvm_intel/kvm_amd loaded")
    if "kvm_pvm" in modules:
        return KvmStatus(True, modules, False,
                         "/dev/kvm is served by kvm_pvm, on which a stock guest kernel hangs; using TCG")
    return KvmStatus(True, modules, False, "neither kvm_intel nor kvm_amd is loaded; using TCG")


def _run_version(argv: list[str], pattern: str) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, out)
    return match.group(1) if match else None


def libvirt_version() -> str | None:
    try:
        import libvirt
    except ImportError:
        return None
    number = libvirt.getVersion()
    return f"{number // 1_000_000}.{number // 1000 % 1000}.{number % 1000}"


def dpdk_version() -> str | None:
    return _run_version(["pkg-config", "--modversion", "libdpdk"], r"(\S+)") or \
        _run_version(["dpkg-query", "-W", "-f", "${Version}", "librte-eal23"], r"^([\d.]+)")


def qemu_version() -> str | None:
    return _run_version(["qemu-system-x86_64", "--version"], r"version (\S+)")


def libvirtd_running() -> bool:
    return any(sock.exists() for sock in platform.LIBVIRT_SOCKETS)


def missing_dpdk_plugins() -> list[str]:
    found = {p.name.split(".so")[0] for p in platform.DPDK_LIBDIR.glob("pmds-*/*.so*")}
    return [name for name in platform.HOST_DPDK_PLUGINS if name not in found]


def _fix(checkout: str, installed: str) -> str:
    """What to run to fix a missing piece: the checkout's make target, or, for an installed package (which
    has no Makefile), what to do instead."""
    return checkout if shipped.is_checkout() else installed


def lab_backends(versions: dict[str, str | None]) -> dict[str, str]:
    setup = _fix("make setup", "the install line below")
    services = _fix("make services", "start virtlogd, then libvirtd")
    backends = {}
    missing = missing_dpdk_plugins()
    if not shutil.which("dpdk-testpmd"):
        backends["embedded"] = f"unavailable: dpdk-testpmd is not installed ({setup})"
    elif missing:
        backends["embedded"] = f"unavailable: DPDK plugins missing: {', '.join(missing)} ({setup})"
    else:
        backends["embedded"] = "ready: dpdk-testpmd with net_vhost and net_virtio_user"
    if versions.get("qemu") and versions.get("libvirt") and libvirtd_running():
        backends["libvirt"] = "ready: libvirtd is running"
    elif versions.get("qemu") and versions.get("libvirt"):
        backends["libvirt"] = f"unavailable: libvirtd is not running ({services})"
    else:
        backends["libvirt"] = f"unavailable: QEMU or libvirt is not installed ({setup})"
    return backends


def gather() -> HostFacts:
    cpus = online_cpus()
    versions = {"libvirt": libvirt_version(), "qemu": qemu_version(), "dpdk": dpdk_version()}
    return HostFacts(
        cpu_model=cpu_model(),
        cpus=sorted(cpus),
        numa_nodes=numa_nodes(),
        smt_siblings=smt_siblings(cpus),
        isolated=isolated_cpus(),
        hugepages=hugepage_pools(),
        kvm=kvm_status(),
        kernel=os_platform.release(),
        versions=versions,
        backends=lab_backends(versions),
        packages=host_packages.check(),
    )
