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


def domain_originals_dir() -> Path:
    """Where ``labctl apply`` keeps a domain's XML from before its first change (one ``UUID.json`` each;
    :mod:`labctl.domain_edit.originals`); ``labctl down`` removes a lab domain's with the domain."""
    return state_dir() / "domain-originals"


def domain_original(domain_uuid: str) -> Path:
    """The file of one domain's kept XML, by its UUID in libvirt's canonical form (lower case, dashed)."""
    return domain_originals_dir() / f"{domain_uuid}.json"


def run_dir() -> Path:
    return _dir("LABCTL_RUN_DIR")


def log_dir() -> Path:
    return _dir("LABCTL_LOG_DIR")


def cache_dir(variable: str, name: str) -> Path:
    """A cache of labctl's builds (``name``: appliance, images): ``variable`` when set, else
    /var/cache/labctl/NAME for root (QEMU runs as libvirt-qemu and cannot read /root), else the user's
    XDG cache."""
    env = os.environ.get(variable)
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/labctl") / name
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "labctl" / name


def can_create(path: Path) -> bool:
    """``path`` names a file that could be created: not a directory, in an existing, writable directory."""
    parent = path.parent if str(path.parent) else Path(".")
    return not path.is_dir() and parent.is_dir() and os.access(parent, os.W_OK)
