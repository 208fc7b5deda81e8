"""vhost pinning for the user's domains, through a libvirt qemu hook that labctl installs.

libvirt's domain XML has no element for the vhost-net workers (``<cputune>`` pins vCPUs, the emulator
and iothreads only: libvirt "Domain XML format", CPU Tuning). On Linux 6.4 and later the workers are
threads of the QEMU process named ``vhost-<pid>`` (vhost_task); before, they are kernel threads of that
name. Either way they exist once QEMU has set up its vhost-net backends, so the pins are applied when
the domain has ``started``.

libvirt runs every executable file in ``/etc/libvirt/hooks/qemu.d/`` (since libvirt 6.5.0) as
``FILE DOMAIN OPERATION SUB-OPERATION EXTRA`` with the domain's XML on stdin (libvirt "Hooks for specific
system management", Script structure). labctl's drop-in is ``qemu.d/labctl-vhost-pin``: a small Python
script (root's, 0755, written atomically) that acts only on ``started`` of the domains listed in
labctl's state (``vhost-pins.json``: UUID -> cpuset), and pins each one's vhost threads with
``os.sched_setaffinity``. It never calls back into libvirt (the hooks documentation forbids it: it would
deadlock). labctl never replaces or edits a file of that name that it did not write, nor the user's
``qemu`` hook or other drop-ins; the drop-in goes with the last domain labctl pins.

libvirtd looks for hooks once, when it starts (libvirt 9.0 ``virHookInitialize`` at daemon start; a
SIGHUP reloads the drivers but does not look for hooks again): when there was no qemu hook at all at
that time, a new drop-in is used only after libvirtd restarts. :func:`libvirtd_sees_hooks` tells; the
running domain's vhost threads are pinned at once by :func:`pin_now` either way.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from labctl import paths, platform, safefs
from labctl.errors import StateError, UserError
from labctl.host.cpuset import format_cpuset, parse_cpuset

HOOK_NAME = "labctl-vhost-pin"
MARKER = "# labctl-vhost-pin: written by labctl apply; removed by labctl apply --undo with its last domain"
DEFAULT_HOOK_DIR = Path("/etc/libvirt/hooks/qemu.d")
#: Where libvirtd writes a running domain's QEMU pid (DOMAIN.pid); the drop-in reads it on "started".
QEMU_PID_DIRS: tuple[Path, ...] = platform.LIBVIRT_QEMU_RUN_DIRS

# The drop-in's body. Its first lines (shebang, MARKER, LIST_FILE, PID_DIRS) are written by _script().
_BODY = r'''
"""labctl's libvirt qemu hook: on "started" of a domain labctl applied vhost pinning to, pin that
domain's vhost-net workers to the recorded cpuset. Any other domain or operation: nothing."""
import json
import os
import sys
import xml.etree.ElementTree as ET


def parse_cpuset(text):
    cpus, drop = set(), set()
    for item in text.split(","):
        item = item.strip()
        target = drop if item.startswith("^") else cpus
        item = item.lstrip("^")
        low, _, high = item.partition("-")
        target.update(range(int(low), int(high or low) + 1))
    return cpus - drop


def comm(path):
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def vhost_threads(pid):
    """vhost workers of QEMU ``pid``: its own threads named vhost-* (Linux 6.4 and later), or the kernel
    threads named vhost-<pid> (before)."""
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            if comm(f"/proc/{pid}/task/{tid}/comm").startswith("vhost-"):
                found.append(int(tid))
    except OSError:
        return found
    if not found:
        name = f"vhost-{pid}"
        for entry in os.listdir("/proc"):
            if entry.isdigit() and comm(f"/proc/{entry}/comm") == name:
                found.append(int(entry))
    return sorted(found)


def pin(pid, cpus):
    pinned = []
    for tid in vhost_threads(pid):
        try:
            os.sched_setaffinity(tid, cpus)
            pinned.append(tid)
        except OSError as exc:
            print(f"labctl-vhost-pin: thread {tid}: {exc.strerror}", file=sys.stderr)
    return pinned


def qemu_pid(name):
    for directory in PID_DIRS:
        try:
            with open(os.path.join(directory, f"{name}.pid"), encoding="ascii") as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            continue
    return None


def main(argv, stdin):
    if len(argv) < 3 or argv[2] != "started":
        return 0
    try:
        with open(LIST_FILE, encoding="utf-8") as handle:
            domains = json.load(handle).get("domains", {})
    except (OSError, ValueError):
        return 0
    try:
        uuid = (ET.fromstring(stdin.read()).findtext("uuid") or "").strip().lower()
    except ET.ParseError:
        return 0
    entry = domains.get(uuid)
    pid = qemu_pid(argv[1]) if entry else None
    if pid is not None:
        pin(pid, parse_cpuset(entry["cpuset"]))
    return 0  # never stop a domain from running over a pin


if __name__ == "__main__":
    sys.exit(main(sys.argv, sys.stdin))
