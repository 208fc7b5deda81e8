"""The change set ``labctl apply`` makes to a domain: from ``--set`` knobs, from a run's advice, or from a
tuned profile (``advise --apply``'s output), always as one frozen :class:`Changes`.

Knobs (the profile's own paths, so that advice and profiles map one to one):

- ``guest.nics.N.queues`` / ``.rx_queue_size`` / ``.tx_queue_size``: the N-th ``<interface>`` (0-based, as a
  profile's ``guest.nics`` list), ``guest.nics.*.X`` every interface; with ``--nic MAC`` the one of that MAC;
- ``guest.pinning.vcpus.N=CPUSET`` (``<cputune><vcpupin>``), ``guest.pinning.emulator=CPUSET`` (``<emulatorpin>``),
  ``guest.pinning.vhost=CPUSET`` (no libvirt XML for it: the qemu hook of live domains);
- ``guest.hugepages=true`` (``<memoryBacking><hugepages/>``), ``guest.hugepage_size=2M|1G|KIB`` (its ``<page>``).

Values are checked as the profile rules check them (rule ``queues``, ``ring-size``: :mod:`labctl.profile.rules`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from labctl import platform
from labctl.errors import KnobError
from labctl.host.cpuset import format_cpuset, parse_cpuset
from labctl.profile.knobs import parse_assignment

__all__ = ["NicChange", "HugepagesChange", "Changes", "KNOBS", "changes_from_knobs", "changes_from_settings",
           "changes_from_profile", "changes_from_advice", "ALL", "normal_mac"]

#: The key of ``Changes.nics`` that addresses every interface (``guest.nics.*``).
ALL = "*"

NIC_FIELDS = ("queues", "rx_queue_size", "tx_queue_size")

#: Every knob ``labctl apply`` takes, as the one-line error lists them.
KNOBS = ("guest.nics.{N|*}.queues", "guest.nics.{N|*}.rx_queue_size", "guest.nics.{N|*}.tx_queue_size",
         "guest.pinning.vcpus.N", "guest.pinning.emulator", "guest.pinning.vhost", "guest.hugepages",
         "guest.hugepage_size")

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_SIZES_KIB = {"2M": 2048, "2MIB": 2048, "2048": 2048, "2048K": 2048, "2048KIB": 2048,
              "1G": 1048576, "1GIB": 1048576, "1048576": 1048576, "1048576KIB": 1048576}


@dataclass(frozen=True)
class NicChange:
    """What to set on one interface's ``<driver>``; None leaves the attribute as it is."""

    queues: int | None = None
    rx_queue_size: int | None = None
    tx_queue_size: int | None = None

    def items(self) -> list[tuple[str, int]]:
        return [(name, getattr(self, name)) for name in NIC_FIELDS if getattr(self, name) is not None]

    def merged(self, other: "NicChange") -> "NicChange":
        """This change with ``other``'s fields on top (a more specific address wins)."""
        return NicChange(**{name: getattr(other, name) if getattr(other, name) is not None else getattr(self, name)
                            for name in NIC_FIELDS})


@dataclass(frozen=True)
class HugepagesChange:
    """Back the guest's memory with hugepages (``<memoryBacking><hugepages/>``); ``page_size_kib`` also asks for
    that page size (``<page size=... unit='KiB'/>``), None leaves the size to libvirt (the host's default)."""

    page_size_kib: int | None = None


