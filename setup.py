"""The build backend's steps beyond pure Python (setuptools reads the metadata from pyproject.toml).

``build_py`` (run by ``pip install .``, ``pip wheel`` and ``python -m build``; not by an editable install,
whose checkout has ``scripts/build-labgen.sh``) also:

* builds ``native/labgen`` with meson + ninja against the host's DPDK (``pkg-config libdpdk``) and puts
  the executable at ``labctl/_shipped/bin/labgen`` (:mod:`labctl.native` finds it there);
* copies the source-tree files labctl reads at run time (:data:`labctl.shipped.TREE`: the apt package
  list, the fleet's playbooks, the example profiles, the services script) under ``labctl/_shipped/``;
* records the version and the commit in ``labctl/_build.json`` (:mod:`labctl.buildinfo`).

``sdist`` writes ``build-info.json`` (the commit) into the archive, since a wheel built from an sdist has no
``.git`` to ask. ``bdist_wheel`` tags the wheel for this platform (it carries an executable), for any
Python 3. ``LABCTL_BUILD_LABGEN=0`` builds a package without labgen (a controller without DPDK); its
``labctl`` then says how to get one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.command.sdist import sdist as _sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools < 70.1 (an editable install with an old setuptools never builds a wheel)
    _bdist_wheel = None

HERE = Path(__file__).resolve().parent
LABGEN_SRC = HERE / "native" / "labgen"


def _load(name: str):
    """labctl/NAME.py by path (it imports nothing of labctl; labctl is not installed yet)."""
    spec = importlib.util.spec_from_file_location(f"_labctl_{name}", HERE / "labctl" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


shipped = _load("shipped")
buildinfo = _load("buildinfo")


def _version() -> str:
    text = (HERE / "labctl" / "__init__.py").read_text(encoding="utf-8")
    return next(line.split("=", 1)[1].strip().strip("\"'") for line in text.splitlines()
                if line.startswith("__version__"))


def _commit() -> str:
    """The commit: $LABCTL_BUILD_COMMIT, else git describe of this tree, else an sdist's build-info.json."""
    if os.environ.get(buildinfo.COMMIT_ENV):
        return os.environ[buildinfo.COMMIT_ENV]
    described = buildinfo.git_describe(HERE)
    if described:
        return described
    try:
        return json.loads((HERE / buildinfo.SDIST_INFO).read_text(encoding="utf-8"))["commit"]
    except (OSError, ValueError, KeyError):
        return "unknown"


def _run(argv: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"labctl build: {' '.join(argv)} failed (exit {done.returncode}); see its output above")


def build_labgen(work: Path) -> Path:
    """meson setup + ninja of native/labgen in ``work``; the labgen executable."""
    missing = [tool for tool in ("meson", "ninja", "pkg-config") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"labctl build: {', '.join(missing)} not found; labgen needs them and libdpdk-dev "
                         "(apt-get install meson ninja-build pkg-config libdpdk-dev), or set LABCTL_BUILD_LABGEN=0")
    if subprocess.run(["pkg-config", "--exists", "libdpdk"], check=False).returncode != 0:
        raise SystemExit("labctl build: pkg-config finds no libdpdk; labgen builds against the host's DPDK "
                         "(apt-get install libdpdk-dev), or set LABCTL_BUILD_LABGEN=0")
    if not (work / "build.ninja").is_file():
        shutil.rmtree(work, ignore_errors=True)
        _run(["meson", "setup", str(work), str(LABGEN_SRC)])
    _run(["ninja", "-C", str(work), "labgen"])
    return work / "labgen"


class build_py(_build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # a checkout: files are read in place, labgen from build/labgen (scripts/build-labgen.sh)
        package = Path(self.build_lib) / "labctl"
        target = package / shipped.SHIPPED_DIR
        shutil.rmtree(target, ignore_errors=True)
        for relative in shipped.TREE:
            source = HERE / relative
            if source.is_dir():
                shutil.copytree(source, target / relative,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.retry"))
            else:
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / relative)
        if os.environ.get("LABCTL_BUILD_LABGEN", "1") != "0":
            temp = Path(self.get_finalized_command("build").build_temp) / "labgen"
            binary = build_labgen(temp.resolve())
            (target / shipped.BIN_DIR).mkdir(parents=True, exist_ok=True)
            shutil.copy2(binary, target / shipped.BIN_DIR / "labgen")
        (package / buildinfo.BUILD_INFO).write_text(
            json.dumps({"version": _version(), "commit": _commit()}) + "\n", encoding="utf-8")


class sdist(_sdist):
    def make_release_tree(self, base_dir, files) -> None:
        super().make_release_tree(base_dir, files)
        Path(base_dir, buildinfo.SDIST_INFO).write_text(json.dumps({"commit": _commit()}) + "\n", encoding="utf-8")


commands = {"build_py": build_py, "sdist": sdist}
if _bdist_wheel is not None:

    class bdist_wheel(_bdist_wheel):
        def finalize_options(self) -> None:
            super().finalize_options()
            self.root_is_pure = False  # it carries labgen, an executable for this platform

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    commands["bdist_wheel"] = bdist_wheel

setup(cmdclass=commands)
