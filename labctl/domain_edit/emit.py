"""The same change set in the forms other tools deploy (``labctl advise --emit FORM``): a libvirt XML
fragment, OpenStack Nova settings, a KubeVirt VMI fragment and Ansible vars for the ``labctl_apply`` role.

A form that cannot express a setting says so in a comment line (``# not expressible in ...``); nothing is
dropped silently. Sources, by public name:

- libvirt "Domain XML format": ``<interface><driver queues rx_queue_size tx_queue_size>``, ``<cputune>``
  ``vcpupin``/``emulatorpin``, ``<memoryBacking><hugepages><page>``;
- OpenStack Nova "Configuration Reference" (``[libvirt] rx_queue_size``, ``tx_queue_size``: host-wide, for
  vhost/vhost-user interfaces, tx for vhost-user only) and "Flavors" extra specs (``hw:vif_multiqueue_enabled``:
  as many queues as the flavor's vCPUs; ``hw:cpu_policy``, ``hw:emulator_threads_policy``, ``hw:mem_page_size``);
- KubeVirt user guide: "Interfaces and Networks" (``networkInterfaceMultiqueue``: queues = vCPUs),
  "Dedicated CPU resources" (``dedicatedCpuPlacement``, ``isolateEmulatorThread``), "Hugepages support"
  (``memory.hugepages.pageSize``).
"""

from __future__ import annotations

from typing import Callable

import yaml
from lxml import etree

from labctl.domain_edit.changes import ALL, Changes
from labctl.errors import UserError

__all__ = ["FORMS", "emit"]


def _nic_values(changes: Changes) -> dict[str, set[int]]:
    values: dict[str, set[int]] = {}
    for change in changes.nics.values():
        for name, value in change.items():
            values.setdefault(name, set()).add(value)
    return values


def _address(key: int | str) -> str:
    if key == ALL:
        return "every virtio <interface>"
    return f"<interface> {key}" if isinstance(key, int) else f"the <interface> with MAC {key}"


def _page_text(kib: int, style: str) -> str:
    if style == "nova":
        return {2048: "2MB", 1048576: "1GB"}.get(kib, f"{kib}KB")
    return {2048: "2Mi", 1048576: "1Gi"}.get(kib, f"{kib}Ki")


def emit_libvirt(changes: Changes) -> str:
    """The libvirt XML fragment: a ``<driver>`` per addressed interface, ``<cputune>``, ``<memoryBacking>``."""
    parts: list[str] = ["<!-- labctl apply: the fragments of a libvirt domain (Domain XML format) -->"]
    for key, change in changes.nics.items():
        if not change.items():
            continue
        driver = etree.Element("driver")
        for name, value in change.items():
            driver.set(name, str(value))
        parts.append(etree.tostring(etree.Comment(f" {_address(key)}: inside <interface> ")).decode())
        parts.append(etree.tostring(driver).decode())
    if changes.vcpupins or changes.emulatorpin:
        cputune = etree.Element("cputune")
        for vcpu, cpus in sorted(changes.vcpupins.items()):
            etree.SubElement(cputune, "vcpupin", vcpu=str(vcpu), cpuset=cpus)
        if changes.emulatorpin:
            etree.SubElement(cputune, "emulatorpin", cpuset=changes.emulatorpin)
        parts.append(etree.tostring(cputune, pretty_print=True).decode().rstrip())
    if changes.hugepages is not None:
        backing = etree.Element("memoryBacking")
        pages = etree.SubElement(backing, "hugepages")
        if changes.hugepages.page_size_kib:
            etree.SubElement(pages, "page", size=str(changes.hugepages.page_size_kib), unit="KiB")
        parts.append(etree.tostring(backing, pretty_print=True).decode().rstrip())
    if changes.vhostpin:
        parts.append(f"<!-- not expressible in libvirt XML: vhost pin {changes.vhostpin} (labctl apply DOMAIN installs "
                     "a qemu hook for it) -->")
    return "\n".join(parts) + "\n"


