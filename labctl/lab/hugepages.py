"""2 MiB hugepages for DPDK: reserve what a lab needs, mount a hugetlbfs that labctl owns, give back after."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from labctl.lab.ledger import LabState

POOL = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
PAGE_MB = 2


@dataclass(frozen=True)
class HugepageGrant:
    mount: Path
    pages: int


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 0


def free_pages() -> int:
    return _read_int(POOL / "free_hugepages")


def reserve(state: LabState, mount: Path, megabytes: int) -> HugepageGrant | None:
    """Make ``megabytes`` of 2 MiB pages free and mount a hugetlbfs at ``mount``.

    Returns None (and changes nothing that stays) when the pages cannot be had; the caller then
    runs with --no-huge. Both the pool change and the mount are recorded in ``state`` first.
    """
    if not (POOL / "nr_hugepages").exists():
        return None
    needed = -(-megabytes // PAGE_MB)
    free = free_pages()
    if free < needed:
        sysctl = POOL / "nr_hugepages"
        # record first (adding nothing yet), then what was really added: teardown gives back exactly
        # that many pages, so two labs reserving at once never restore each other's pool size
        resource = state.record("sysctl", str(sysctl), added=state.find("sysctl")[0].data.get("added", 0)
                                if state.find("sysctl") else 0)
        total = _read_int(sysctl)
        try:
            sysctl.write_text(f"{total + needed - free}\n")
        except OSError:
            return None
        state.update(resource, added=resource.data["added"] + max(_read_int(sysctl) - total, 0))
        if free_pages() < needed:
            return None
    state.record("mount", str(mount))
    mount.mkdir(parents=True, exist_ok=True)
    if not _is_mounted(mount):
        proc = subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M,mode=0700", "nodev", str(mount)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None
    return HugepageGrant(mount, needed)


def _is_mounted(path: Path) -> bool:
    import os

    return os.path.ismount(path)

