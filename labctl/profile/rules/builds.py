"""Builds: a binary labctl may start as root (``binary_problem``), what it says it is (``probe_output``,
``vswitch_kind_of``), the ``builds:`` entries and the ``build`` knob."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from functools import lru_cache
from typing import Iterator

from labctl.errors import Problem
from labctl.profile.rules.basics import NAME_PATTERN
from labctl.profile.rules.registry import err, rule, warn
from labctl.profile.schema import Profile


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: How long a build's binary may take to say what it is (``--version``, DPDK's ``-v -h``).
PROBE_TIMEOUT_S = 15.0


#: A path in a one-line error is shown whole up to this length, else its start and end around an ellipsis.
SHOWN_PATH_CHARS = 160


def _cut(path: str) -> str:
    """``path`` as an error shows it: whole, or, beyond :data:`SHOWN_PATH_CHARS`, its start and its end
    (the file's name) around ``…``, so a cut path never reads as another, shorter one."""
    if len(path) <= SHOWN_PATH_CHARS:
        return path
    half = SHOWN_PATH_CHARS // 2
    return f"{path[:half]}…{path[-half:]}"


def binary_problem(path: str) -> str | None:
    """Why ``path`` cannot be a build's binary, or None: an absolute path to an executable regular file
    (symlinks resolved), owned by root or by the user running labctl, that no other user may write."""
    if not os.path.isabs(path):
        return f"{_cut(path)!r} is not an absolute path (allowed: /path/to/an/executable)"
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except OSError as exc:
        return f"{_cut(path)}: {exc.strerror.lower()} (allowed: an existing executable file)"
    shown = _cut(path) if real == path else f"{_cut(path)} (-> {_cut(real)})"
    if not stat.S_ISREG(info.st_mode):
        return f"{shown} is not a regular file (allowed: an executable file)"
    if not info.st_mode & 0o111 or not os.access(real, os.X_OK):
        return f"{shown} is not executable (allowed: an executable file, e.g. mode 0755)"
    if info.st_uid not in (0, os.geteuid()):
        return f"{shown} is owned by uid {info.st_uid} (allowed: owned by root or by uid {os.geteuid()}, who runs labctl)"
    if info.st_mode & 0o002:
        return f"{shown} is world-writable (allowed: writable by its owner only, e.g. chmod o-w)"
    return None


def probe_output(path: str, args: tuple[str, ...], env: tuple[tuple[str, str], ...] = ()) -> str:
    """What ``path args`` prints (stdout and stderr), run with ``env`` added to the environment; empty when it
    cannot run. Cached by the file's identity (path, size, mtime) and the arguments."""
    try:
        info = os.stat(path)
    except OSError:
        return ""
    return _probe(path, info.st_size, info.st_mtime_ns, args, env)


@lru_cache(maxsize=64)
def _probe(path: str, size: int, mtime_ns: int, args: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> str:
    try:
        done = subprocess.run([path, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S,
                              env={**os.environ, **dict(env)}, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (done.stdout + done.stderr).decode(errors="replace")


#: DPDK EAL's -v prints "EAL: RTE Version: 'DPDK 22.11.11'" and -h the usage, then it exits: no hugepages,
#: no runtime directory (seen with Debian's dpdk-testpmd 22.11).
DPDK_VERSION_ARGS = ("-v", "-h")
RTE_VERSION = re.compile(r"RTE Version: '([^']+)'")
OVS_VERSION = re.compile(r"^ovs-vswitchd \(Open vSwitch\) \S+", re.M)


def vswitch_kind_of(path: str, env: tuple[tuple[str, str], ...] = ()) -> str | None:
    """``ovs-dpdk`` when ``path --version`` says ovs-vswitchd (Open vSwitch), ``testpmd`` when DPDK's EAL
    prints its RTE version (``-v -h``), else None."""
    if OVS_VERSION.search(probe_output(path, ("--version",), env)):
        return "ovs-dpdk"
    if RTE_VERSION.search(probe_output(path, DPDK_VERSION_ARGS, env)):
        return "testpmd"
    return None


@rule("builds", "A build replaces a program labctl starts as root: its path is resolved (symlinks followed, the "
      "resolved path recorded with its sha256) and must be an executable regular file owned by root or by the "
      "user running labctl that no other user can write, or anyone could swap what runs as root mid-sweep. Its "
      "env names environment variables (given to that build's processes only).",
      "execve(2) (regular file, execute permission); POSIX.1-2017 XBD 8.1 (environment variable names); "
      "CWE-732 (incorrect permission assignment for critical resource)")
def _builds(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for name, build in p.builds.items():
        if not NAME_PATTERN.match(name):
            yield err(f"builds.{name}", f"{name[:40]!r} is not a build name (allowed: 1-40 of a-z, 0-9 and '-')")
        for role in ("qemu", "vswitch", "forwarder"):
            path = getattr(build, role)
            if path is not None:
                problem = binary_problem(path)
                if problem:
                    yield err(f"builds.{name}.{role}", problem)
        yield from env_problems(f"builds.{name}.env", build.env)


def env_problems(where: str, env: dict[str, str]) -> Iterator[Problem]:
    """An environment's names must be variable names and its values text without NUL (execve(2)): a build's
    ``env`` and a recipe's."""
    for key, value in env.items():
        if not ENV_NAME.match(key):
            yield err(where, f"{key[:40]!r} is not an environment variable name (allowed: letters, digits and '_', "
                             "not starting with a digit)")
        elif "\0" in value:
            yield err(f"{where}.{key}", "contains a NUL byte (allowed: text without NUL)")


@rule("build", "The knob build picks one entry of builds: a name it does not hold would silently run the host's "
      "binaries under a patched label. The vswitch a build gives must be the vswitch.kind labctl drives "
      "(asked of the binary itself, not its name: ovs-vswitchd --version says Open vSwitch; DPDK's EAL -v prints "
      "its RTE version), since testpmd's and OVS's command lines and control sockets have nothing in common. "
      "The embedded lab has no QEMU, so a qemu build there has no effect.",
      "ovs-vswitchd(8) --version; DPDK EAL parameters -v (doc.dpdk.org/guides/linux_gsg/linux_eal_parameters.html); "
      "libvirt formatdomain.html#devices (<emulator>)")
def _build(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.build is None:
        return
    if p.build not in p.builds:
        yield err("build", f"{p.build[:40]!r} is not a build (allowed: {', '.join(p.builds) or 'none: add builds:'})")
        return
    build = p.builds[p.build]
    if build.vswitch is not None and binary_problem(build.vswitch) is None:
        kind = vswitch_kind_of(os.path.realpath(build.vswitch), tuple(sorted(build.env.items())))
        if kind != p.vswitch.kind:
            said = {"ovs-dpdk": "ovs-vswitchd", "testpmd": "a DPDK testpmd", None: "neither ovs-vswitchd nor DPDK"}[kind]
            yield err(f"builds.{p.build}.vswitch", f"{_cut(build.vswitch)} is {said} (allowed: a binary of "
                                                    f"vswitch.kind {p.vswitch.kind})")
    if build.qemu is not None and p.backend == "embedded":
        yield warn(f"builds.{p.build}.qemu", "the embedded lab runs no QEMU: this build's qemu has no effect")
