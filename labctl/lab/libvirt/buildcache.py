"""A content-addressed cache of built artefacts (the appliance's kernel and initramfs, the guest image): one
directory per entry, named by a hash of everything the entry is made from, built once and then shared.

:meth:`BuildCache.build` takes the same steps for every artefact:

1. the key comes from the inputs (the caller hashes them: only it knows what its entry is made from);
2. a complete entry under that key (``load`` reads it back; its metadata file is written last) is a hit and
   is returned at once;
3. a miss takes the cache directory's lock (``flock`` on ``lock_name``): one builder per directory; another
   builder of the same directory waits for it, and says so;
4. under the lock the entry is looked up again: a builder that waited returns what the first one made;
5. still under the lock, no other build runs in this directory, so every work directory there
   (``build_prefix*``) is a killed builder's: its processes, mounts and loop devices are freed and it is
   removed (``release``);
6. the entry is made in a new work directory beside the entries (the same file system: the publish is a
   rename), its metadata written last;
7. it is published with one ``rename`` (an entry is complete or absent; ``force`` first moves the old entry
   into the work directory);
8. the work directory is released and removed on every path, so a failed or interrupted build leaves no
   partial entry and no work directory, and the oldest entries beyond ``keep`` are removed;
9. the published entry is loaded back (``built=True``) as the caller's type.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from labctl.errors import LabFault
from labctl.lab.libvirt.buildtools import Progress, release, say

Entry = TypeVar("Entry")
#: makes an entry: (work directory for scratch files, the entry directory to fill) -> the entry's metadata
Make = Callable[[Path, Path], dict[str, Any]]


@dataclass(frozen=True)
class BuildCache(Generic[Entry]):
    """One cache directory: its entries ``entry_prefix + key``, each with ``meta_name`` (JSON) written last."""

    directory: Path
    load: Callable[[Path, bool], Entry | None]  # (entry directory, built) -> the entry, None when incomplete
    meta_name: str
    error: type[LabFault]  # what a failure of the cache itself raises (the builder's own error class)
    entry_prefix: str = ""
    build_prefix: str = ".build-"
    lock_name: str = ".lock"
    keep: int = 3  # complete entries kept after a build, newest first
    mode: int | None = None  # the directory's and every entry's permissions (None: as created)

    def path(self, key: str) -> Path:
        return self.directory / (self.entry_prefix + key)

    def lookup(self, key: str) -> Entry | None:
        """The complete entry of ``key``, or None."""
        return self.load(self.path(key), False)

    def entries(self) -> list[tuple[Path, Entry]]:
        """Complete entries, oldest first (by their metadata's modification time)."""
        if not self.directory.is_dir():
            return []
        found = []
        for child in self.directory.iterdir():
            if child.name.startswith(".") or not child.name.startswith(self.entry_prefix) or not child.is_dir():
                continue
            entry = self.load(child, False)
            if entry is not None:
                found.append((child, entry))
        return sorted(found, key=lambda item: (item[0] / self.meta_name).stat().st_mtime)

    def clean(self, keep: int | None = None) -> list[str]:
        """With the lock held: killed builds' work directories freed and removed, and all but the ``keep``
        newest complete entries removed. Returns what went."""
        removed: list[str] = []
        for stale in self.directory.glob(self.build_prefix + "*"):
            freed = release(stale, error=self.error)
            removed.append(f"a killed build's {stale}" + (f" (freed: {', '.join(freed)})" if freed else ""))
        entries = self.entries()
        keep = self.keep if keep is None else keep
        for path, _entry in entries[: max(0, len(entries) - keep)]:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"the old entry {path}")
        return removed

    def _clean(self, progress: Progress) -> None:
        for gone in self.clean():
            say(progress, f"removed {gone}")

    @contextmanager
    def locked(self, progress: Progress = None) -> Iterator[None]:
        """The cache directory's lock: one builder at a time; a second one waits (and says for what)."""
        with open(self.directory / self.lock_name, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(progress, f"waiting for another build in {self.directory} (lock {self.lock_name})")
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def build(self, key: str, make: Make, *, force: bool = False, progress: Progress = None,
              published: Callable[[dict[str, Any]], None] | None = None) -> Entry:
        """The entry of ``key``: the cached one, or one ``make`` fills now (``force``: made again and replacing
        the cached one). ``published``: called with the new entry's metadata once it is in place, under the
        lock. See the module's docstring for the steps."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.mode is not None:
            self.directory.chmod(self.mode)
        final = self.path(key)
        if not force and (hit := self.lookup(key)) is not None:
            say(progress, f"cache hit {final}")
            return hit
        with self.locked(progress):
            if not force and (hit := self.lookup(key)) is not None:  # another builder made it meanwhile
                say(progress, f"cache hit {final} (made meanwhile by the build it waited for)")
                return hit
            self._clean(progress)
            work = Path(tempfile.mkdtemp(prefix=self.build_prefix, dir=self.directory))
            try:
                entry = work / "entry"
                entry.mkdir()
                meta = make(work, entry)
                (entry / self.meta_name).write_text(json.dumps(meta, indent=1) + "\n")
                if self.mode is not None:
                    entry.chmod(self.mode)
                if final.exists():  # force: the old entry goes with the work directory, never half of it
                    os.rename(final, work / "old")
                os.rename(entry, final)
                if published is not None:
                    published(meta)
            finally:
                release(work, error=self.error)
            self._clean(progress)
        built = self.load(final, True)
        if built is None:
            raise self.error(f"the new cache entry {final} is unreadable")
        return built
