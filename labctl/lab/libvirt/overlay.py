"""The copy-on-write overlay a user's image boots through: the user's file is never written.

``qemu-img create -f qcow2 -b IMAGE -F FORMAT OVERLAY`` (QEMU's qemu-img documentation, "backing files"):
every guest write lands in the overlay, in the lab's run directory, recorded in the ledger (kind
``overlay``) *before* qemu-img makes it, so ``labctl down`` and the crash paths remove it. The backing
format is always given (``-F``, from ``qemu-img info``), so QEMU never probes it. The overlay is handed to
QEMU's group as the lab's sockets are (:mod:`labctl.safefs`); libvirt's DAC driver labels the chain.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from labctl.errors import HypervisorError
from labctl.lab.ledger import LabState
from labctl.profile.userimage import ImageInfo
from labctl.safefs import qemu_gid, remove_stale

KIND = "overlay"


def create(state: LabState, info: ImageInfo, overlay: Path) -> Path:
    """The overlay of ``info`` at ``overlay`` (recorded first; a stale file there removed)."""
    state.record(KIND, str(overlay), backing=info.path, format=info.format)
    remove_stale(overlay)
    argv = ["qemu-img", "create", "-q", "-f", "qcow2", "-b", info.path, "-F", info.format, str(overlay)]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HypervisorError(f"qemu-img create {overlay}: {exc}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise HypervisorError(f"qemu-img create {overlay} failed: {last[:160]}")
    fd = os.open(overlay, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        gid = qemu_gid()
        if gid is not None:
            os.fchown(fd, 0, gid)
        os.fchmod(fd, 0o660)
    finally:
        os.close(fd)
    return overlay


def remove(path: str) -> None:
    """The overlay removed (a symlink planted there is unlinked, never followed); gone already is fine."""
    remove_stale(Path(path))
