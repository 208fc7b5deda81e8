"""The one resolver of the programs a lab runs: per role the binary (a build's, or the host's), its extra
environment, its sha256 and its version string.

Roles: ``forwarder`` (the guest's dpdk-testpmd: the embedded lab's process, or the binary a libvirt
guest's appliance carries), ``vswitch`` (the host-side dpdk-testpmd, or ovs-vswitchd with vswitch.kind
ovs-dpdk) and ``qemu`` (the emulator libvirt starts). labgen stays labctl's own (``labctl.dpdk.labgen``).

A build's path is checked again here (:func:`labctl.profile.rules.binary_problem`: the file may have
changed since the profile was validated), its symlinks resolved, and the resolved path is what runs and
what is recorded. A build made by a recipe (``{recipe, rev}``) gives its recipe's role the output the
recipe cache holds for that commit (:func:`labctl.lab.recipes.output_path`; built before measuring by
:func:`labctl.lab.recipes.prepare`), checked like any path, and records the recipe and the commit too. Hashes and versions are cached by (path, size, mtime), so a sweep hashes each binary
once. A build's environment is given to its own processes only (:meth:`Program.environ`), never to
labctl's.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from functools import lru_cache

from labctl.digest import sha256_file
from labctl.errors import PlanError, WorkloadError
from labctl.lab.plan import BuildPlan, LabPlan
from labctl.lab.recipes import output_path
from labctl.profile.rules import DPDK_VERSION_ARGS, OVS_VERSION, RTE_VERSION, binary_problem, probe_output

ROLES = ("qemu", "vswitch", "forwarder")
#: The host's program per role, found on PATH: DPDK's testpmd (Debian's dpdk package), Open vSwitch with
#: DPDK (openvswitch-switch-dpdk), and QEMU's x86-64 system emulator (the one libvirt's
#: capabilities name); with vswitch.kind ovs-dpdk the host's vswitch is Debian's DPDK build of ovs-vswitchd.
OVS_VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"  # Debian's DPDK build (not the alternative)
HOST_PROGRAMS = {"forwarder": "dpdk-testpmd", "vswitch": "dpdk-testpmd", "qemu": "qemu-system-x86_64"}
_INSTALL = {"dpdk-testpmd": "make setup installs Debian's dpdk", "qemu-system-x86_64": "make setup installs "
            "Debian's qemu-system-x86"}


@dataclass(frozen=True)
class Program:
    """One role's binary: its resolved ``path``, the environment its build adds, and the build label."""

    role: str
    path: str
    env: tuple[tuple[str, str], ...] = ()
    build: str | None = None  # None: the host's binary
    requested: str | None = None  # the build's path as written (before symlinks were resolved)
    recipe: str | None = None  # made by this recipe (builds: {recipe, rev})
    commit: str | None = None  # of this commit

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of this program's process: ``base`` (labctl's) plus the build's variables."""
        return {**(os.environ if base is None else base), **dict(self.env)}

    def record(self) -> dict[str, str | None]:
        """What a trial records of it: path, sha256, version and build (and the path as written, when a
        symlink led to ``path``)."""
        out = {"path": self.path, "sha256": sha256_of(self.path), "version": version_of(self), "build": self.build}
        if self.requested and self.requested != self.path:
            out["requested"] = self.requested
        if self.recipe is not None:
            out.update(recipe=self.recipe, commit=self.commit)
        return out


def host_binary(name: str) -> str:
    """The host's ``name`` on PATH, resolved; a one-line error when it is not installed."""
    found = shutil.which(name)
    if not found:
        raise WorkloadError(f"{name} is not installed ({_INSTALL.get(name, 'see make setup')})")
    return os.path.realpath(found)


def resolve(build: BuildPlan, role: str, vswitch_kind: str = "testpmd") -> Program:
    """The program of ``role`` under ``build``: the build's binary (checked, symlinks resolved) or the
    host's; ``vswitch_kind`` picks the host's vswitch (testpmd or ovs-vswitchd)."""
    if role not in ROLES:
        raise ValueError(f"role {role!r} (allowed: {', '.join(ROLES)})")
    env = tuple(sorted(build.env_for(role).items()))
    given = build.path(role)
    recipe = commit = None
    if given is None and build.recipe is not None and build.recipe.role == role:
        given, commit = output_path(build.recipe, build.label)
        recipe = build.recipe.name
    if given is None:
        if role == "vswitch" and vswitch_kind == "ovs-dpdk":
            return Program(role, os.path.realpath(OVS_VSWITCHD), env, build.label)
        return Program(role, host_binary(HOST_PROGRAMS[role]), env, build.label)
    problem = binary_problem(given)
    if problem:
        raise PlanError(f"builds.{build.label}.{role}: {problem}")
    return Program(role, os.path.realpath(given), env, build.label, given, recipe, commit)


def emulator_of(plan: LabPlan) -> str | None:
    """The domain's ``<emulator>``: the build's QEMU, resolved and checked; None (libvirt's default) without."""
    return resolve(plan.build, "qemu").path if plan.build.gives("qemu") else None


def resolve_all(build: BuildPlan, roles: tuple[str, ...], vswitch_kind: str = "testpmd") -> dict[str, Program]:
    return {role: resolve(build, role, vswitch_kind) for role in roles}


def recorded(programs: dict[str, Program]) -> dict[str, dict[str, str | None]]:
    """role -> {path, sha256, version, build}: the record's ``env.binaries``."""
    return {role: program.record() for role, program in sorted(programs.items())}


def sha256_of(path: str) -> str:
    """The file's sha256 (hex), cached by path, size and mtime."""
    info = os.stat(path)
    return _sha256(path, info.st_size, info.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def version_of(program: Program) -> str | None:
    """The version string: QEMU's and ovs-vswitchd's ``--version`` first line; for a DPDK program EAL's
    version (``-v -h`` prints "RTE Version: 'DPDK 22.11.11'" and the usage, and exits before any hugepage or
    runtime directory is touched). Cached by the file (path, size, mtime), the arguments and the environment."""
    if program.role == "qemu":
        lines = probe_output(program.path, ("--version",), program.env).strip().splitlines()
        return lines[0].strip() if lines else None
    if program.role == "vswitch":
        match = OVS_VERSION.search(probe_output(program.path, ("--version",), program.env))
        if match:
            return match.group(0)
    return _dpdk_version(program)


def _dpdk_version(program: Program) -> str | None:
    match = RTE_VERSION.search(probe_output(program.path, DPDK_VERSION_ARGS, program.env))
    return match.group(1) if match else None


@dataclass
class Resolved:
    """The programs one lab started, by role, for the trial's record."""

    programs: dict[str, Program] = field(default_factory=dict)

    def add(self, program: Program) -> Program:
        self.programs[program.role] = program
        return program

    def record(self) -> dict[str, dict[str, str | None]]:
        return recorded(self.programs)