@dataclass(frozen=True)
class Changes:
    """One change set for a domain (frozen; build it with the ``changes_from_*`` functions).

    ``nics``: ``'*'`` (every interface), an index (the N-th ``<interface>``, 0-based) or a MAC (lower case)
    -> :class:`NicChange`; a more specific key's fields win over ``'*'``'s. ``vcpupins``: vCPU index ->
    cpuset text (``<vcpupin>``). ``emulatorpin``: cpuset text or None. ``vhostpin``: cpuset text or None (no
    libvirt XML expresses it: the live part installs a qemu hook). ``hugepages``: None leaves
    ``<memoryBacking>`` alone."""

    nics: Mapping[int | str, NicChange] = field(default_factory=dict)
    vcpupins: Mapping[int, str] = field(default_factory=dict)
    emulatorpin: str | None = None
    vhostpin: str | None = None
    hugepages: HugepagesChange | None = None

    @property
    def empty(self) -> bool:
        return not (any(c.items() for c in self.nics.values()) or self.vcpupins or self.emulatorpin
                    or self.vhostpin or self.hugepages)

    def knobs(self) -> list[str]:
        """The change set as ``--set`` assignments (the Ansible vars and ``--emit`` forms use them)."""
        out = []
        for key, change in self.nics.items():
            address = key if key == ALL or isinstance(key, int) else ALL
            out += [f"guest.nics.{address}.{name}={value}" for name, value in change.items()]
        out += [f"guest.pinning.vcpus.{vcpu}={cpus}" for vcpu, cpus in sorted(self.vcpupins.items())]
        if self.emulatorpin:
            out.append(f"guest.pinning.emulator={self.emulatorpin}")
        if self.vhostpin:
            out.append(f"guest.pinning.vhost={self.vhostpin}")
        if self.hugepages is not None:
            out.append("guest.hugepages=true")
            if self.hugepages.page_size_kib:
                out.append(f"guest.hugepage_size={self.hugepages.page_size_kib}")
        return out


def normal_mac(text: str) -> str:
    mac = str(text).strip().lower()
    if not _MAC.match(mac):
        raise KnobError(f"--nic {text}: not a MAC address (allowed: six hex pairs such as 52:54:00:12:34:56)")
    return mac


def _unknown(path: str) -> KnobError:
    return KnobError(f"{path}: not a knob labctl apply sets (allowed: {', '.join(KNOBS)})")


def _int(path: str, value: Any, allowed: Iterable[int] | None, text: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise KnobError(f"{path}: {value!r} is not a whole number (allowed: {text})")
    if allowed is not None and value not in allowed:
        raise KnobError(f"{path}: {value} is not allowed (allowed: {text})")
    return value


def _cpuset(path: str, value: Any) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str):
        raise KnobError(f"{path}: {value!r} is not a cpuset (allowed: a CPU list such as 2, 2-3 or 0,2)")
    try:
        return format_cpuset(parse_cpuset(text))
    except ValueError as exc:
        raise KnobError(f"{path}: {exc} (allowed: a CPU list such as 2, 2-3 or 0,2)") from None


def _page_size(path: str, value: Any) -> int:
    key = str(value).strip().upper().replace(" ", "")
    if key not in _SIZES_KIB:
        raise KnobError(f"{path}: {value!r} is not a hugepage size (allowed: 2M, 1G, or KiB: 2048, 1048576)")
    return _SIZES_KIB[key]


def changes_from_settings(settings: Mapping[str, Any] | Iterable[tuple[str, Any]], nic_mac: str | None = None,
                          option: str = "--set") -> Changes:
    """A change set from knob -> value pairs (see the module docstring); KnobError (one line, naming the
    knob and the allowed values) on an unknown knob or a bad value."""
    items = settings.items() if isinstance(settings, Mapping) else settings
    mac = normal_mac(nic_mac) if nic_mac else None
    nics: dict[int | str, dict[str, int]] = {}
    vcpupins: dict[int, str] = {}
    emulator = vhost = None
    hugepages = False
    page_kib: int | None = None
    rings = ", ".join(map(str, platform.RING_SIZES))
    for path, value in items:
        parts = path.split(".")
        if parts[:2] == ["guest", "nics"] and len(parts) == 4:
            address, name = parts[2], parts[3]
            if name not in NIC_FIELDS:
                raise _unknown(path)
            if address == ALL:
                key: int | str = mac or ALL
            elif address.isdigit():
                if mac:
                    raise KnobError(f"{path}: --nic {mac} selects the interface; name it guest.nics.*.{name} "
                                    "(allowed with --nic: guest.nics.*.X)")
                key = int(address)
            else:
                raise KnobError(f"{path}: '{address}' is not an interface index (allowed: 0, 1, ... or *)")
            if name == "queues":
                number = _int(path, value, range(1, platform.MAX_QUEUE_PAIRS + 1), f"1..{platform.MAX_QUEUE_PAIRS}")
            else:
                number = _int(path, value, platform.RING_SIZES, rings)
            nics.setdefault(key, {})[name] = number
        elif parts[:3] == ["guest", "pinning", "vcpus"] and len(parts) == 4:
            if not parts[3].isdigit():
                raise KnobError(f"{path}: '{parts[3]}' is not a vCPU index (allowed: 0, 1, ...)")
            vcpupins[int(parts[3])] = _cpuset(path, value)
        elif path == "guest.pinning.emulator":
            emulator = _cpuset(path, value)
        elif path == "guest.pinning.vhost":
            vhost = _cpuset(path, value)
        elif path == "guest.hugepages":
            if value is not True:
                raise KnobError(f"{path}: {value!r}: labctl apply adds hugepages, it never removes them "
                                "(allowed: true)")
            hugepages = True
        elif path == "guest.hugepage_size":
            page_kib = _page_size(path, value)
            hugepages = True
        else:
            raise _unknown(path)
    return Changes(nics={k: NicChange(**v) for k, v in nics.items()}, vcpupins=vcpupins, emulatorpin=emulator,
                   vhostpin=vhost, hugepages=HugepagesChange(page_kib) if hugepages else None)


