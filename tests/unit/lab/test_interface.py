"""Every lab class provides the interfaces of labctl.lab.interface it claims, member by member.

``runtime_checkable`` isinstance checks only look for names; here every Protocol member is looked up on
the class (methods: parameters by name, kind and position, extra ones with defaults, the return type
where the Protocol names one) and on an instance built from a shipped profile (attributes and
properties), as virtinst's test_checkprops walks every property.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from labctl.lab import interface
from labctl.lab.embedded.lab import EmbeddedLab
from labctl.lab.embedded.ovs import OvsEmbeddedLab
from labctl.lab.embedded.vm2vm import Vm2vmLab
from labctl.lab.interface import BootedLab, KernelLab, MeasuredLab, PacedLab, PairLab, SnapshotLab
from labctl.lab.ledger import LabState
from labctl.lab.libvirt.guest import GuestLab
from labctl.lab.libvirt.image_guest import ImageGuestLab
from labctl.lab.libvirt.kernel import KernelGuestLab
from labctl.lab.libvirt.ovs_guest import OvsGuestLab
from labctl.lab.libvirt.vm2vm import Vm2vmGuestLab
from labctl.lab.plan import LabDirs, derive
from labctl.profile.load import load_profile
from tests.conftest import CPUS, DOMAINS

PROTOCOLS = (MeasuredLab, PacedLab, SnapshotLab, PairLab, KernelLab, BootedLab)

#: class -> (a shipped profile it runs, the Protocols it provides); the table in labctl.lab.interface
LABS = {
    EmbeddedLab: ("quick", {MeasuredLab, PacedLab, SnapshotLab}),
    OvsEmbeddedLab: ("ovs-pvp", {MeasuredLab, PacedLab, SnapshotLab}),
    Vm2vmLab: ("vm2vm", {MeasuredLab, SnapshotLab, PairLab}),
    GuestLab: ("guest-vhostuser", {MeasuredLab, PacedLab, SnapshotLab, BootedLab}),
    OvsGuestLab: ("guest-ovs", {MeasuredLab, PacedLab, BootedLab}),
    KernelGuestLab: ("tcp-rr", {MeasuredLab, KernelLab, BootedLab}),
    Vm2vmGuestLab: ("guest-vm2vm", {MeasuredLab, SnapshotLab, PairLab, BootedLab}),
    ImageGuestLab: ("guest-image", {MeasuredLab, PacedLab, SnapshotLab, BootedLab}),
}

_PROTOCOL_INTERNALS = {"__init__", "__subclasshook__", "__class_getitem__", "__init_subclass__",
                       "__protocol_attrs__", "__non_callable_proto_members__", "__abstractmethods__"}


def members(protocol: type) -> dict[str, str]:
    """Every member a Protocol declares (its own and its bases'): name -> method, property or attribute."""
    out: dict[str, str] = {}
    for base in reversed(protocol.__mro__):
        if base in (object,) or not getattr(base, "_is_protocol", False) or base.__module__ == "typing":
            continue
        for name in getattr(base, "__annotations__", {}):
            out[name] = "attribute"
        for name, value in vars(base).items():
            if name.startswith("_") or name in _PROTOCOL_INTERNALS:
                continue
            if isinstance(value, property):
                out[name] = "property"
            elif inspect.isfunction(value):
                out[name] = "method"
    return out


_MISSING = object()


def _lookup(cls: type, name: str):
    for base in cls.__mro__:
        if name in vars(base):
            return vars(base)[name]
    return _MISSING


def signature_problems(protocol_fn, fn, where: str) -> list[str]:
    if not inspect.isfunction(fn):
        return [f"{where}: not a method ({type(fn).__name__})"]
    want = list(inspect.signature(protocol_fn).parameters.values())[1:]
    got = list(inspect.signature(fn).parameters.values())[1:]
    problems = []
    for i, p in enumerate(want):
        if i >= len(got):
            problems.append(f"{where}: no parameter {p.name}")
        elif (got[i].name, got[i].kind) != (p.name, p.kind):
            problems.append(f"{where}: parameter {i + 1} is {got[i].name} ({got[i].kind}), not {p.name} ({p.kind})")
        elif p.default is not inspect.Parameter.empty and got[i].default is inspect.Parameter.empty:
            problems.append(f"{where}: parameter {p.name} needs a default")
    for extra in got[len(want):]:
        if extra.default is inspect.Parameter.empty and extra.kind not in (extra.VAR_POSITIONAL, extra.VAR_KEYWORD):
            problems.append(f"{where}: extra parameter {extra.name} without a default")
    want_ret = inspect.signature(protocol_fn).return_annotation
    got_ret = inspect.signature(fn).return_annotation
    if want_ret not in (inspect.Signature.empty, "Any") and got_ret is not inspect.Signature.empty \
            and got_ret != want_ret:
        problems.append(f"{where}: returns {got_ret}, not {want_ret}")
    return problems


def problems(cls: type, instance: object, protocol: type) -> list[str]:
    """What ``cls`` (and ``instance``, one of it) lacks of ``protocol``: empty when it provides it."""
    out = []
    for name, kind in members(protocol).items():
        where = f"{cls.__name__}.{name} ({protocol.__name__})"
        found = _lookup(cls, name)
        if kind == "method":
            if found is _MISSING:
                out.append(f"{where}: missing")
            else:
                out += signature_problems(_lookup(protocol, name), found, where)
            continue
        if inspect.isfunction(found):
            out.append(f"{where}: a method, not a {kind}")
        elif isinstance(found, property):
            if kind == "attribute" and found.fset is None:
                out.append(f"{where}: a read-only property, the interface assigns it")
        elif found is _MISSING and name not in vars(instance):
            out.append(f"{where}: missing (neither on the class nor set by __init__)")
    return out


def build(cls: type, profile_stem: str, tmp_path: Path):
    profile = load_profile(DOMAINS / f"{profile_stem}.yaml", cpus=CPUS).profile
    plan = derive(profile, LabDirs.of(profile.name, tmp_path / "run", tmp_path / "log"))
    state = LabState(profile.name, tmp_path / "state.json")
    if plan.lab == "embedded":
        return cls(plan, state, [])
    return cls(plan, state, "qemu:///system", [])


@pytest.mark.parametrize("cls", list(LABS), ids=lambda c: c.__name__)
def test_every_lab_provides_its_interfaces_member_by_member(cls, tmp_path):
    stem, provided = LABS[cls]
    lab = build(cls, stem, tmp_path)
    for protocol in provided:
        assert problems(cls, lab, protocol) == []
        assert isinstance(lab, protocol)


def test_the_table_says_what_the_classes_provide():
    """The docstring's table of labctl.lab.interface matches LABS (and names every lab class)."""
    doc = (interface.__doc__ or "").splitlines()
    rules = [i for i, line in enumerate(doc) if line.startswith("=====")]
    header, table = doc[rules[0] + 1], doc[rules[1] + 1:rules[2]]
    lines = {line.split()[0]: line for line in table}
    assert set(lines) == {c.__name__ for c in LABS}
    columns = {name: header.index(name) for name in ("Paced", "Snapshot", "Pair", "Kernel", "Booted")}
    by_column = {"Paced": PacedLab, "Snapshot": SnapshotLab, "Pair": PairLab, "Kernel": KernelLab,
                 "Booted": BootedLab}
    for cls, (_stem, provided) in LABS.items():
        line = lines[cls.__name__]
        said = {by_column[c] for c, at in columns.items() if line[at:at + 3] == "yes"}
        assert said | {MeasuredLab} == provided, cls.__name__


def test_a_removed_member_or_a_changed_signature_fails_the_check(tmp_path):
    lab = build(EmbeddedLab, "quick", tmp_path)
    no_pins = type("NoPins", (), {k: v for k, v in vars(EmbeddedLab).items() if k not in ("pins", "__dict__")})
    assert problems(no_pins, lab, MeasuredLab) == ["NoPins.pins (MeasuredLab): missing"]

    class ShortSignature(EmbeddedLab):
        def forwarding_cpu_s(self, report):  # window_s dropped
            return 0.0

    assert problems(ShortSignature, lab, MeasuredLab) == [
        "ShortSignature.forwarding_cpu_s (MeasuredLab): no parameter window_s"]

    class WrongReturn(EmbeddedLab):
        def record_warnings(self) -> str:
            return ""

    assert problems(WrongReturn, lab, MeasuredLab) == [
        "WrongReturn.record_warnings (MeasuredLab): returns str, not list[str]"]

    class PollersAsMethod(EmbeddedLab):
        def pollers(self):
            return 0

    assert problems(PollersAsMethod, lab, MeasuredLab) == [
        "PollersAsMethod.pollers (MeasuredLab): a method, not a property"]
    assert problems(EmbeddedLab, lab, KernelLab)  # a pvp lab runs no tcp sessions


def test_every_protocol_member_is_known():
    """The checker sees each Protocol's members (a Protocol it cannot read would pass every class)."""
    assert {"plan", "pids", "pollers", "pins", "environment", "close", "window_details"} <= set(members(MeasuredLab))
    assert set(members(PairLab)) - set(members(MeasuredLab)) == {"snapshot", "metrics"}
    assert set(members(BootedLab)) - set(members(MeasuredLab)) == {"warnings", "key", "domains", "boot_s", "boot",
                                                                     "start", "end_trial", "reached",
                                                                     "swap_refusal", "swap"}
    for protocol in PROTOCOLS:
        assert members(protocol)


def test_guest_b_is_derived_by_the_plan(tmp_path):
    """vm2vm's two libvirt guests: A runs the lab's plan, B its peer (LabPlan.peer), also after a trial's
    plan changes."""
    lab = build(Vm2vmGuestLab, "guest-vm2vm", tmp_path)
    assert lab.a.plan == lab.plan and lab.b.plan == lab.plan.peer()
    assert lab.b.plan.domain_name == lab.plan.domain_name + "-b" and lab.b.plan.nics == lab.plan.peer_nics
