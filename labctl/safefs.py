"""Files and directories labctl makes under its run, state and log directories, made safely.

labctl runs as root; its directories hold sockets QEMU (group ``libvirt-qemu``) must reach. So:

- directories are made 0750 (0770 where QEMU must create files), owned by root and, where QEMU needs
  access, by QEMU's group (:data:`labctl.platform.QEMU_GROUP`); a symlink where a directory should be
  is refused;
- files are opened with ``O_NOFOLLOW`` (and truncated only after that): a symlink planted at a log,
  state or lock path makes labctl fail with one line instead of overwriting the file it points to;
- a socket handed to QEMU's group is changed through an ``O_PATH | O_NOFOLLOW`` descriptor after
  checking it is a socket: a symlink there is never followed to another file.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import stat
from pathlib import Path
from typing import IO, Iterator

from labctl import platform
from labctl.errors import StateError

DIR_MODE = 0o750  # QEMU connects to the vswitch's sockets and reads nothing else: it enters, never writes


def qemu_gid() -> int | None:
    try:
        return grp.getgrnam(platform.QEMU_GROUP).gr_gid
    except KeyError:
        return None


def make_dir(path: Path, mode: int = DIR_MODE, qemu: bool = False) -> Path:
    """``path`` and its missing parents, each made with ``mode`` (group QEMU's when ``qemu``); a symlink
    where the directory should be is refused. Existing directories are left as they are."""
    path = Path(path)
    if os.path.islink(path):
        raise StateError(f"{path}: is a symbolic link where labctl keeps a directory; labctl does not follow "
                         "it (remove it after checking who planted it)")
    if path.is_dir():
        return path
    if not os.path.lexists(path.parent):
        make_dir(path.parent, mode, qemu)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if os.path.islink(path) or not path.is_dir():
            raise StateError(f"{path}: exists and is not a directory labctl can use (a symbolic link or a "
                             "file); labctl does not follow it") from None
        return path  # made meanwhile by another labctl
    except OSError as exc:
        raise StateError(f"{path}: cannot make the directory: {exc.strerror}") from None
    gid = qemu_gid() if qemu else None
    if gid is not None and os.geteuid() == 0:
        os.chown(path, 0, gid, follow_symlinks=False)
    os.chmod(path, mode)  # mkdir's mode went through the umask
    return path


def open_new(path: Path, mode: str = "w", perm: int = 0o640) -> IO:
    """Open ``path`` for writing (``w``: truncated, ``a``: appended) without following a symlink there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if mode == "a" else 0)
    try:
        fd = os.open(path, flags, perm)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateError(f"{path}: is a symbolic link; labctl does not write through it "
                             "(remove it after checking who planted it)") from None
        raise StateError(f"{path}: cannot write: {exc.strerror}") from None
    if mode == "w":
        os.ftruncate(fd, 0)
    return os.fdopen(fd, mode, encoding="utf-8", errors="replace")


def write_atomic(path: Path, data: str, perm: int = 0o640) -> None:
    """Write ``data`` to ``path`` through a temporary file of this process (never a shared ``.tmp``),
    fsync'd, then renamed over it; a symlink at ``path`` is replaced, never followed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, perm)
    except FileExistsError:
        os.unlink(tmp)  # ours, left by a killed process with this pid
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, perm)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def remove_stale(path: Path) -> None:
    """Remove whatever is at ``path`` (a stale socket, or a symlink planted there), never a directory."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(path).st_mode):
            raise StateError(f"{path}: is a directory where labctl makes a socket")
        os.unlink(path)


@contextlib.contextmanager
def _socket_fd(path: Path) -> Iterator[int]:
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise StateError(f"{path}: cannot open the socket: {exc.strerror}") from None
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise StateError(f"{path}: is not a socket (a symbolic link or a file was put there); "
                             "labctl does not change it")
        yield fd
    finally:
        os.close(fd)


def give_socket(path: Path, gid: int | None, perm: int = 0o660) -> None:
    """Hand a socket to group ``gid`` with ``perm``, refusing anything but a socket at ``path``."""
    with _socket_fd(path) as fd:
        target = f"/proc/self/fd/{fd}"  # the socket's own inode, whatever the path names meanwhile
        if gid is not None:
            os.chown(target, 0, gid)
        os.chmod(target, perm)