'''


def hook_dir() -> Path:
    """libvirt's qemu drop-in directory (``LABCTL_HOOK_DIR`` overrides it: tests)."""
    return Path(os.environ.get("LABCTL_HOOK_DIR", str(DEFAULT_HOOK_DIR)))


def hook_path() -> Path:
    return hook_dir() / HOOK_NAME


def list_path() -> Path:
    return paths.state_dir() / "vhost-pins.json"


def _script() -> str:
    head = (f"#!/usr/bin/python3\n{MARKER}\n"
            f"LIST_FILE = {str(list_path())!r}\n"
            f"PID_DIRS = {[str(d) for d in QEMU_PID_DIRS]!r}\n")
    return head + _BODY


def _namespace() -> dict[str, Any]:
    """The drop-in's own functions, for pinning a domain that already runs (the same code as the hook)."""
    namespace: dict[str, Any] = {"__name__": "labctl_vhost_pin"}
    exec(compile(_script(), str(hook_path()), "exec"), namespace)  # noqa: S102 - labctl's own constant text
    return namespace


def _ours(path: Path) -> bool | None:
    """None when nothing is at ``path``; True when it is a regular file labctl wrote; else False."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        return MARKER in handle.read(4096).splitlines()[:3]


def _refuse_foreign(path: Path) -> None:
    if _ours(path) is False:
        raise UserError(f"{path}: exists and labctl did not write it; labctl never replaces or edits a hook it "
                        "did not write (move it away, or apply without vhost pinning)")


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One labctl at a time changes the list and the drop-in: a lock on the state directory itself (no
    lock file to leave behind)."""
    safefs.make_dir(paths.state_dir())
    fd = os.open(paths.state_dir(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def domains() -> dict[str, dict[str, str]]:
    """UUID -> {"name", "cpuset"} of every domain the drop-in pins."""
    try:
        fd = os.open(list_path(), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise StateError(f"{list_path()}: cannot read: {exc.strerror}") from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        try:
            found = json.load(handle).get("domains", {})
        except (ValueError, AttributeError):
            raise StateError(f"{list_path()}: not labctl's list of vhost pins (corrupted?)") from None
    return {str(k): dict(v) for k, v in found.items()}


def _write_list(entries: dict[str, dict[str, str]]) -> None:
    safefs.write_atomic(list_path(), json.dumps({"domains": entries}, indent=1, sort_keys=True) + "\n", perm=0o640)


def install(domain_uuid: str, cpuset: str, name: str = "") -> None:
    """Pin the vhost threads of domain ``domain_uuid`` to ``cpuset`` on every start: record it in the
    list and (re)write labctl's drop-in. A file of the drop-in's name that labctl did not write is
    refused with one line, before anything is written."""
    try:
        cpus = parse_cpuset(cpuset)
    except ValueError as exc:
        raise UserError(f"guest.pinning.vhost: {exc}") from None
    key = str(domain_uuid).strip().lower()
    path = hook_path()
    _refuse_foreign(path)
    with _locked():
        entries = domains()
        entries[key] = {"name": name, "cpuset": format_cpuset(cpus)}
        _write_list(entries)
        _write_hook(path)


def _write_hook(path: Path) -> None:
    safefs.make_dir(path.parent, mode=0o755)
    _refuse_foreign(path)  # again, under the lock
    text = _script()
    if _ours(path) and path.read_text(encoding="utf-8") == text and stat.S_IMODE(os.lstat(path).st_mode) == 0o755:
        return
    safefs.write_atomic(path, text, perm=0o755)
    os.chmod(path, 0o755, follow_symlinks=False)  # the umask applied at creation


def remove(domain_uuid: str) -> bool:
    """Stop pinning ``domain_uuid``'s vhost threads; with no domain left, remove the drop-in (only if
    labctl wrote it) and the list. False when the domain was not listed."""
    key = str(domain_uuid).strip().lower()
    if not list_path().exists() and _ours(hook_path()) is None:
        return False
    with _locked():
        entries = domains()
        listed = entries.pop(key, None) is not None
        if entries:
            _write_list(entries)
            return listed
        if _ours(hook_path()):
            os.unlink(hook_path())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(list_path())
    return listed


def installed() -> bool:
    """labctl's drop-in is in libvirt's hook directory."""
    return bool(_ours(hook_path()))


def pin_now(qemu_pid: int, cpuset: str) -> list[int]:
    """Pin the vhost threads of a running QEMU (the drop-in's own code); the thread ids pinned."""
    return list(_namespace()["pin"](qemu_pid, set(parse_cpuset(cpuset))))


def vhost_threads(qemu_pid: int) -> list[int]:
    return list(_namespace()["vhost_threads"](qemu_pid))


def _daemon_start() -> float | None:
    import psutil

    starts = []
    for proc in psutil.process_iter(["name", "create_time"]):
        if proc.info.get("name") in ("libvirtd", "virtqemud"):
            starts.append(proc.info["create_time"])
    return min(starts) if starts else None


def libvirtd_sees_hooks() -> bool:
    """Will the running libvirtd run the drop-in? It looked for qemu hooks when it started: yes when an
    executable ``qemu`` hook or ``qemu.d`` file was there before that (by its ctime), or when no libvirtd
    runs (it will look when it starts)."""
    started = _daemon_start()
    if started is None:
        return True
    candidates = [hook_dir().parent / "qemu"]
    with contextlib.suppress(OSError):
        candidates += [hook_dir() / entry for entry in os.listdir(hook_dir())]
    for path in candidates:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_mode & 0o111 and info.st_ctime < started:
            return True
    return False
