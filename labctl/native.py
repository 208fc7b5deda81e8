"""Where labctl's native generator is: ``labgen`` (``native/labgen``, C against the host's DPDK).

Looked up in this order:

1. ``$LABCTL_LABGEN``: a path to a labgen executable (a build of one's own; its directory also holds
   ``labgen-selftest`` when there is one);
2. the installed package: ``labctl/_shipped/bin/labgen``, built by the package's build backend
   (``setup.py``'s ``build_py`` runs meson + ninja on ``native/labgen``) when ``pip install .`` or
   ``python -m build`` made the package;
3. the checkout: ``build/labgen/labgen``, which ``scripts/build-labgen.sh`` (``make setup``, ``make labgen``)
   builds for an editable install.

The error when none is there says how to get one for the way labctl was installed: a checkout is told to
run ``scripts/build-labgen.sh``; an installed package (which has no scripts) to reinstall from a package
built on a host with meson, ninja and libdpdk-dev.
"""

from __future__ import annotations

import os
from pathlib import Path

from labctl import shipped
from labctl.errors import WorkloadError

#: Overrides where the labgen binary is.
BINARY_ENV = "LABCTL_LABGEN"
#: The checkout's build directory (``scripts/build-labgen.sh``; ``LABGEN_BUILD_DIR`` there moves it).
CHECKOUT_BUILD_DIR = shipped.CHECKOUT / "build" / "labgen"
#: What an installed package's user runs to get a labgen built against this host's DPDK.
REINSTALL = ("reinstall labctl from a package built on a host with meson, ninja and libdpdk-dev "
             "(pip install --force-reinstall --no-deps labctl-*.whl, or pip install --force-reinstall .)")


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def installed_dir() -> Path:
    """Where a built package keeps labgen (``labctl/_shipped/bin``)."""
    return shipped.shipped_root() / shipped.BIN_DIR


def how_to_build() -> str:
    """What to run to get labgen, for the way this labctl was installed."""
    if shipped.is_checkout():
        return "run scripts/build-labgen.sh (make labgen) in the checkout"
    return REINSTALL


def labgen_path() -> Path:
    """The labgen executable (see the module docstring for the order); ``WorkloadError`` when none."""
    env = os.environ.get(BINARY_ENV)
    if env:
        path = Path(env)
        if not _executable(path):
            raise WorkloadError(f"{BINARY_ENV}={path}: not an executable labgen (unset it, or point it at one)")
        return path
    places = (installed_dir(), CHECKOUT_BUILD_DIR)
    for directory in places:
        if _executable(directory / "labgen"):
            return directory / "labgen"
    raise WorkloadError(f"labgen is not built (looked in {places[0]} and {places[1]}): {how_to_build()} "
                        f"(or set {BINARY_ENV})")


def selftest_path() -> Path:
    """``labgen-selftest`` (labgen's counting code on known inputs, for the tests): beside ``$LABCTL_LABGEN``
    or in the checkout's build directory; packages do not ship it."""
    env = os.environ.get(BINARY_ENV)
    path = (Path(env).parent if env else CHECKOUT_BUILD_DIR) / "labgen-selftest"
    if not _executable(path):
        raise WorkloadError(f"labgen-selftest is not built at {path}: run scripts/build-labgen.sh in a checkout")
    return path
