"""``apply_changes``: a change set applied to a domain's XML text, with the diff and one line per
interface, pin and memory change (or why not).

Only ``<interface><driver>``'s ``queues``/``rx_queue_size``/``tx_queue_size``, ``<cputune>``'s
``vcpupin``/``emulatorpin`` and ``<memoryBacking><hugepages>`` change; everything else is the original
text (:mod:`labctl.domain_edit.xmlio`). Applying the same changes to the result changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labctl.domain_edit.changes import Changes
from labctl.domain_edit.cputune import apply_cputune, check_pins, domain_vcpus
from labctl.domain_edit.diffs import unified
from labctl.domain_edit.memory import apply_hugepages
from labctl.domain_edit.nics import apply_nics
from labctl.domain_edit.xmlio import parse_domain

__all__ = ["EditResult", "apply_changes"]


@dataclass
class EditResult:
    """What :func:`apply_changes` did.

    ``xml``: the new domain XML (the input itself when nothing changed); ``diff``: unified diff, empty when
    nothing changed; ``lines``: one per interface (changed, already so, skipped and why, not selected) and
    per cputune/memoryBacking change; ``changed``; ``restart_needed``: what takes effect only when the
    domain next starts; ``live_pins``: every asked pin, vCPU index or ``'emulator'`` (and ``'vhost'``) ->
    cpuset, for the live part to apply to a running domain (``pinVcpu``, ``pinEmulator``, the hook)."""

    xml: str
    diff: str
    lines: list[str] = field(default_factory=list)
    changed: bool = False
    restart_needed: list[str] = field(default_factory=list)
    live_pins: dict[Any, str] = field(default_factory=dict)


def apply_changes(xml_text: str, changes: Changes, host_cpus: set[int] | frozenset[int] | None = None,
                  source: str = "domain XML") -> EditResult:
    """Apply ``changes`` to ``xml_text``. ``host_cpus`` (live domains): pins naming CPUs outside it are
    refused. Raises DomainXmlError (bad XML, not a domain, entities) or KnobError (an interface index or
    MAC the domain lacks, a vCPU index beyond its ``<vcpu>``, CPUs the host lacks): one line, exit 2,
    before anything is written."""
    doc = parse_domain(xml_text, source)
    vcpus = domain_vcpus(doc)
    lines: list[str] = []
    restart: list[str] = []
    for outcome in apply_nics(doc, changes, vcpus) if changes.nics else []:
        lines.append(outcome.line())
        if outcome.set:
            restart.append(f"{outcome.label()}: {', '.join(n for n, _, _ in outcome.set)} (the device is "
                           "created with them when the domain starts)")
    pin_lines, live = apply_cputune(doc, changes, host_cpus)
    lines += pin_lines
    if changes.vhostpin:
        if host_cpus is not None:
            check_pins(Changes(vhostpin=changes.vhostpin), vcpus or 1, host_cpus)
        live["vhost"] = changes.vhostpin
        lines.append(f"vhost pin {changes.vhostpin}: no libvirt XML expresses it; a live domain gets it through "
                     "labctl's qemu hook, a file is left as it is")
    edits = doc.edit_count
    lines += apply_hugepages(doc, changes)
    if doc.edit_count > edits:
        restart.append("memoryBacking: hugepages (guest memory is allocated when the domain starts)")
    text = doc.render()
    return EditResult(xml=text, diff=unified(xml_text, text), lines=lines, changed=text != xml_text,
                      restart_needed=restart, live_pins=live)
