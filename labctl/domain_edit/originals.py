"""The domain XML a user's domain had before labctl first changed it, kept until ``labctl apply --undo``.

One file per domain under labctl's state directory (``paths.state_dir()/domain-originals/UUID.json``),
keyed by the domain's UUID (a name can be reused by another domain; a UUID cannot). The file is written
before the first change, atomically, and never overwritten: a second ``apply`` keeps the first original,
which is what ``--undo`` restores. The text is kept byte for byte as libvirt gave it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

from labctl import paths, safefs
from labctl.errors import StateError

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Original:
    uuid: str
    name: str
    xml: str


def directory() -> Path:
    return paths.domain_originals_dir()


def _path(domain_uuid: str) -> Path:
    text = str(uuidlib.UUID(str(domain_uuid)))  # canonical form; a bad UUID raises ValueError
    if not _UUID.match(text):  # pragma: no cover - uuid.UUID always formats this way
        raise ValueError(domain_uuid)
    return paths.domain_original(text)


def save(domain_uuid: str, name: str, xml: str) -> bool:
    """Keep ``xml`` as the original of the domain ``domain_uuid``; False (and nothing written) when an
    original is already kept: the first one stays. The file appears whole or not at all: it is written
    to a temporary file of this process, fsync'd, then hard-linked to its name (``link`` fails when the
    name exists, so two labctls cannot both win)."""
    path = _path(domain_uuid)
    safefs.make_dir(path.parent)
    if os.path.lexists(path):
        return False
    data = json.dumps({"uuid": str(uuidlib.UUID(str(domain_uuid))), "name": name, "xml": xml})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # ours, left by a killed process with this pid
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True
    except OSError as exc:
        raise StateError(f"{path}: cannot keep the domain's original XML: {exc.strerror}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def load(domain_uuid: str) -> Original | None:
    """The kept original of ``domain_uuid``, or None when there is none."""
    path = _path(domain_uuid)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"{path}: cannot read the domain's original XML: {exc.strerror}") from None
    with os.fdopen(fd, encoding="utf-8") as handle:
        try:
            data = json.load(handle)
            return Original(uuid=str(data["uuid"]), name=str(data["name"]), xml=str(data["xml"]))
        except (ValueError, KeyError, TypeError):
            raise StateError(f"{path}: not a labctl original (corrupted?); labctl leaves it for a look") from None


def remove(domain_uuid: str) -> bool:
    """Forget the original of ``domain_uuid`` (after an undo); False when none was kept."""
    try:
        os.unlink(_path(domain_uuid))
        return True
    except FileNotFoundError:
        return False


def kept() -> list[Original]:
    """Every original labctl keeps, in UUID order."""
    found = []
    if not directory().is_dir():
        return found
    for path in sorted(directory().glob("*.json")):
        original = load(path.stem)
        if original is not None:
            found.append(original)
    return found
