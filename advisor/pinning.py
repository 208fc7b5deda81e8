"""Rules before any measurement: a pinning plan and first settings derived from the host's topology.

``pinning_plan(facts, profile)`` places, on one NUMA node:

- housekeeping: the kernel, labctl, libvirt and the DPDK main threads; on a CPU that is not isolated
  (isolated CPUs get no load balancing), preferably CPU 0's core, which takes most interrupts anyway;
- the vswitch PMD(s) (``guest.pinning.vhost``), one per CPU, each on a CPU of its own: a PMD busy-polls,
  so a PMD core is never shared with anything that wants to run;
- the vCPUs (``guest.pinning.vcpus``), one CPU each;
- the QEMU emulator thread (``guest.pinning.emulator``): with housekeeping for vhost-user NICs (the
  emulator is idle then), on a CPU of its own when a NIC uses tap or network (no /dev/vhost-net here:
  QEMU's userspace virtio backend, and any vhost-net worker, run in the emulator's placement).

Pollers (PMDs, vCPUs) prefer isolated CPUs. With SMT, every poller first gets a physical core of its
own (its siblings are left idle: a sibling's load steals the core's cycles); when there are too few
cores the plan falls back step by step, saying so in ``warnings``:

1. whole cores for housekeeping, each PMD and each vCPU;
2. vCPUs on SMT siblings of one another (PMDs keep whole cores);
3. one CPU per role, SMT siblings shared;
4. no CPU left for housekeeping (e.g. a 2-CPU host with 1 PMD + 1 vCPU): housekeeping and the
   emulator share the first PMD's CPU, the lowest one (CPU 0 runs most kernel work anyway). This is
   a warning, not a failure: the PMD will be preempted now and then, which shows up as noise (the
   two bands seen on the 2-CPU development host).

What cannot be planned raises :class:`labctl.errors.PlanError` with one line naming what is missing:
fewer CPUs on every NUMA node than PMDs + vCPUs (a PMD core is never shared, and a plan never splits the
guest and the vswitch across nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from labctl import platform
from labctl.host.cpuset import format_cpuset
from labctl.errors import PlanError
from labctl.host.facts import HostFacts
from labctl.profile.knobs import with_knobs
from labctl.profile.schema import Profile
from labctl.lab.plan import derive

__all__ = ["Setting", "PinningPlan", "pinning_plan", "apply_plan", "HUGEPAGE_2M_KIB"]

HUGEPAGE_2M_KIB = 2048
MAX_RING = max(platform.RING_SIZES)
TX_RING_CAP = platform.TX_RING_CAP


@dataclass(frozen=True)
class Setting:
    """A first setting to try: knob path, value, and the reason a performance engineer would give."""

    knob: str
    value: Any
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"knob": self.knob, "value": self.value, "reason": self.reason}


@dataclass
class PinningPlan:
    """A pinning plan on NUMA node ``node`` with the first settings to try."""

    node: int
    housekeeping: list[int]
    pmd: list[int]
    vcpus: list[int]  # vcpus[i]: the host CPU of vCPU i
    emulator: list[int]
    idle: list[int] = field(default_factory=list)  # SMT siblings left idle on purpose
    level: int = 1  # the fallback step used (see the module docstring)
    hugepages: str = ""
    settings: list[Setting] = field(default_factory=list)
    sweep: dict[str, list[Any]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # role -> why these CPUs
    warnings: list[str] = field(default_factory=list)

    def knobs(self) -> dict[str, Any]:
        """Knob path -> value of every setting, for :func:`labctl.profile.knobs.with_knobs`."""
        return {s.knob: s.value for s in self.settings}

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "housekeeping": format_cpuset(self.housekeeping),
            "vswitch_pmd": format_cpuset(self.pmd) if self.pmd else None,
            "vcpus": {str(i): str(cpu) for i, cpu in enumerate(self.vcpus)},
            "emulator": format_cpuset(self.emulator),
            "idle": format_cpuset(self.idle) if self.idle else None,
            "hugepages": self.hugepages,
            "settings": [s.to_dict() for s in self.settings],
            "sweep": self.sweep,
            "reasons": dict(self.reasons),
            "warnings": list(self.warnings),
        }

    def format(self) -> str:
        lines = [f"NUMA node {self.node}:"]
        lines.append(f"  housekeeping  {format_cpuset(self.housekeeping):<8} {self.reasons.get('housekeeping', '')}")
        if self.pmd:
            lines.append(f"  vswitch PMD   {format_cpuset(self.pmd):<8} {self.reasons.get('pmd', '')}")
        for i, cpu in enumerate(self.vcpus):
            lines.append(f"  vCPU {i:<8} {cpu:<8} {self.reasons.get('vcpus', '') if i == 0 else ''}".rstrip())
        lines.append(f"  emulator      {format_cpuset(self.emulator):<8} {self.reasons.get('emulator', '')}")
        if self.idle:
            lines.append(f"  idle          {format_cpuset(self.idle):<8} {self.reasons.get('idle', '')}")
        lines.append(f"hugepages: {self.hugepages}")
        lines.append("first settings:")
        for s in self.settings:
            lines.append(f"  {s.knob} = {s.value}: {s.reason}")
        if self.sweep:
            lines.append("then sweep: " + ", ".join(f"{k}: {v}" for k, v in self.sweep.items()))
        for w in self.warnings:
            lines.append(f"warning: {w}")
        return "\n".join(lines)


def _cores(cpus: list[int], facts: HostFacts) -> list[list[int]]:
    """Physical cores among ``cpus`` (lists of SMT threads), ordered by their first CPU."""
    seen: dict[int, list[int]] = {}
    allowed = set(cpus)
    for cpu in sorted(cpus):
        siblings = [s for s in facts.smt_siblings.get(cpu, [cpu]) if s in allowed] or [cpu]
        seen.setdefault(min(siblings), sorted(set(siblings)))
    return [seen[k] for k in sorted(seen)]


def _needs(profile: Profile) -> tuple[int, int, bool]:
    """(vswitch PMDs, vCPUs, whether the emulator carries a userspace backend)."""
    backends = {nic.backend for nic in profile.guest.nics}
    pmds = 0
    if "vhostuser" in backends:
        pin = profile.guest.pinning.vhost
        pmds = 1
        if pin:
            from labctl.host.cpuset import parse_cpuset

            try:
                pmds = len(parse_cpuset(pin))
            except ValueError:
                pmds = 1
    return pmds, profile.guest.vcpus, bool(backends - {"vhostuser"})


def _pick_node(facts: HostFacts, need: int) -> int:
    online = set(facts.cpus)
    isolated = set(facts.isolated)
    nodes = {n: sorted(set(c) & online) for n, c in facts.numa_nodes.items()} or {0: sorted(online)}
    fitting = [n for n, c in nodes.items() if len(c) >= need]
    if not fitting:
        detail = ", ".join(f"node {n} has {len(c)}" + (f" ({format_cpuset(c)})" if c else "")
                           for n, c in sorted(nodes.items()))
        raise PlanError(detail)
    # most isolated CPUs, then room for a housekeeping core, then the node of CPU 0, then the lowest id
    return min(fitting, key=lambda n: (-len(set(nodes[n]) & isolated), len(nodes[n]) < need + 1,
                                       0 not in nodes[n], n))


def pinning_plan(facts: HostFacts, profile: Profile, *, pmd_cores: int | None = None) -> PinningPlan:
    """Derive a pinning plan and first settings for ``profile`` on the host described by ``facts``.

    ``pmd_cores``: vswitch PMDs to place (default: the CPUs of ``guest.pinning.vhost``, else 1; 0 when
    no NIC uses vhost-user). Raises PlanError when no NUMA node has a CPU for every PMD and vCPU."""
    pmds, vcpus, userspace_backend = _needs(profile)
    if pmd_cores is not None and pmds:
        if pmd_cores < 1:
            raise PlanError(f"pmd cores {pmd_cores}: a vhost-user NIC needs at least 1 vswitch PMD")
        pmds = pmd_cores
    need = pmds + vcpus
    what = " + ".join(x for x in (f"{pmds} vswitch PMD{'s' * (pmds > 1)}" if pmds else "",
                                  f"{vcpus} vCPU{'s' * (vcpus > 1)}") if x)
    if not facts.cpus:
        raise PlanError("the host reports no online CPUs")
    try:
        node = _pick_node(facts, need)
    except PlanError as exc:
        total = len(facts.cpus)
        across = "; a plan never splits the guest and the vswitch across NUMA nodes" if total >= need else ""
        raise PlanError(f"needs {need} CPUs on one NUMA node for {what} (a PMD core is never shared; "
                        f"{need + 1} with a housekeeping CPU): {exc}{across}") from None
    online = set(facts.cpus)
    node_cpus = sorted(set(facts.numa_nodes.get(node, facts.cpus)) & online)
    isolated = set(facts.isolated)
    cores = _cores(node_cpus, facts)
    smt = any(len(c) > 1 for c in cores)

    plan = None
    for level in (1, 2, 3, 4):
        plan = _allocate(level, cores, node_cpus, isolated, pmds, vcpus, userspace_backend)
        if plan is not None:
            plan.node = node
            break
    assert plan is not None  # level 4 always fits once the node has `need` CPUs

    _explain(plan, facts, profile, node, isolated, smt, pmds, userspace_backend)
    plan.hugepages = _hugepage_advice(facts, profile, pmds, plan)
    plan.settings = _settings(plan, profile, pmds, vcpus)
    plan.sweep = _first_sweep(profile, vcpus)
    return plan


def _poller_order(cpus: list[int], isolated: set[int]) -> list[int]:
    return sorted(cpus, key=lambda c: (c not in isolated, c))


def _allocate(level: int, cores: list[list[int]], node_cpus: list[int], isolated: set[int], pmds: int,
              vcpus: int, userspace_backend: bool) -> PinningPlan | None:
    """One fallback step of the placement; None when it does not fit."""
    hk_core = next((c for c in cores if 0 in c), None) or \
        next((c for c in cores if any(x not in isolated for x in c)), cores[0])
    idle: list[int] = []
    if level in (1, 2):
        rest = [c for c in cores if c is not hk_core]
        rest.sort(key=lambda c: (not all(x in isolated for x in c), c[0]))
        if len(rest) < pmds:
            return None
        pmd_cores, rest = rest[:pmds], rest[pmds:]
        pmd = [c[0] for c in pmd_cores]
        idle += [x for c in pmd_cores for x in c[1:]]
        if level == 1:
            if len(rest) < vcpus:
                return None
            vcpu_cores, rest = rest[:vcpus], rest[vcpus:]
            vcpu = [c[0] for c in vcpu_cores]
            idle += [x for c in vcpu_cores for x in c[1:]]
        else:
            threads = [x for c in rest for x in c]
            if len(threads) < vcpus:
                return None
            vcpu = threads[:vcpus]
            used_cores = [c for c in rest if any(x in vcpu for x in c)]
            idle += [x for c in used_cores for x in c if x not in vcpu]
            rest = [c for c in rest if c not in used_cores]
        housekeeping = [x for x in hk_core if x not in isolated] or list(hk_core)
        emulator = list(housekeeping)
        if userspace_backend and rest:
            emulator = [rest[0][0]]
        return PinningPlan(node=0, housekeeping=housekeeping, pmd=pmd, vcpus=vcpu, emulator=emulator,
                    idle=sorted(idle), level=level)
    if level == 3:
        hk = next((x for x in hk_core if x not in isolated), hk_core[0])
        others = _poller_order([x for x in node_cpus if x != hk], isolated)
        if len(others) < pmds + vcpus:
            return None
        # a PMD prefers a CPU whose siblings stay free of pollers: take PMDs from the front
        pmd, vcpu = others[:pmds], others[pmds:pmds + vcpus]
        spare = others[pmds + vcpus:]
        emulator = [spare[0]] if userspace_backend and spare else [hk]
        return PinningPlan(node=0, housekeeping=[hk], pmd=pmd, vcpus=vcpu, emulator=emulator, level=3)
    ordered = sorted(node_cpus)
    pmd = ordered[:pmds]
    vcpu = ordered[pmds:pmds + vcpus]
    first = pmd[:1] or vcpu[:1]
    return PinningPlan(node=0, housekeeping=list(first), pmd=pmd, vcpus=vcpu, emulator=list(first), level=4)


def _explain(plan: PinningPlan, facts: HostFacts, profile: Profile, node: int, isolated: set[int], smt: bool,
             pmds: int, userspace_backend: bool) -> None:
    iso = lambda cpus: [c for c in cpus if c in isolated]  # noqa: E731
    plan.reasons["housekeeping"] = (
        "not isolated: the kernel, libvirt, labctl and the DPDK main threads run here"
        + ("; CPU 0 takes most interrupts anyway" if 0 in plan.housekeeping else ""))
    if plan.pmd:
        plan.reasons["pmd"] = ("busy-polls the vhost-user rings: a CPU of its own, never shared"
                               + ("; isolated" if iso(plan.pmd) == plan.pmd and plan.pmd else ""))
    plan.reasons["vcpus"] = (f"one CPU per vCPU on node {node}"
                             + (", apart from the PMD (a guest DPDK forwarder polls too)" if plan.pmd else ""))
    if userspace_backend and plan.emulator != plan.housekeeping:
        plan.reasons["emulator"] = ("a CPU of its own: with tap/network NICs QEMU's userspace virtio backend "
                                    "(and any vhost-net worker) runs where the emulator is pinned")
    elif userspace_backend:
        plan.reasons["emulator"] = "with housekeeping: no spare CPU for the tap/network backend (see warnings)"
    else:
        plan.reasons["emulator"] = "with housekeeping: the emulator thread is idle when the NICs are vhost-user"
    if plan.idle:
        plan.reasons["idle"] = "SMT siblings of poller cores, left idle: a busy sibling steals the core's cycles"

    if plan.level == 2:
        plan.warnings.append("too few physical cores for one per vCPU: vCPUs share cores as SMT siblings "
                             "(each gets about 60% of a core when both poll)")
    if plan.level == 3 and smt:
        plan.warnings.append("too few physical cores: pollers run on SMT siblings of one another or of "
                             "housekeeping; expect lower and noisier rates")
    if plan.level == 4:
        plan.warnings.append(
            f"{len(facts.numa_nodes.get(node, facts.cpus))} CPUs on node {node}: no CPU is left for housekeeping; "
            f"the kernel, the emulator and the DPDK main threads share CPU {format_cpuset(plan.housekeeping)} with "
            f"the {'vswitch PMD' if plan.pmd else 'first vCPU'}: expect scheduler noise (two-band results); "
            "a host with one more CPU on this node gets a housekeeping CPU of its own")
    if userspace_backend and plan.emulator == plan.housekeeping:
        plan.warnings.append("no spare CPU for the emulator: the userspace virtio backend of the tap/network "
                             "NICs shares housekeeping's CPU")
    pollers = plan.pmd + plan.vcpus
    not_isolated = [c for c in pollers if c not in isolated]
    if facts.isolated and not_isolated:
        plan.warnings.append(f"pollers on CPUs that are not isolated ({format_cpuset(not_isolated)}): the "
                             "scheduler may run other tasks there")
    candidates = [c for c in pollers + (plan.emulator if plan.emulator != plan.housekeeping else [])
                  if c not in plan.housekeeping]
    if not facts.isolated and candidates:
        cpus = format_cpuset(candidates)
        plan.warnings.append(f"no isolated CPUs: for steadier rates boot with isolcpus=managed_irq,domain,{cpus} "
                             f"nohz_full={cpus} rcu_nocbs={cpus}")
    other_nodes = [n for n in facts.numa_nodes if n != node]
    if other_nodes:
        plan.warnings.append(f"everything on NUMA node {node}: allocate the guest's and the vswitch's memory there "
                             f"too (numactl --membind={node}, or hugepages reserved on node {node})")


def _hugepage_advice(facts: HostFacts, profile: Profile, pmds: int, plan: PinningPlan) -> str:
    lab = derive(profile)  # the memory the lab's processes will ask for
    vswitch_mb = lab.vswitch.memory_mb(False) if pmds else 0
    if profile.backend == "embedded":
        guest_mb = lab.forwarder.memory_mb(False)
        what = "the guest forwarder"
    else:
        guest_mb = profile.guest.memory_mib
        what = "guest memory"
    need_mib = vswitch_mb + guest_mb
    free_2m = sum(p.free for p in facts.hugepages if p.size_kib == HUGEPAGE_2M_KIB) * 2
    free_1g = sum(p.free for p in facts.hugepages if p.size_kib == 1024 * 1024) * 1024
    pages = math.ceil(need_mib / 2)
    parts = [f"{need_mib} MiB ({what} {guest_mb} + vswitch {vswitch_mb})"]
    if free_2m + free_1g >= need_mib:
        parts.append(f"available: {free_2m} MiB free in 2 MiB pages, {free_1g} MiB in 1 GiB pages")
    else:
        parts.append(f"only {free_2m + free_1g} MiB free: reserve {pages} x 2 MiB pages on node {plan.node} "
                     f"(echo {pages} > /sys/devices/system/node/node{plan.node}/hugepages/hugepages-2048kB/"
                     "nr_hugepages)")
        if profile.backend == "embedded":
            parts.append("the embedded lab reserves and releases them itself per trial")
    return "; ".join(parts)


def _settings(plan: PinningPlan, profile: Profile, pmds: int, vcpus: int) -> list[Setting]:
    out: list[Setting] = []
    if plan.pmd:
        out.append(Setting("guest.pinning.vhost", format_cpuset(plan.pmd), plan.reasons["pmd"]))
    for i, cpu in enumerate(plan.vcpus):
        out.append(Setting(f"guest.pinning.vcpus.{i}", str(cpu), f"vCPU {i}: " + plan.reasons["vcpus"]))
    if profile.backend == "libvirt":
        out.append(Setting("guest.pinning.emulator", format_cpuset(plan.emulator), plan.reasons["emulator"]))
    queues = max(1, min(vcpus, 256))
    out.append(Setting("guest.nics.*.queues", queues,
                       f"one queue pair per vCPU ({vcpus}): each forwarding core polls its own queue, and a "
                       "kernel guest enables only min(queues, vCPUs)"))
    out.append(Setting("guest.nics.*.rx_queue_size", MAX_RING,
                       f"the largest ring QEMU accepts ({MAX_RING}): it absorbs bursts while a poller is preempted; "
                       "ring-full drops (TX-dropped on the vswitch) are the first losses at 256"))
    for i, nic in enumerate(profile.guest.nics):
        if nic.backend == "vhostuser":
            out.append(Setting(f"guest.nics.{i}.tx_queue_size", MAX_RING,
                               f"vhost-user allows a {MAX_RING}-entry tx ring: fewer ring-full drops from the guest"))
        else:
            out.append(Setting(f"guest.nics.{i}.tx_queue_size", TX_RING_CAP,
                               f"backend {nic.backend}: QEMU caps tx_queue_size at {TX_RING_CAP} unless the backend "
                               "is vhost-user"))
    out.append(Setting("workload.rxd", MAX_RING, "virtio PMDs cap descriptors at the ring size: match the ring"))
    out.append(Setting("workload.txd", MAX_RING, "virtio PMDs cap descriptors at the ring size: match the ring"))
    out.append(Setting("workload.burst", 32, "DPDK's default and vhost's dequeue batch; try 64 once the PMD is "
                                             "saturated (cycles per packet rising)"))
    out.append(Setting("guest.hugepages", True, "2 MiB pages cut TLB misses on packet buffers; vhost-user needs "
                                                "shared memory either way (memfd without hugepages)"))
    return out


def _first_sweep(profile: Profile, vcpus: int) -> dict[str, list[Any]]:
    sweep: dict[str, list[Any]] = {"guest.nics.*.rx_queue_size": [256, MAX_RING], "workload.burst": [32, 64]}
    if vcpus > 1:
        sweep["guest.nics.*.queues"] = [1, vcpus]
    return sweep


def apply_plan(profile_data: dict[str, Any], plan: PinningPlan) -> dict[str, Any]:
    """``profile_data`` (a validated profile's ``model_dump()``) with the plan's settings applied."""
    full = Profile.model_validate(profile_data).model_dump()
    full["guest"]["pinning"]["vcpus"] = {}
    return with_knobs(full, plan.knobs())
