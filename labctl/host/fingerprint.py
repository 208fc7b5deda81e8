"""The environment fingerprint recorded with every trial.

``env.host`` is the kernel's hostname, or ``$LABCTL_HOST`` when that is set: the fleet playbooks set it to
the inventory hostname, so trials from many hosts (or from test hosts that share one kernel) keep the
name the operator gave each host.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache

from labctl.host.facts import cpu_model, dpdk_version, kvm_status, libvirt_version, qemu_version
from labctl.results.record import Environment
from labctl.host.cpuset import online_cpus


@lru_cache(maxsize=1)
def _static() -> dict:
    import platform

    return {"host": socket.gethostname(), "cpu_model": cpu_model(), "cores": len(online_cpus()),
            "kernel": platform.release(), "qemu": qemu_version(), "libvirt": libvirt_version(),
            "dpdk": dpdk_version()}


def fingerprint(lab: str, pins: dict, shared_cores: bool, hugepages: bool, accel: str | None = None,
                binaries: dict | None = None, image: dict | None = None) -> Environment:
    """``binaries``: role -> {path, sha256, version, build} of every program the lab ran
    (``labctl.lab.builds``), the record's ``env.binaries``; ``image``: a user's image guest (``env.image``)."""
    if accel is None:
        accel = "none" if lab == "embedded" else kvm_status().accel
    static = _static()
    if os.environ.get("LABCTL_HOST"):
        static = {**static, "host": os.environ["LABCTL_HOST"]}
    return Environment(**static, accel=accel, lab=lab, pins=pins, shared_cores=shared_cores,
                       hugepages=hugepages, binaries=binaries or {}, image=image or {})


def cpu_hz() -> float | None:
    """Nominal CPU clock from /proc/cpuinfo (for cycles-per-packet estimates)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("cpu MHz"):
                    return float(line.split(":", 1)[1]) * 1e6
    except (OSError, ValueError):
        pass
    return None
