"""How a run orders and repeats its trials."""

from __future__ import annotations

from typing import Iterator

from labctl.errors import Problem
from labctl.profile.rules.registry import err, out_of_range, rule, warn
from labctl.profile.schema import Profile


@rule("order", "A random order within each repeat is seeded, so the run can say how to reproduce it.",
      "labctl sweep ordering (Python random.Random(seed))")
def _order(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.seed is not None and p.order != "random":
        yield warn("seed", f"seed has no effect with order {p.order} (it applies to order random)")
    if p.seed is not None:
        yield from out_of_range("seed", p.seed, 0, 2**32 - 1)


@rule("repeat", "Repeats give the noise estimate every comparison needs; more than 100 is a typo.",
      "labctl report statistics")
def _repeat(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from out_of_range("repeat", p.repeat, 1, 100)


@rule("swap", "A guest's NIC settings (model, queues, rings) change on the running guest by PCI hot-plug: the NICs "
      "are unplugged and plugged again with the new settings, in seconds where a boot takes a minute; a guest or "
      "host that refuses boots instead, and says so. It is how a run reaches its configurations, not a knob: "
      "each record says which it was.",
      "libvirt virDomainDetachDeviceFlags/virDomainAttachDeviceFlags (VIR_DOMAIN_AFFECT_LIVE, "
      "VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED); ACPI PCI hot-plug of QEMU's pc machine")
def _swap(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if "swap" in p.sweep:
        yield err("sweep.swap", "swap is how a run reaches its configurations, not a knob to sweep (allowed: "
                  "swap: hotplug or boot in the profile, or --swap)")
    if p.backend == "embedded" and p.swap != "hotplug":
        yield warn("swap", f"swap {p.swap} has no effect on the embedded backend (its processes start for every "
                   "trial; allowed to matter: backend libvirt)")
