"""Where labctl keeps things on the host; each overridable by an environment variable (tests use tmp dirs)."""

from __future__ import annotations

import os
from pathlib import Path

_DEFAULTS = {
    "LABCTL_STATE_DIR": "/var/lib/labctl/state",  # state files: what to remove on `labctl down`
    "LABCTL_RUN_DIR": "/run/labctl",  # vhost-user sockets, hugetlbfs mounts
    "LABCTL_LOG_DIR": "/var/log/labctl",  # testpmd logs, guest serial logs
}


def _dir(variable: str) -> Path:
    return Path(os.environ.get(variable, _DEFAULTS[variable]))


def state_dir() -> Path:
    return _dir("LABCTL_STATE_DIR")


def run_dir() -> Path:
    return _dir("LABCTL_RUN_DIR")


def log_dir() -> Path:
    return _dir("LABCTL_LOG_DIR")


def can_create(path: Path) -> bool:
    """``path`` names a file that could be created: not a directory, in an existing, writable directory."""
    parent = path.parent if str(path.parent) else Path(".")
    return not path.is_dir() and parent.is_dir() and os.access(parent, os.W_OK)
