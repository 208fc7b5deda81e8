"""Which lab measures a plan, and how it is checked before anything starts: one table, :data:`LABS`.

A row is a plan's shape (:class:`Shape`: the backend, ``LabPlan.lab``; the topology; the vswitch kind; the stack
that drives the guest's NICs, ``LabPlan.stack``; and whether it boots a user's image, ``guest.image``) with the
lab class that measures it and the pre-flight check (``check(plan, uri)``, raising a ``UserError``) run before a
run creates anything (:func:`labctl.measure.labs.check_measurable`). Classes and checks are named by module path
and imported when a plan needs them, so reading the table imports no lab: the embedded lab never loads
libvirt-python. Adding a lab is one row. The embedded labs are made per trial with ``(plan, state, warnings)``;
a libvirt guest (a ``BootedLab``) is booted once and kept up while the domain stays the same, made with
``(plan, state, uri, warnings, phase)`` (:class:`labctl.measure.labs.LabSession`).

Shapes without a row are refused by the profile rules (:mod:`labctl.profile.rules`) before a plan is derived: the
kernel stack and a user's image need a libvirt guest (rules ``tcp-workload``, ``guest-image``); vm2vm between
libvirt guests meets at the testpmd vswitch (``guest-setup``); the kernel stack needs a tap or network NIC, which
vm2vm guests and OVS-DPDK ports are not (``tcp-workload``, ``guest-setup``, ``vswitch``); an image guest is pvp
forwarding through the testpmd vswitch (``guest-image``). ``tests/unit/lab/test_table.py`` checks that every
shape a valid profile can take has exactly one row and that every row names a class providing ``MeasuredLab``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labctl.errors import PlanError

if TYPE_CHECKING:
    from labctl.lab.plan import LabPlan


@dataclass(frozen=True)
class Shape:
    """What decides which lab measures a plan."""

    backend: str  # embedded | libvirt
    topology: str  # pvp | vm2vm
    vswitch: str  # testpmd | ovs-dpdk
    stack: str  # dpdk (a DPDK forwarder in the guest) | kernel (virtio_net: the tcp kinds)
    image: bool  # a user's image (guest.image), not labctl's appliance

    @classmethod
    def of(cls, plan: LabPlan) -> Shape:
        return cls(plan.lab, plan.topology, plan.vswitch.kind, plan.stack, plan.image is not None)

    def __str__(self) -> str:
        return (f"backend {self.backend}, topology {self.topology}, vswitch.kind {self.vswitch}, stack {self.stack}"
                + (", guest.image" if self.image else ""))


def _attribute(path: str) -> Any:
    """``package.module:name`` imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class LabRow:
    shape: Shape
    lab: str  # the MeasuredLab class, "module:Class"
    check: str | None  # the pre-flight check "module:function" (plan, uri) -> None; None: the socket paths only

    def lab_class(self) -> type:
        return _attribute(self.lab)

    def checker(self) -> Callable[[LabPlan, str], Any] | None:
        return _attribute(self.check) if self.check is not None else None


_GUEST_CHECK = "labctl.lab.libvirt.guest:check_measurable"  # hypervisor, NICs, a build's appliance forwarder

LABS: tuple[LabRow, ...] = (
    # embedded: DPDK processes, the guest a virtio_user testpmd; a generator -> guest -> sink, or guest A -> B
    LabRow(Shape("embedded", "pvp", "testpmd", "dpdk", False), "labctl.lab.embedded.lab:EmbeddedLab", None),
    LabRow(Shape("embedded", "pvp", "ovs-dpdk", "dpdk", False), "labctl.lab.embedded.ovs:OvsEmbeddedLab", None),
    LabRow(Shape("embedded", "vm2vm", "testpmd", "dpdk", False), "labctl.lab.embedded.vm2vm:Vm2vmLab", None),
    LabRow(Shape("embedded", "vm2vm", "ovs-dpdk", "dpdk", False), "labctl.lab.embedded.vm2vm:Vm2vmLab", None),
    # libvirt: QEMU guests booted from labctl's appliance, or the user's image
    LabRow(Shape("libvirt", "pvp", "testpmd", "dpdk", False), "labctl.lab.libvirt.guest:GuestLab", _GUEST_CHECK),
    LabRow(Shape("libvirt", "pvp", "ovs-dpdk", "dpdk", False), "labctl.lab.libvirt.ovs_guest:OvsGuestLab",
           _GUEST_CHECK),
    LabRow(Shape("libvirt", "vm2vm", "testpmd", "dpdk", False), "labctl.lab.libvirt.vm2vm:Vm2vmGuestLab",
           _GUEST_CHECK),
    LabRow(Shape("libvirt", "pvp", "testpmd", "kernel", False), "labctl.lab.libvirt.kernel:KernelGuestLab",
           "labctl.lab.libvirt.kernel:check_kernel_measurable"),
    # the image probed (format, chain) and QEMU's user able to read it, the field named
    LabRow(Shape("libvirt", "pvp", "testpmd", "dpdk", True), "labctl.lab.libvirt.image_guest:ImageGuestLab",
           "labctl.lab.libvirt.image_guest:check_image"),
)


def lab_row(plan: LabPlan) -> LabRow:
    """The one row of ``plan``'s shape; a shape no lab measures is a ``PlanError`` naming it and the allowed ones."""
    shape = Shape.of(plan)
    for row in LABS:
        if row.shape == shape:
            return row
    raise PlanError(f"{shape}: no lab measures this (allowed: {'; '.join(str(r.shape) for r in LABS)})")
