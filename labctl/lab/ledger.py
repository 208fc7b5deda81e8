"""The ledger: every resource labctl creates is written to the lab's state file *before* it is created.

``labctl down`` and the crash paths read it and remove what is listed, newest first, so a ``kill -9``
at any point leaves nothing that cannot be cleaned. Removal is idempotent.

Each resource has a kind (``process``, ``dpdk``, ``path``, ``dir``, ``mount``, ``tap``, ``sysctl``,
``domain``, ``network``, ...). A kind is a :class:`ResourceKind` registered with :func:`resource_kind`
by the module that knows how to handle it (as tuned's plugins are): it says how to ``remove`` a
resource and how to ``verify`` that it still exists. The ledger itself only records, orders and
dispatches; :data:`KIND_MODULES` lists the modules that register kinds, imported on first use.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from labctl import faults
from labctl.errors import StateError
from labctl.lab.lockfile import LockFile, read_holder
from labctl.owner import me
from labctl.paths import state_dir
from labctl.safefs import make_dir, write_atomic

#: Modules that register resource kinds (imported the first time a kind is looked up).
KIND_MODULES = ("labctl.lab.kinds", "labctl.lab.libvirt.kinds")


class ResourceKind:
    """How to handle one kind of resource; subclasses register with :func:`resource_kind`."""

    name = ""

    def remove(self, resource: "Resource") -> None:
        """Remove it; a resource that is already gone is not an error."""
        raise NotImplementedError

    def verify(self, resource: "Resource") -> bool:
        """Whether it still exists (used by status and the fault tests)."""
        raise NotImplementedError


_KINDS: dict[str, ResourceKind] = {}


def resource_kind(cls: type[ResourceKind]) -> type[ResourceKind]:
    """Class decorator: register a resource kind under ``cls.name``."""
    _KINDS[cls.name] = cls()
    return cls


def kind_of(name: str) -> ResourceKind:
    if name not in _KINDS:
        for module in KIND_MODULES:
            importlib.import_module(module)
    try:
        return _KINDS[name]
    except KeyError:
        raise ValueError(f"unknown resource kind {name}") from None


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
        make_dir(self.path.parent)
        payload = {"name": self.name, "info": self.info, "resources": [asdict(r) for r in self.resources]}
        write_atomic(self.path, json.dumps(payload, indent=1, sort_keys=True))

    @property
    def owner(self) -> dict[str, Any] | None:
        """The labctl process that recorded the resources (pid, start time, host), if known."""
        return self.info.get("owner")

    def record(self, kind: str, ident: str, **data: Any) -> Resource:
        """Record a resource about to be created; saved to disk before this returns (with this process as
        the owner of the lab's resources)."""
        kind_of(kind)  # an unknown kind is refused before anything is written
        self.info["owner"] = me()
        for existing in self.resources:
            if existing.kind == kind and existing.ident == ident:
                existing.data.update(data)
                self.save()
                return existing
        resource = Resource(kind, ident, dict(data))
        self.resources.append(resource)
        self.save()
        return resource

    def make_dirs(self, run: Path, log: Path) -> None:
        """A lab's run directory (recorded: removed at teardown) and log directory (kept), both made with
        QEMU's group (safefs.make_dir): QEMU reaches sockets and logs there."""
        self.record("dir", str(run))
        make_dir(run, qemu=True)
        make_dir(log, qemu=True)

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
    """Hold the lab's lock while changing it; yields its (possibly empty) state. The lock file is removed
    when nothing of the lab is left, safely (:mod:`labctl.lab.lockfile`: a waiter never holds a lock on a
    deleted file)."""
    lock_path = make_dir(state_dir()) / f"{name}.lock"
    lock = LockFile(lock_path)
    try:
        lock.acquire(wait_s)
    except StateError:
        holder = read_holder(lock_path).strip() or "another labctl"
        raise StateError(f"lab {name} is locked by {holder} (lock {lock_path}; waited {wait_s:g} s)") from None
    try:
        lock.write(f"pid {os.getpid()}")
        yield load_state(name)
    finally:
        lock.release(unlink=not state_path(name).exists())  # nothing left of this lab: no lock file either


def teardown(state: LabState) -> list[str]:
    """Remove every recorded resource, newest first; returns the failures (empty when clean)."""
    failures: list[str] = []
    for resource in list(reversed(state.resources)):
        faults.point("teardown")
        try:
            kind_of(resource.kind).remove(resource)
        except Exception as exc:  # noqa: BLE001 - every resource gets its chance to be removed
            failures.append(f"{resource.kind} {resource.ident}: {exc}")
            continue
        state.forget(resource)
    if not state.resources:
        with contextlib.suppress(FileNotFoundError):
            state.path.unlink()
    return failures
