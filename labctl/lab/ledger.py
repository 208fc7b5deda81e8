"""The state file: every resource labctl creates is written here *before* it is created.

``labctl down`` and the crash paths read it and remove what is listed, in reverse order, so a
``kill -9`` at any point leaves nothing that cannot be cleaned. Removal is idempotent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from labctl import signals
from labctl.errors import StateError
from labctl.host.paths import state_dir

KINDS = ("domain", "process", "dpdk", "path", "dir", "mount", "tap", "sysctl", "network")


@dataclass
class Resource:
    kind: str
    ident: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class LabState:
    name: str
    path: Path
    resources: list[Resource] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        payload = {"name": self.name, "info": self.info, "resources": [asdict(r) for r in self.resources]}
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)

    def record(self, kind: str, ident: str, **data: Any) -> Resource:
        """Record a resource about to be created; saved to disk before this returns."""
        if kind not in KINDS:
            raise ValueError(f"unknown resource kind {kind}")
        for existing in self.resources:
            if existing.kind == kind and existing.ident == ident:
                existing.data.update(data)
                self.save()
                return existing
        resource = Resource(kind, ident, dict(data))
        self.resources.append(resource)
        self.save()
        return resource

    def update(self, resource: Resource, **data: Any) -> None:
        resource.data.update(data)
        self.save()

    def forget(self, resource: Resource) -> None:
        self.resources = [r for r in self.resources if r is not resource]
        self.save()

    def find(self, kind: str) -> list[Resource]:
        return [r for r in self.resources if r.kind == kind]


def state_path(name: str) -> Path:
    return state_dir() / f"{name}.json"


def load_state(name: str) -> LabState:
    path = state_path(name)
    if not path.exists():
        return LabState(name, path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        resources = [Resource(r["kind"], r["ident"], r.get("data", {})) for r in payload.get("resources", [])]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateError(f"state file {path} is unreadable ({exc}); remove it after checking `virsh list --all`") from None
    return LabState(name, path, resources, payload.get("info", {}))


def all_states() -> list[LabState]:
    directory = state_dir()
    if not directory.is_dir():
        return []
    return [load_state(p.stem) for p in sorted(directory.glob("*.json"))]


@contextlib.contextmanager
def locked(name: str, wait_s: float = 30.0) -> Iterator[LabState]:
    """Hold the lab's lock while changing it; yields its (possibly empty) state."""
    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    lock_path = directory / f"{name}.lock"
    with open(lock_path, "a+", encoding="utf-8") as lock:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StateError(f"lab {name} is locked by another labctl (lock {lock_path})") from None
                signals.sleep(0.1)
        try:
            yield load_state(name)
        finally:
            if not state_path(name).exists():
                with contextlib.suppress(FileNotFoundError):
                    lock_path.unlink()  # nothing left of this lab: leave no lock file either
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# ---- removal --------------------------------------------------------------------------------

def process_alive(pid: int, started: float | None) -> bool:
    import psutil

    if started is None:
        return False  # unknown start time: never risk killing a process that reuses the pid
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started) > 1.0:
            return False  # the pid was reused by another process
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_process(pid: int, started: float | None, timeout_s: float = 10.0) -> None:
    if not process_alive(pid, started):
        return
    import psutil

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).wait(5)
    except psutil.Error:
        pass


def stop_dpdk_prefix(prefix: str) -> None:
    """Stop every DPDK process started with ``--file-prefix PREFIX`` (recorded before it was started,
    so a labctl killed between starting it and recording its pid still leaves nothing running)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(cmdline[i] == "--file-prefix" and cmdline[i + 1] == prefix for i in range(len(cmdline) - 1)):
            with contextlib.suppress(psutil.Error):
                stop_process(proc.pid, proc.create_time())


def _umount(path: str) -> None:
    if os.path.ismount(path):
        subprocess.run(["umount", path], check=False, capture_output=True)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _remove(resource: Resource) -> None:
    kind, ident, data = resource.kind, resource.ident, resource.data
    if kind == "process":
        stop_process(int(ident), data.get("started"))
    elif kind == "dpdk":
        stop_dpdk_prefix(ident)
    elif kind == "path":
        with contextlib.suppress(FileNotFoundError):
            os.unlink(ident)
    elif kind == "dir":
        shutil.rmtree(ident, ignore_errors=True)
    elif kind == "mount":
        _umount(ident)
    elif kind == "tap":
        if Path(f"/sys/class/net/{ident}").exists():
            subprocess.run(["ip", "link", "delete", ident], check=False, capture_output=True)
    elif kind == "sysctl":
        added = int(data.get("added", 0))
        if added > 0:
            current = int(Path(ident).read_text(encoding="ascii").strip() or 0)
            Path(ident).write_text(f"{max(current - added, 0)}\n", encoding="ascii")
    elif kind == "domain":
        from labctl.lab.libvirt.hypervisor import remove_domain

        remove_domain(data["uri"], ident)
    elif kind == "network":
        from labctl.lab.libvirt.hypervisor import stop_network

        stop_network(data["uri"], ident)


def teardown(state: LabState) -> list[str]:
    """Remove every recorded resource, newest first; returns the failures (empty when clean)."""
    failures: list[str] = []
    for resource in list(reversed(state.resources)):
        try:
            _remove(resource)
        except Exception as exc:  # noqa: BLE001 - every resource gets its chance to be removed
            failures.append(f"{resource.kind} {resource.ident}: {exc}")
            continue
        state.forget(resource)
    if not state.resources:
        with contextlib.suppress(FileNotFoundError):
            state.path.unlink()
    return failures