def changes_from_knobs(assignments: list[str], nic_mac: str | None = None) -> Changes:
    """A change set from ``--set KNOB=VALUE`` assignments (``guest.nics.*.queues=4``, ...); KnobError (exit 2)
    on an unknown knob, naming it and listing the allowed ones."""
    return changes_from_settings([parse_assignment(text) for text in assignments], nic_mac)


def changes_from_profile(path: str | Path, nic_mac: str | None = None) -> Changes:
    """A change set from a (tuned) profile: each NIC's queues and rings by index (``guest.nics.N``), the
    vCPU, emulator and vhost pins, and hugepages when the profile asks for them. The profile is loaded and
    checked as any profile (:func:`labctl.profile.load.load_profile`: schema and rules)."""
    from labctl.profile.load import load_profile

    profile = load_profile(path).profile
    settings: list[tuple[str, Any]] = []
    for index, nic in enumerate(profile.guest.nics):
        address = ALL if nic_mac else str(index)
        settings += [(f"guest.nics.{address}.{name}", getattr(nic, name)) for name in NIC_FIELDS]
        if nic_mac:
            break
    settings += [(f"guest.pinning.vcpus.{vcpu}", cpus) for vcpu, cpus in profile.guest.pinning.vcpus.items()]
    if profile.guest.pinning.emulator is not None:
        settings.append(("guest.pinning.emulator", profile.guest.pinning.emulator))
    if profile.guest.pinning.vhost is not None:
        settings.append(("guest.pinning.vhost", profile.guest.pinning.vhost))
    if profile.guest.hugepages:
        settings.append(("guest.hugepages", True))
    return changes_from_settings(settings, nic_mac, option="--profile")


def changes_from_advice(advice: Any, nic_mac: str | None = None) -> tuple[Changes, list[str]]:
    """A change set from an advisor ``Advice`` (``labctl advise``'s result): the settings of every
    unconditional recommendation whose knobs ``labctl apply`` sets. Returns the changes and one line per
    recommendation left out, with the reason (a conditional one, a knob that is not a domain setting, an
    unpinning)."""
    settings: list[tuple[str, Any]] = []
    notes: list[str] = []
    for rec in getattr(advice, "recommendations", []):
        pairs = dict(rec.settings) or {rec.knob: rec.value}
        if rec.condition:
            cond = ", ".join(f"{k}={v}" for k, v in rec.condition.items())
            notes.append(f"left out {rec.knob} = {rec.value}: recommended only with {cond}")
            continue
        for path, value in pairs.items():
            if value is None:
                notes.append(f"left out {path}: the advice leaves it unpinned; labctl apply never removes a pin")
                continue
            if path == "guest.hugepages" and value is False:
                notes.append(f"left out {path} = false: labctl apply never removes hugepages")
                continue
            try:
                changes_from_settings([(path, value)], nic_mac)
            except KnobError as exc:
                notes.append(f"left out {path} = {value}: {exc}")
                continue
            settings.append((path, value))
    return changes_from_settings(settings, nic_mac, option="--run"), notes
