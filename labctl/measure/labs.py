"""The labs a run keeps between its trials, under the lab's lock.

An embedded lab is made for every trial (its two processes start in well under a second). A libvirt
guest stays up while the next trial needs the same domain (:meth:`LabPlan.domain_key`: size, NICs,
vswitch PMD cores): only its forwarder restarts, and vCPU/emulator pins are applied live. When a domain
knob changes the guest is powered off and the new one booted; the session counts boots and their time.
The lab's ledger lock is held from the first trial to the last, so no other labctl touches the lab in
between; what a killed labctl left is removed when the session starts. The host's CPUs the lab runs on
(:mod:`labctl.lab.hostlock`) are held from a trial's set-up until nothing of the lab is up any more (the
end of an embedded trial; a guest's power-off), so no other trial measures on them meanwhile. The
session also keeps the maximum load labgen was calibrated to pace per host side
(:mod:`labctl.measure.calibration`): a sweep's NDR/PDR searches calibrate once, not once each.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labctl import paths
from labctl.errors import StateError, UserError
from labctl.events import OnEvent, notify
from labctl.lab.hostlock import CpuClaim, plan_cpus
from labctl.lab.ledger import LabState, locked, teardown
from labctl.owner import alive as owner_alive, describe
from labctl.lab.plan import LabPlan, derive
from labctl.lab.recipes import prepare as prepare_recipe_builds
from labctl.lab.table import lab_row
from labctl.profile.schema import Profile

if TYPE_CHECKING:
    from labctl.lab.interface import MeasuredLab
    from labctl.measure.calibration import Calibrations


LAB_LOCK_WAIT_S = 30.0  # another labctl holding this lab's name (its run, or `labctl down`)


def embedded_lab(plan: LabPlan, state: LabState, warnings: list[str]) -> MeasuredLab:
    """The embedded lab a plan describes (:data:`labctl.lab.table.LABS`: pvp or vm2vm, through a testpmd vswitch
    or OVS-DPDK), made for one trial."""
    return lab_row(plan).lab_class()(plan, state, warnings)


UNIX_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL (unix(7))


def unix_sockets(plan: LabPlan) -> list[Path]:
    """The unix sockets a lab of this plan binds or connects to under labctl's run directory."""
    sockets = [nic.socket for nic in (*plan.nics, *plan.peer_nics) if nic.socket is not None]
    if plan.vswitch.kind == "ovs-dpdk":
        from labctl.lab.ovs.commands import OvsPaths

        ovs = OvsPaths.of(plan.dirs.run.parent, plan.name, plan.dirs.log)
        sockets += [ovs.db_socket, ovs.ctl("ovsdb-server"), ovs.ctl("ovs-vswitchd")]
    return sockets


def check_socket_paths(plan: LabPlan) -> None:
    """A socket path over the kernel's limit cannot be bound or reached: refused before anything starts
    (DPDK and QEMU would fail later, one of them only by waiting for a peer that never connects)."""
    for path in unix_sockets(plan):
        if len(os.fsencode(path)) > UNIX_PATH_MAX:
            raise UserError(f"LABCTL_RUN_DIR: {paths.run_dir()} is too long for the lab's unix sockets ({path} is "
                            f"{len(os.fsencode(path))} bytes; allowed: at most {UNIX_PATH_MAX}): set LABCTL_RUN_DIR "
                            "to a shorter directory")


def check_measurable(profile: Profile) -> None:
    """Refuse, before anything is created, a profile whose trials cannot run here (UserError): its plan,
    and on a libvirt guest the plan of every build its sweep names (a build's forwarder must be one the
    appliance can carry: :func:`labctl.lab.libvirt.domain.appliance_forwarder`). Builds made by recipes
    are built first (or found in their cache: :func:`labctl.lab.recipes.prepare`; a failed one is a
    ``BuildError`` naming the commit and the log), so no trial waits for a compiler."""
    prepare_recipe_builds(profile)
    plan = derive(profile)
    check_socket_paths(plan)
    check = lab_row(plan).checker()  # its lab's pre-flight check (labctl.lab.table); none for the embedded labs
    if check is None:
        return
    check(plan, profile.libvirt_uri)
    for label in profile.sweep.get("build", []):
        if label != profile.build:
            check(derive(profile.model_copy(update={"build": label})), profile.libvirt_uri)


