"""Which source a labctl was built from: its version and commit, for ``labctl --version``.

A built package carries ``labctl/_build.json`` (``{"version": ..., "commit": ...}``), written by the build
backend (``setup.py``'s ``build_py``) from, in order: ``$LABCTL_BUILD_COMMIT`` (the fleet's prepare builds
from a staged copy of the tree and passes the checkout's commit this way), ``git describe`` of the source
tree, or the ``build-info.json`` that ``setup.py``'s ``sdist`` writes into a source archive (``python -m
build`` builds the wheel from the sdist, which has no ``.git``). A checkout (editable install) has no
``_build.json`` and asks ``git describe`` each time, so the commit shown is the one checked out now.

This module imports nothing of labctl: the build backend loads it by path.
"""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path

#: The file a built package carries inside ``labctl/``.
BUILD_INFO = "_build.json"
#: The file an sdist carries at its root (the commit it was cut from).
SDIST_INFO = "build-info.json"
#: Overrides the commit recorded at build time.
COMMIT_ENV = "LABCTL_BUILD_COMMIT"
CHECKOUT = Path(__file__).resolve().parents[1]


def git_describe(root: Path) -> str | None:
    """``git describe --always --dirty --tags`` of ``root``, or None outside a git work tree (or without git)."""
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--tags"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and text else None


def packaged() -> dict[str, str] | None:
    """The package's ``_build.json``, or None (a checkout, or a package built before it was recorded)."""
    entry = resources.files("labctl") / BUILD_INFO
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def commit() -> str:
    """The commit this labctl was built from (a package) or is checked out at (a checkout); ``unknown``."""
    data = packaged()
    if data and data.get("commit"):
        return str(data["commit"])
    return git_describe(CHECKOUT) or "unknown"


def version_line(version: str) -> str:
    """``labctl 0.1.0 (commit 656a21f, package)`` or ``... (commit 656a21f-dirty, checkout /path)``."""
    data = packaged()
    where = "package" if data else f"checkout {CHECKOUT}"
    return f"labctl {version} (commit {commit()}, {where})"
