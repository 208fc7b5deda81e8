"""The EAL half of a DPDK command line, and what its memory and cores come to.

Shared by every DPDK process labctl starts (testpmd as vswitch or guest forwarder, labgen).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from labctl.errors import WorkloadError
from labctl.host.cpuset import format_cpuset, online_cpus


@dataclass
class EalOptions:
    """The EAL half of a testpmd command line."""

    file_prefix: str
    lcores: str  # DPDK --lcores syntax, e.g. "0@(0-1),1@0"
    vdevs: list[str]
    memory_mb: int = 512
    hugepages_dir: Path | None = None  # None: --no-huge
    log_levels: list[str] = field(default_factory=list)  # e.g. "lib.vhost.config:warning"

    def argv(self) -> list[str]:
        args = ["--lcores", self.lcores, "--file-prefix", self.file_prefix, "--no-pci", "-m", str(self.memory_mb),
                "--single-file-segments", *(f"--log-level={level}" for level in self.log_levels)]
        if self.hugepages_dir is None:
            args.append("--no-huge")
        else:
            args += ["--huge-dir", str(self.hugepages_dir), "--in-memory"]
        for vdev in self.vdevs:
            args += ["--vdev", vdev]
        return args


# A 2176-byte mbuf takes ~2.4 KB with its headers (measured: 2383 B each on 2 MiB pages). DPDK 22.11
# keeps mempool objects from crossing a page, so with --no-huge (4 KiB pages) each takes a page.
MBUF_BYTES = {True: 2432, False: 4096}  # by hugepages
EAL_HEADROOM_MB = 32  # rings, memzones, telemetry: ~12 MB measured besides the pool (2 ports x 4 queues)


def mbuf_budget(ports: int, queues: int, rxd: int, txd: int, hugepages: bool = False) -> tuple[int, int]:
    """(mbufs, EAL memory in MB): every ring full twice over, plus per-core caches, and the pool plus
    EAL_HEADROOM_MB and 1 MB per port and queue (per-virtqueue state). EAL memory is allocated and touched at start, so every MB more is start-up time
    (and, on hosts that hand freed memory back to their own hypervisor, the dearest part of it)."""
    mbufs = max(16384, 2 * ports * queues * (rxd + txd) + 4096)
    memory_mb = -(-mbufs * MBUF_BYTES[hugepages] // (1 << 20)) + EAL_HEADROOM_MB + ports * queues
    memory_mb += memory_mb % 2  # whole 2 MiB pages, so the pages reserved for two processes add up
    return mbufs, memory_mb


def devarg_path(path: Path) -> str:
    """A path as a DPDK devargs value: commas and '=' would split the argument, so refuse them."""
    text = str(path)
    if any(c in text for c in ",= \t\n"):
        raise WorkloadError(f"socket path {text!r} cannot be passed to DPDK (no ',', '=' or spaces allowed)")
    return text


def lcores_argument(worker_cpusets: list[frozenset[int] | None]) -> str:
    """DPDK --lcores: lcore 0 (main, mostly asleep) floats on every online CPU; workers follow the pins."""
    online = online_cpus()
    parts = [f"0@({format_cpuset(online)})"]
    for index, cpus in enumerate(worker_cpusets, start=1):
        parts.append(f"{index}@({format_cpuset(cpus or online)})")
    return ",".join(parts)