class LabSession:
    """``wait``: a trial whose CPUs another trial measures on waits for them (False: ``--no-wait``, fail at
    once with :class:`~labctl.errors.CpusBusyError`); so does a lab another labctl holds (up to
    :data:`LAB_LOCK_WAIT_S`)."""

    def __init__(self, name: str, uri: str | None = None, on_event: OnEvent | None = None, wait: bool = True):
        self.name = name
        self.wait = wait
        self.cpus = CpuClaim(name, on_event, wait)
        self.uri = uri
        self.on_event = on_event
        self.state: LabState | None = None
        self.leftovers: str | None = None  # a warning for the first trial: what an earlier labctl left
        #: labgen's calibrated maximum load per host side, for every NDR/PDR search of the run
        self.calibrations: Calibrations = {}
        self.guest: Any = None
        self.boots = 0
        self.boot_s = 0.0
        self.started = time.monotonic()
        self._lock: Any = None

    def __enter__(self) -> "LabSession":
        self._lock = locked(self.name, LAB_LOCK_WAIT_S if self.wait else 0.0)
        self.state = self._lock.__enter__()
        try:
            self._remove_leftovers()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def _remove_leftovers(self) -> None:
        """What an earlier labctl left, removed (and said) only when that labctl has exited; the
        resources of a live one (``labctl up`` in this process, or in a face) are refused."""
        assert self.state is not None
        if not self.state.resources:
            return
        previous = self.state.owner
        if owner_alive(previous):
            raise StateError(f"lab {self.name} is up, its resources held by {describe(previous)}, which still "
                             f"runs (allowed: `labctl down {self.name}` first, or another lab name)")
        left = teardown(self.state)
        self.leftovers = f"removed resources left by an earlier labctl ({describe(previous)}, exited)" + \
            (f" (could not remove: {left})" if left else "")
        notify(self.on_event, "note", lab=self.name, message=self.leftovers)

    def __exit__(self, *exc: object) -> None:
        try:
            self.close_guest()
            teardown(self.state)
        finally:
            self.cpus.release()
            self._lock.__exit__(*exc)

    def _phase(self, text: str) -> None:
        notify(self.on_event, "phase", lab=self.name, message=text)

    def acquire(self, plan: LabPlan, warnings: list[str]) -> MeasuredLab:
        """A lab up for this trial's plan (a new embedded lab; the running guest, or a new one)."""
        assert self.state is not None
        self.cpus.acquire(plan_cpus(plan))  # waits (a note says for whom) while another trial measures there
        if plan.lab == "embedded":
            lab = embedded_lab(plan, self.state, warnings)
            lab.start()
            return lab
        if self.guest is not None and self.guest.key != plan.domain_key():
            self._phase("the domain changes: powering the guest off")
            self.close_guest()
        if self.guest is None:
            lab_class = lab_row(plan).lab_class()  # the guest's lab (labctl.lab.table)
            guest = lab_class(plan, self.state, self.uri or "qemu:///system", warnings, self._phase)
            self.guest = guest
            try:
                guest.boot()
            except BaseException:  # a guest that never came up is not the run's guest: the next trial boots anew
                self.close_guest()
                raise
            self.boots += guest.domains  # vm2vm boots two
            self.boot_s += guest.boot_s
        self.guest.warnings = warnings
        self.guest.start(plan)
        return self.guest

    def release(self, lab: MeasuredLab | None, failed: bool) -> list[str]:
        """After a trial: an embedded lab goes (its resources too); a guest ends its forwarder, or is
        powered off when the trial failed (the next trial boots a fresh one). Returns teardown failures."""
        assert self.state is not None
        if lab is None or lab is not self.guest:
            if lab is not None:
                lab.close()
            if self.guest is None:
                return self._torn_down()
            return []
        if failed:
            self.close_guest()
            return self._torn_down()
        self.guest.end_trial()  # the guest stays up (and keeps its CPUs) for the run's next trial
        return []

    def _torn_down(self) -> list[str]:
        """Teardown; with nothing of the lab left up, its CPUs are free for other trials."""
        assert self.state is not None
        failures = teardown(self.state)
        self.cpus.release()
        return failures

    def close_guest(self) -> None:
        if self.guest is not None:
            self.guest.close()
            self.guest = None
            if self.state is not None:
                teardown(self.state)

    def info(self) -> dict[str, Any]:
        """What the run records about its labs: boots and their share of the run's time."""
        run_s = time.monotonic() - self.started
        return {"boots": self.boots, "boot_s": round(self.boot_s, 2), "run_s": round(run_s, 2)}