def emit_nova(changes: Changes) -> str:
    """nova.conf ``[libvirt]`` ring sizes and flavor extra specs, with what Nova cannot express."""
    values = _nic_values(changes)
    missing: list[str] = []
    conf: list[str] = []
    for name in ("rx_queue_size", "tx_queue_size"):
        found = sorted(values.get(name, ()))
        if found:
            conf.append(f"{name} = {found[-1]}")
            if len(found) > 1 or any(k != ALL and change.items() for k, change in changes.nics.items()
                                     if getattr(change, name) is not None):
                missing.append(f"{name} per port ({', '.join(map(str, found))}): nova.conf sets one value for every "
                               "port of the host")
    if "tx_queue_size" in values:
        missing.append("tx_queue_size applies to vhost-user ports only (Nova configuration reference)")
    specs: list[str] = []
    queues = sorted(values.get("queues", ()))
    if queues:
        specs.append(f"hw:vif_multiqueue_enabled={'true' if queues[-1] > 1 else 'false'}")
        missing.append(f"queues {', '.join(map(str, queues))}: Nova has no per-port queue count; with multiqueue on, "
                       "a port gets as many queues as the flavor has vCPUs")
    if changes.vcpupins or changes.emulatorpin:
        specs.append("hw:cpu_policy=dedicated")
        missing.append("the vCPU cpusets (" + ", ".join(f"{v}={c}" for v, c in sorted(changes.vcpupins.items()))
                       + "): Nova's scheduler picks the host CPUs of a dedicated instance")
    if changes.emulatorpin:
        specs.append("hw:emulator_threads_policy=isolate")
        missing.append(f"emulator cpuset {changes.emulatorpin}: Nova places the emulator threads itself "
                       "(isolate: a CPU of their own; share: [compute] cpu_shared_set)")
    if changes.hugepages is not None:
        size = changes.hugepages.page_size_kib
        specs.append(f"hw:mem_page_size={_page_text(size, 'nova') if size else 'large'}")
    if changes.vhostpin:
        missing.append(f"vhost pin {changes.vhostpin}: Nova has no setting for it")
    out = ["# nova.conf on each compute host (Nova configuration reference, [libvirt])"]
    out += ["[libvirt]"] + conf if conf else ["# (no [libvirt] ring size asked)"]
    out.append("")
    out.append("# flavor extra specs (Nova flavors: extra specs)")
    out += ["openstack flavor set FLAVOR " + " ".join(f"--property {s}" for s in specs)] if specs else \
        ["# (no extra spec asked)"]
    out += [f"# not expressible in Nova: {m}" for m in missing]
    return "\n".join(out) + "\n"


def emit_kubevirt(changes: Changes) -> str:
    """A KubeVirt VirtualMachineInstance fragment (``spec.domain``), with what KubeVirt cannot express."""
    values = _nic_values(changes)
    domain: dict = {}
    missing: list[str] = []
    queues = sorted(values.get("queues", ()))
    if queues:
        domain.setdefault("devices", {})["networkInterfaceMultiqueue"] = queues[-1] > 1
        missing.append(f"queues {', '.join(map(str, queues))}: with networkInterfaceMultiqueue a virtio interface "
                       "gets as many queues as the VMI has vCPUs")
    for name in ("rx_queue_size", "tx_queue_size"):
        if name in values:
            missing.append(f"{name} {', '.join(map(str, sorted(values[name])))}: KubeVirt has no ring size setting")
    if changes.vcpupins or changes.emulatorpin:
        domain.setdefault("cpu", {})["dedicatedCpuPlacement"] = True
        missing.append("the vCPU cpusets: the kubelet's CPU manager picks the CPUs of dedicated placement")
    if changes.emulatorpin:
        domain["cpu"]["isolateEmulatorThread"] = True
        missing.append(f"emulator cpuset {changes.emulatorpin}: isolateEmulatorThread gives it one more dedicated CPU")
    if changes.hugepages is not None:
        size = changes.hugepages.page_size_kib or 2048
        domain["memory"] = {"hugepages": {"pageSize": _page_text(size, "kubevirt")}}
        if not changes.hugepages.page_size_kib:
            missing.append("a default hugepage size: KubeVirt needs one, 2Mi written")
    if changes.vhostpin:
        missing.append(f"vhost pin {changes.vhostpin}: KubeVirt has no setting for it")
    head = ["# KubeVirt VirtualMachineInstance fragment (KubeVirt user guide: interfaces and networks, dedicated "
            "CPU resources, hugepages)"]
    head += [f"# not expressible in KubeVirt: {m}" for m in missing]
    body = yaml.safe_dump({"spec": {"domain": domain}}, sort_keys=False, default_flow_style=False)
    return "\n".join(head) + "\n" + body


def emit_ansible(changes: Changes) -> str:
    """Vars for the ``labctl_apply`` role (playbooks/apply.yml): the domains to name and the knobs."""
    data = {"labctl_apply_domains": [], "labctl_apply_set": changes.knobs()}
    head = ["# vars for the labctl_apply role (playbooks/apply.yml): every host runs labctl apply DOMAIN --set ...",
            "# name the domains in labctl_apply_domains"]
    if any(isinstance(k, str) and k != ALL for k in changes.nics):
        head.append("# not expressible as shared vars: --nic MAC (one domain's MAC); written as guest.nics.*")
    return "\n".join(head) + "\n" + yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


FORMS: dict[str, Callable[[Changes], str]] = {"libvirt": emit_libvirt, "nova": emit_nova, "kubevirt": emit_kubevirt,
                                              "ansible": emit_ansible}


def emit(form: str, changes: Changes, notes: list[str] | None = None) -> str:
    """``changes`` in ``form`` (libvirt, nova, kubevirt, ansible); ``notes`` (what the advice left out) are
    added as comment lines. UserError naming ``--emit`` and the allowed forms for any other form."""
    if form not in FORMS:
        raise UserError(f"--emit {form}: not a form labctl writes (allowed: {', '.join(FORMS)})")
    text = FORMS[form](changes)
    mark = "<!-- {} -->" if form == "libvirt" else "# {}"
    return text + "".join(mark.format(n.replace("--", "- -")) + "\n" for n in notes or [])

