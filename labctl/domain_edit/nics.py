"""Queues and ring sizes on a domain's ``<interface>`` elements: which interface is addressed, whether it
can take the setting, and the ``<driver>`` attributes set (nothing else of the interface is touched).

Sources, by public name:

- libvirt "Domain XML format", Network interfaces, "Setting NIC driver-specific options": ``queues``
  (multiqueue virtio-net, for tap/macvtap backed types and vhost-user), ``rx_queue_size`` (QEMU and KVM
  only), ``tx_queue_size`` ("QEMU enables this option only for vhostuser type");
- rules ``queues``, ``ring-size`` and ``tx-ring-backend`` of :mod:`labctl.profile.rules` (their reason and
  source are quoted in the skip lines) with the facts of :mod:`labctl.platform`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lxml import etree

from labctl import platform
from labctl.domain_edit.changes import ALL, NIC_FIELDS, Changes, NicChange
from labctl.domain_edit.xmlio import Document, NewElement
from labctl.errors import KnobError

__all__ = ["NIC_FIELDS", "VIRTIO_MODELS", "NO_DRIVER_TUNING", "NO_MULTIQUEUE", "NicOutcome", "interfaces", "apply_nics", "rule_text"]

#: ``<model type=...>`` values that are virtio-net (libvirt "Domain XML format", virtio transitional models).
VIRTIO_MODELS = ("virtio", "virtio-transitional", "virtio-non-transitional")

#: Interface types whose backend takes no virtio-net queue or ring setting, with the reason.
NO_DRIVER_TUNING = {
    "hostdev": "a PCI device passed through (the guest drives the real NIC, there is no virtio-net ring)",
    "vdpa": "a vDPA device (its queues and rings are the device's, not QEMU's virtio-net)",
    "udp": "a socket backend (udp) has no multiqueue and no ring size setting",
    "mcast": "a socket backend (mcast) has no multiqueue and no ring size setting",
    "server": "a socket backend (server) has no multiqueue and no ring size setting",
    "client": "a socket backend (client) has no multiqueue and no ring size setting",
    "null": "a null interface has no backend",
}

#: Interface types that take ring sizes but not a queue count, with the reason: QEMU's user-mode network
#: backend (slirp) is one queue pair (libvirt "Domain XML format", Userspace connection: "multiqueue is
#: not supported"); its rx_queue_size takes 1024 and its tx_queue_size is capped like tap's
#: (rule tx-ring-backend), as QEMU 7.2's device properties read back with qom-get show on this host.
NO_MULTIQUEUE = {
    "user": "the user-mode (slirp) backend has one queue pair",
}


def rule_text(rule_id: str) -> str:
    """``rule ID: reason (source)`` of a profile rule, as the skip lines quote it."""
    from labctl.profile.rules import RULES

    for rule in RULES:
        if rule.id == rule_id:
            return f"rule {rule.id}: {rule.reason.rstrip('.')} ({rule.source})"
    return f"rule {rule_id}"


@dataclass
class NicOutcome:
    index: int
    mac: str | None
    kind: str
    model: str | None
    set: list[tuple[str, str | None, int]] = field(default_factory=list)  # (attribute, was, now)
    kept: list[tuple[str, int]] = field(default_factory=list)  # already as asked
    skipped: list[tuple[str, int, str]] = field(default_factory=list)  # (attribute, wanted, reason)
    skipped_reason: str | None = None  # the whole interface
    selected: bool = True
    notes: list[str] = field(default_factory=list)

    def label(self) -> str:
        return (f"interface {self.index} ({self.kind}" + (f", {self.mac}" if self.mac else "")
                + f", model {self.model or 'none'})")

    def line(self) -> str:
        if not self.selected:
            return f"{self.label()}: not selected, untouched"
        if self.skipped_reason:
            return f"{self.label()}: skipped, {self.skipped_reason}; untouched"
        parts = []
        if self.set:
            parts.append("set " + ", ".join(f"{n} {was or 'unset'} -> {now}" for n, was, now in self.set))
        if self.kept:
            parts.append("already " + ", ".join(f"{n}={v}" for n, v in self.kept))
        for name, wanted, reason in self.skipped:
            parts.append(f"skipped {name}={wanted}: {reason}")
        parts += [f"note: {note}" for note in self.notes]
        return f"{self.label()}: " + "; ".join(parts or ["nothing asked"])


def interfaces(doc: Document) -> list[etree._Element]:
    """The domain's ``<interface>`` elements in document order (``guest.nics.N`` is the N-th)."""
    return doc.root.findall("devices/interface")


