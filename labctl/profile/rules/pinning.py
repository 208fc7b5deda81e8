"""CPU pinning: vCPU, emulator and vhost pins on online host CPUs, and busy pollers sharing one."""

from __future__ import annotations

from typing import Iterator

from labctl.errors import Problem
from labctl.host.cpuset import parse_cpuset
from labctl.profile.rules.registry import err, rule, warn
from labctl.profile.schema import Profile


@rule("pinning", "vcpupin names a vCPU of this guest, and every pinned cpuset must name online host CPUs, "
      "or libvirt refuses to start the domain.", "libvirt formatdomain.html#cpu-tuning")
def _pinning(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    pin = p.guest.pinning
    entries: list[tuple[str, str]] = [(f"guest.pinning.vcpus.{k}", v) for k, v in pin.vcpus.items()]
    for index in pin.vcpus:
        if not 0 <= index < p.guest.vcpus:
            yield err(f"guest.pinning.vcpus.{index}",
                       f"vCPU {index} does not exist (allowed: 0..{p.guest.vcpus - 1})")
    for field in ("emulator", "vhost"):
        value = getattr(pin, field)
        if value is not None:
            entries.append((f"guest.pinning.{field}", value))
    online = ",".join(map(str, sorted(cpus)))
    for path, text in entries:
        try:
            chosen = parse_cpuset(text)
        except ValueError as exc:
            yield err(path, str(exc))
            continue
        missing = sorted(chosen - cpus)
        if missing:
            yield err(path, f"host CPU {','.join(map(str, missing))} is not online (allowed: {online})")


@rule("shared-poller", "A vswitch PMD core and a vCPU that polls (DPDK in the guest) on the same host CPU "
      "take turns instead of running: the measured rate then reflects the scheduler, not virtio.",
      "DPDK PMD busy polling; OVS-DPDK pmd-cpu-mask guidance")
def _shared_poller(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    pin = p.guest.pinning
    if pin.vhost is None or not pin.vcpus or p.workload.kind != "forward":
        return
    try:
        pmd = parse_cpuset(pin.vhost)
        shared = set()
        for text in pin.vcpus.values():
            shared |= pmd & parse_cpuset(text)
    except ValueError:
        return  # reported by the pinning rule
    if shared:
        yield warn("guest.pinning.vhost", f"host CPU {','.join(map(str, sorted(shared)))} runs both a vswitch PMD "
                                           "and a guest vCPU: two busy pollers share a core")
