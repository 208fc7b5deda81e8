"""Reading an Ansible inventory before anything runs: its hosts, or one line saying why it is unusable.

The inventory is parsed by ``ansible_runner.get_inventory(action="list", ...)``, which runs
``ansible-inventory --list`` and returns ``(dict, "")`` on success, ``("", error text)`` otherwise
(ansible-runner 2.4, "Using Runner as a Python Module Interface to Ansible": get_inventory()). The JSON
is ``ansible-inventory``'s: ``{"_meta": {"hostvars": {host: {...}}}, GROUP: {"hosts": [...],
"children": [...]}, ...}``. With ``ANSIBLE_INVENTORY_UNPARSED_FAILED`` and
``ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED`` (ansible-core configuration, INVENTORY_UNPARSED_IS_FAILED and
INVENTORY_ANY_UNPARSED_IS_FAILED) a source no plugin can parse is an error, not an empty inventory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from labctl.errors import LabFault, UserError

STRICT_INVENTORY = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED": "True"}


INSTALL = "pip install 'ansible-core>=2.19,<2.20' 'ansible-runner>=2.4,<2.5'"


def runner_module():
    """``ansible_runner``, or a ``LabFault`` saying how to install it."""
    try:
        import ansible_runner
    except ImportError:
        raise LabFault(f"ansible-runner is not installed ({INSTALL})") from None
    return ansible_runner


@contextlib.contextmanager
def ansible_on_path() -> Iterator[str]:
    """Make ``ansible-playbook``/``ansible-inventory`` findable for ansible-runner, which looks them up
    on this process's PATH: when they are not on it but sit next to this Python (a venv that is not
    activated), that directory is put first for the duration. Yields the directory."""
    found = shutil.which("ansible-playbook")
    if found:
        yield str(Path(found).parent)
        return
    here = Path(sys.executable).parent
    if not (here / "ansible-playbook").exists():
        raise LabFault(f"ansible-playbook not found on PATH or next to this Python ({INSTALL})")
    saved = os.environ.get("PATH")
    os.environ["PATH"] = os.pathsep.join([str(here)] + ([saved] if saved else []))
    try:
        yield str(here)
    finally:
        if saved is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = saved


def _parse_error(text: str) -> str:
    """The most telling line of ansible-inventory's complaint."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    for line in lines:
        if "Failed to parse" in line and ":" in line:
            return line.removeprefix("[WARNING]: ")
    for line in lines:
        if line.startswith("[ERROR]"):
            return line.removeprefix("[ERROR]: ")
    return lines[0] if lines else "ansible-inventory gave no hosts and no reason"


def hosts_of(listing: dict[str, Any]) -> list[str]:
    """Every host of an ``ansible-inventory --list`` document, sorted."""
    hosts = set((listing.get("_meta") or {}).get("hostvars") or {})
    for name, group in listing.items():
        if name != "_meta" and isinstance(group, dict):
            hosts.update(group.get("hosts") or [])
    return sorted(hosts)


def inventory_hosts(inventory: str | Path) -> list[str]:
    """The hosts of ``inventory`` (a file or directory); a ``UserError`` naming it when it is missing,
    unreadable, unparsable or empty."""
    ansible_runner = runner_module()
    path = Path(inventory)
    where = f"inventory {inventory}"
    if not path.exists():
        raise UserError(f"{where}: no such file or directory")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise UserError(f"{where}: cannot read it (permission denied)")
    # a private data directory of our own, removed after: without one, ansible-runner makes
    # $TMPDIR/.ansible-runner-XXXXXX (its AUTO_CREATE_DIR) for every call and never removes it
    with ansible_on_path(), tempfile.TemporaryDirectory(prefix="labctl-inventory-") as private:
        listing, error = ansible_runner.get_inventory(action="list", inventories=[str(path.resolve())],
                                                      response_format="json", envvars=STRICT_INVENTORY,
                                                      quiet=True, private_data_dir=private)
    if not isinstance(listing, dict):
        raise UserError(f"{where}: cannot be parsed: {_parse_error(error or '')}")
    hosts = hosts_of(listing)
    if not hosts:
        raise UserError(f"{where}: holds no hosts")
    return hosts