def _mac(iface: etree._Element) -> str | None:
    mac = iface.find("mac")
    return mac.get("address", "").lower() if mac is not None and mac.get("address") else None


def _wanted(changes: Changes, index: int, mac: str | None, count: int) -> NicChange | None:
    found = [changes.nics[ALL]] if ALL in changes.nics else []
    if index in changes.nics:
        found.append(changes.nics[index])
    if mac and mac in changes.nics:
        found.append(changes.nics[mac])
    if not found:
        return None
    out = NicChange()
    for change in found:
        out = out.merged(change)
    return out


def _check_addresses(doc: Document, changes: Changes, macs: list[str | None]) -> None:
    count = len(macs)
    for key in changes.nics:
        if isinstance(key, int) and key >= count:
            allowed = f"0..{count - 1} or *" if count else "none: the domain has no <interface>"
            raise KnobError(f"guest.nics.{key}: the domain has {count} interface(s) (allowed: {allowed})")
        if isinstance(key, str) and key != ALL and key not in macs:
            known = ", ".join(m for m in macs if m) or "none"
            raise KnobError(f"--nic {key}: no interface of the domain has this MAC (allowed: {known})")


def apply_nics(doc: Document, changes: Changes, vcpus: int | None) -> list[NicOutcome]:
    """Set the asked queues and rings on every addressed virtio interface that can take them; one
    :class:`NicOutcome` per interface (changed, already so, skipped with the reason, or not selected)."""
    found = interfaces(doc)
    macs = [_mac(i) for i in found]
    _check_addresses(doc, changes, macs)
    outcomes = []
    for index, iface in enumerate(found):
        kind = iface.get("type", "?")
        model_el = iface.find("model")
        model = model_el.get("type") if model_el is not None else None
        outcome = NicOutcome(index, macs[index], kind, model)
        outcomes.append(outcome)
        wanted = _wanted(changes, index, macs[index], len(found))
        if wanted is None or not wanted.items():
            outcome.selected = False
            continue
        if kind in NO_DRIVER_TUNING:
            outcome.skipped_reason = f"type {kind}: {NO_DRIVER_TUNING[kind]}"
            continue
        if model not in VIRTIO_MODELS:
            outcome.skipped_reason = (f"not virtio (model {model})" if model else
                                      "not virtio (no <model type='virtio'/>: the hypervisor's default model)")
            continue
        driver = iface.find("driver")
        attrs: list[tuple[str, str]] = []
        cap = platform.tx_ring_cap(kind)
        for name, value in wanted.items():
            if name == "queues" and kind in NO_MULTIQUEUE and value > 1:
                outcome.skipped.append((name, value, f"type {kind}: {NO_MULTIQUEUE[kind]}"))
                continue
            if name == "tx_queue_size" and cap is not None and value > cap:
                outcome.skipped.append((name, value, f"type {kind} caps tx_queue_size at {cap}, it needs "
                                        f"vhostuser ({rule_text('tx-ring-backend')})"))
                continue
            was = driver.get(name) if driver is not None else None
            if was == str(value):
                outcome.kept.append((name, value))
                continue
            attrs.append((name, str(value)))
            outcome.set.append((name, was, value))
        if attrs:
            if driver is None:
                anchor = model_el if model_el is not None else None
                new = NewElement("driver", tuple(attrs))
                if anchor is not None and not doc.is_new(anchor):
                    doc.insert_after(anchor, new)
                else:
                    doc.append_child(iface, new)
            else:
                doc.set_attrs(driver, attrs)
        if vcpus and wanted.queues and wanted.queues > vcpus:
            outcome.notes.append(f"queues {wanted.queues} is more than the domain's {vcpus} vCPUs: a Linux guest "
                                 f"enables min(queues, vCPUs) ({rule_text('queues')})")
    return outcomes

