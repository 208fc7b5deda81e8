"""Unix sockets on this host: whether some process listens on one (vhost-user sockets of a guest)."""

from __future__ import annotations

from pathlib import Path

UNIX_LISTENING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags column


def unix_listening(path: Path) -> bool:
    """Whether some process listens on the unix socket ``path`` (its file appears at bind(), before
    listen(): a connect in between is refused)."""
    text = str(path)
    try:
        lines = Path("/proc/net/unix").read_text(encoding="utf-8", errors="replace").splitlines()[1:]
    except OSError:
        return path.exists()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7] == text and int(fields[3], 16) & UNIX_LISTENING:
            return True
    return False
