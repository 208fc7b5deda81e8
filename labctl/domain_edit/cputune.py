"""``<cputune>``: ``<vcpupin vcpu= cpuset=>`` and ``<emulatorpin cpuset=>`` set on a domain, nothing else of
``<cputune>`` touched (libvirt "Domain XML format", CPU Tuning). A ``<cputune>`` is created after ``<vcpu>``
where there is none (libvirt writes it there). Pins are compared as CPU sets, so ``2-3`` equals ``2,3``.
"""

from __future__ import annotations

from lxml import etree

from labctl.domain_edit.changes import Changes
from labctl.domain_edit.xmlio import Document, NewElement
from labctl.errors import KnobError
from labctl.host.cpuset import format_cpuset, parse_cpuset

__all__ = ["domain_vcpus", "apply_cputune"]


def domain_vcpus(doc: Document) -> int | None:
    """The domain's maximum vCPU count (``<vcpu>N</vcpu>``); None if it has none (libvirt's default: 1)."""
    vcpu = doc.root.find("vcpu")
    if vcpu is None:
        return None
    try:
        return int((vcpu.text or "").strip())
    except ValueError:
        return None


def _same(text: str | None, want: str) -> bool:
    if not text:
        return False
    try:
        return parse_cpuset(text) == parse_cpuset(want)
    except ValueError:
        return False


def check_pins(changes: Changes, vcpus: int, host_cpus: set[int] | frozenset[int] | None) -> None:
    for index in changes.vcpupins:
        if index >= vcpus:
            raise KnobError(f"guest.pinning.vcpus.{index}: the domain has {vcpus} vCPU(s) "
                            f"(allowed: 0..{vcpus - 1})")
    if host_cpus is None:
        return
    named = [(f"guest.pinning.vcpus.{i}", c) for i, c in sorted(changes.vcpupins.items())]
    named += [(k, c) for k, c in (("guest.pinning.emulator", changes.emulatorpin),
                                  ("guest.pinning.vhost", changes.vhostpin)) if c]
    for knob, cpus in named:
        missing = parse_cpuset(cpus) - set(host_cpus)
        if missing:
            raise KnobError(f"{knob}: CPU(s) {format_cpuset(missing)} are not on this host "
                            f"(allowed: {format_cpuset(host_cpus)})")


def apply_cputune(doc: Document, changes: Changes,
                  host_cpus: set[int] | frozenset[int] | None = None) -> tuple[list[str], dict[int | str, str]]:
    """Set the asked pins; returns (lines, live pins): a line per pin set or already so, and every asked pin
    as vCPU index (or ``'emulator'``) -> cpuset, for the live part. KnobError for a vCPU index beyond the
    domain's ``<vcpu>`` or (``host_cpus`` given: a live domain) CPUs this host lacks."""
    if not changes.vcpupins and not changes.emulatorpin:
        return [], {}
    vcpus = domain_vcpus(doc) or 1
    check_pins(changes, vcpus, host_cpus)
    cputune = doc.root.find("cputune")
    lines: list[str] = []
    new: list[NewElement] = []
    last_pin: etree._Element | None = None
    pins = {int(p.get("vcpu", "-1")): p for p in (cputune.findall("vcpupin") if cputune is not None else [])
            if (p.get("vcpu") or "").isdigit()}
    if pins:
        last_pin = cputune.findall("vcpupin")[-1]
    for index, cpus in sorted(changes.vcpupins.items()):
        pin = pins.get(index)
        if pin is not None and _same(pin.get("cpuset"), cpus):
            lines.append(f"cputune: vcpupin vcpu={index} already cpuset={pin.get('cpuset')}")
        elif pin is not None:
            lines.append(f"cputune: vcpupin vcpu={index} cpuset {pin.get('cpuset')} -> {cpus}")
            doc.set_attrs(pin, [("cpuset", cpus)])
        else:
            lines.append(f"cputune: vcpupin vcpu={index} cpuset=unset -> {cpus}")
            new.append(NewElement("vcpupin", (("vcpu", str(index)), ("cpuset", cpus))))
    new_emulator = None
    if changes.emulatorpin:
        pin = cputune.find("emulatorpin") if cputune is not None else None
        if pin is not None and _same(pin.get("cpuset"), changes.emulatorpin):
            lines.append(f"cputune: emulatorpin already cpuset={pin.get('cpuset')}")
        elif pin is not None:
            lines.append(f"cputune: emulatorpin cpuset {pin.get('cpuset')} -> {changes.emulatorpin}")
            doc.set_attrs(pin, [("cpuset", changes.emulatorpin)])
        else:
            lines.append(f"cputune: emulatorpin cpuset=unset -> {changes.emulatorpin}")
            new_emulator = NewElement("emulatorpin", (("cpuset", changes.emulatorpin),))
    if cputune is None and (new or new_emulator):
        element = NewElement("cputune", (), tuple(new) + ((new_emulator,) if new_emulator else ()))
        anchor = doc.root.find("vcpu")
        if anchor is not None:
            doc.insert_after(anchor, element)
        else:
            doc.append_child(doc.root, element)
    elif cputune is not None and (new or new_emulator):
        items = new + ([new_emulator] if new_emulator else [])
        if last_pin is not None:
            for item in items:
                doc.insert_after(last_pin, item)
        else:
            doc.append_children(cputune, items)
    live: dict[int | str, str] = dict(sorted(changes.vcpupins.items()))
    if changes.emulatorpin:
        live["emulator"] = changes.emulatorpin
    return lines, live

