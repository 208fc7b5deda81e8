"""What labctl does inside a user's image guest, through its agent (:class:`~labctl.lab.libvirt.agent.GuestAgent`).

    facts:    ``uname -r``, the DPDK version (dpkg's, where the image is Debian-like)
    nics:     each virtio-net device by MAC (``/sys/class/net/*/address`` -> its ``device`` link: the PCI
              address), its negotiated rings and queues (``ethtool -g``/``-l``) read *before* binding
    dpdk:     2 MiB hugepages reserved (``/proc/sys/vm/nr_hugepages``) and hugetlbfs mounted where it is not;
              the NICs bound to ``uio_pci_generic`` (the appliance's default) or else ``vfio-pci`` in no-IOMMU
              mode, whichever the image's kernel has (Linux "vfio.rst": enable_unsafe_noiommu_mode;
              DPDK Linux GSG "Linux Drivers"), through sysfs ``driver_override`` and ``drivers_probe``
    forwarder: the image's ``dpdk-testpmd`` with the plan's arguments (EAL as the appliance's: the main lcore
              floating, worker i on vCPU i-1, ``--in-memory --iova-mode=pa``, ``-a`` per NIC), or the user's
              template filled (:mod:`labctl.profile.template`), spawned with its output in a log in the guest

Every command is an argv; the one shell script (:data:`NIC_SCRIPT`) is fixed text with nothing interpolated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from labctl.errors import AgentError, GuestForwarderError
from labctl.lab.libvirt.agent import GuestAgent
from labctl.lab.libvirt.negotiation import parse_ethtool
from labctl.lab.plan import LabPlan
from labctl.profile import template

#: one line per network device with a bus device: name, MAC, PCI address (the device link's basename), driver
NIC_SCRIPT = ('for d in /sys/class/net/*; do [ -e "$d/device" ] || continue; p=$(readlink -f "$d/device"); '
              'case "${p##*/}" in virtio*) p=${p%/*} ;; esac; '  # virtio-net: device -> virtioN, its parent is the PCI function
              'printf "%s %s %s %s\\n" "${d##*/}" "$(cat "$d/address")" "${p##*/}" '
              '"$(basename "$(readlink -f "$p/driver")")"; done')
FORWARDER_LOG = "/run/labctl-forwarder.log"
FILE_PREFIX = "labctl-fwd"
MAX_HUGEPAGES = 512  # 1 GiB of 2 MiB pages, as the appliance reserves at most
PCI = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")




def parse_nics(text: str) -> list[dict[str, str]]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and PCI.match(parts[2]):
            out.append({"ifname": parts[0], "mac": parts[1].lower(), "pci": parts[2],
                        "driver": parts[3] if len(parts) > 3 else ""})
    return out


def guest_facts(agent: GuestAgent) -> dict[str, Any]:
    facts: dict[str, Any] = {"kernel": agent.check(["uname", "-r"]).strip()}
    for package in ("dpdk-dev", "dpdk"):
        with_dpkg = agent.run(["dpkg-query", "-W", "-f=${Version}", package])
        if with_dpkg.ok and with_dpkg.out.strip():
            facts["dpdk"] = with_dpkg.out.strip()
            break
    else:
        facts["dpdk"] = None
    return facts


def read_nics(agent: GuestAgent, plan: LabPlan) -> list[dict[str, Any]]:
    """The plan's NICs as the guest's kernel driver negotiated them (the shape ``negotiation.compare_nics``
    reads), each with its PCI address; a NIC the guest does not show is left out (compare_nics says so)."""
    found = {n["mac"]: n for n in parse_nics(agent.check(["/bin/sh", "-c", NIC_SCRIPT]))}
    out = []
    for nic in plan.nics:
        dev = found.get(nic.mac)
        if dev is None:
            continue
        rings = parse_ethtool(agent.run(["ethtool", "-g", dev["ifname"]]).out)
        chans = parse_ethtool(agent.run(["ethtool", "-l", dev["ifname"]]).out)
        out.append({**dev, "rx_ring": rings["current"].get("rx"), "tx_ring": rings["current"].get("tx"),
                    "rx_ring_max": rings["max"].get("rx"), "tx_ring_max": rings["max"].get("tx"),
                    "combined": chans["current"].get("combined"), "max_combined": chans["max"].get("combined")})
    return out


def reserve_hugepages(agent: GuestAgent, memory_mib: int) -> int:
    """2 MiB pages (half the guest's memory, at most 512) and a hugetlbfs mount; the pages the kernel gave."""
    pages = min(memory_mib // 4, MAX_HUGEPAGES)
    agent.write_file("/proc/sys/vm/nr_hugepages", f"{pages}\n".encode())
    got = int(agent.read_file("/proc/sys/vm/nr_hugepages").decode().strip() or 0)
    mounts = agent.read_file("/proc/mounts").decode(errors="replace")
    if not any(line.split()[2:3] == ["hugetlbfs"] for line in mounts.splitlines()):
        agent.check(["mkdir", "-p", "/dev/hugepages"])
        agent.check(["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"])
    if got == 0:
        raise AgentError(f"{agent.name}: the guest reserved no 2 MiB hugepages (asked {pages}; guest memory "
                         f"{memory_mib} MiB)")
    return got


def load_driver(agent: GuestAgent) -> str:
    """uio_pci_generic, else vfio-pci in no-IOMMU mode: the first the image's kernel loads."""
    if agent.run(["modprobe", "uio_pci_generic"]).ok:
        return "uio_pci_generic"
    if agent.run(["modprobe", "vfio", "enable_unsafe_noiommu_mode=1"]).ok and agent.run(["modprobe", "vfio-pci"]).ok:
        try:
            agent.write_file("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode", b"1\n")
        except AgentError:
            pass  # loaded with the parameter already
        return "vfio-pci"
    raise AgentError(f"{agent.name}: the image's kernel loads neither uio_pci_generic nor vfio-pci (check: the "
                     "image has its kernel's modules, e.g. Debian's linux-image package)")


def bind(agent: GuestAgent, pcis: list[str], driver: str) -> None:
    """Each PCI device handed to ``driver`` (driver_override, unbind, drivers_probe), checked."""
    for pci in pcis:
        base = f"/sys/bus/pci/devices/{pci}"
        agent.write_file(f"{base}/driver_override", f"{driver}\n".encode())
        try:
            agent.write_file(f"{base}/driver/unbind", pci.encode())
        except AgentError:
            pass  # no driver bound
        agent.write_file("/sys/bus/pci/drivers_probe", pci.encode())
        now = agent.check(["readlink", "-f", f"{base}/driver"]).strip().rsplit("/", 1)[-1]
        if now != driver.replace("-", "_") and now != driver:
            raise AgentError(f"{agent.name}: {pci} is bound to {now or 'nothing'}, not {driver}")


@dataclass(frozen=True)
class Forwarder:
    kind: str  # testpmd | command
    argv: tuple[str, ...]


def forwarder_argv(plan: LabPlan, pcis: list[str]) -> Forwarder:
    """The trial's forwarder command: the image's testpmd with the plan's arguments, or the filled template."""
    image = plan.image
    assert image is not None
    fwd = plan.forwarder
    if image.forwarder == "command":
        assert image.command is not None
        values: dict[str, object] = {"cores": f"0-{plan.vcpus - 1}" if plan.vcpus > 1 else "0", "rxd": fwd.rxd,
                                     "txd": fwd.txd, "burst": fwd.burst, "queues": fwd.queues}
        values.update({f"pci{i}": pci for i, pci in enumerate(pcis)})
        try:
            return Forwarder("command", tuple(template.fill(image.command, values)))
        except template.TemplateProblem as exc:
            raise GuestForwarderError(f"workload.command: {exc}") from None
    lcores = ",".join([f"0@(0-{plan.vcpus - 1})"] + [f"{i}@{(i - 1) % plan.vcpus}" for i in range(1, fwd.cores + 1)])
    eal = ["--lcores", lcores, "-n", "1", "--in-memory", "--iova-mode=pa", "--file-prefix", FILE_PREFIX]
    for pci in pcis:
        eal += ["-a", pci]
    # non-interactive: forwarding starts at once and testpmd runs (printing stats) until signalled
    return Forwarder("testpmd", ("dpdk-testpmd", *eal, "--", *fwd.options(stats_period_s=5).argv()))
