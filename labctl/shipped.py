"""Files labctl needs at run time that live outside its Python packages in the source tree.

In a checkout they are read where they are (``scripts/apt-packages.txt``, ``playbooks/``, ``domains/``).
A built package (``pip install .``, a wheel) carries copies under ``labctl/_shipped/`` at the same
relative paths, made by the build backend (``setup.py``'s ``build_py``, which reads :data:`TREE` from this
file), and the built generator as ``labctl/_shipped/bin/labgen``. :func:`tree_path` looks in the package
first, then in the checkout, so one lookup serves both; files are reached through
:func:`importlib.resources.files` (Python's "Using importlib.resources" guide: data that belongs to a
package is read from the package, never from a path guessed relative to the working directory).

This module imports nothing of labctl (the build backend loads it by path, before labctl is installed).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The directory inside the ``labctl`` package that holds the shipped copies.
SHIPPED_DIR = "_shipped"
#: Source-tree paths (files or directories) copied into the package, each at the same relative path.
TREE = (
    "scripts/apt-packages.txt",  # the one Debian package list: `labctl doctor`, the fleet's prepare
    "scripts/services.sh",  # virtlogd + libvirtd without systemd: the fleet's prepare runs it on a host
    "playbooks",  # `labctl fleet`: lab-host.yml, sweep.yml, ci.yml, apply.yml and their roles
    "domains",  # the example profiles (the quickstart's, the fleet's default profile)
)
#: Where a built labgen is shipped inside the package (``labctl/_shipped/bin/labgen``).
BIN_DIR = "bin"
#: The checkout this module sits in (``labctl/..``); in an installed package, site-packages.
CHECKOUT = Path(__file__).resolve().parents[1]


def shipped_root() -> Path:
    """The package's ``_shipped`` directory (it exists only in a built package)."""
    return Path(str(resources.files("labctl") / SHIPPED_DIR))


def is_checkout() -> bool:
    """True when labctl runs from its source tree (an editable install or ``python -m labctl.cli``)."""
    return (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "native" / "labgen").is_dir()


def tree_path(relative: str) -> Path:
    """A file or directory of :data:`TREE` (or below one): the package's copy, else the checkout's.

    Raises ``FileNotFoundError`` naming both places when neither holds it (a package built without it)."""
    if not any(relative == entry or relative.startswith(entry + "/") for entry in TREE):
        raise ValueError(f"{relative}: not a shipped path (shipped: {', '.join(TREE)})")
    candidates = (shipped_root() / relative, CHECKOUT / relative)
    for path in candidates:
        if path.exists():
            return path
    raise FileNotFoundError(f"{relative}: neither in the package ({candidates[0]}) nor in a checkout "
                            f"({candidates[1]}); reinstall labctl")
