"""labctl as a user installs it: the wheel built by ``python -m build`` (sdist, then the wheel from the sdist,
as a release is made), installed into a fresh venv outside the tree, used from a directory that is not the
checkout. The package must carry what the code reads at run time: labgen (built by the build backend against
this host's DPDK), the appliance's files, the example profiles, the playbooks, the apt package list, and the
commit it was built from.

One build and one install for the whole module (pip's cache makes the install take under a minute here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.integration.conftest import needs_dpdk

pytestmark = [needs_dpdk,
              pytest.mark.skipif(shutil.which("meson") is None or shutil.which("ninja") is None,
                                 reason="the wheel's labgen builds with meson and ninja (scripts/apt-packages.txt)")]


def _run(argv, cwd, env=None, timeout=600) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed():
    """(venv's bin directory, the wheel, a working directory outside the tree, the environment)."""
    base = Path(tempfile.mkdtemp(prefix="labctl-package-"))
    try:
        dist = base / "dist"
        # as a user builds a release from a checkout: the sdist (which records the commit), then the wheel from
        # the sdist in an isolated environment; the checkout gets only setuptools' ignored egg-info
        _run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=base)
        (wheel,) = dist.glob("labctl-*.whl")
        venv = base / "venv"
        _run([sys.executable, "-m", "venv", venv], cwd=base)
        _run([venv / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check", wheel], cwd=base)
        work = base / "work"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env.update(PATH=f"{venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
        yield venv / "bin", wheel, work, env
    finally:
        if not os.environ.get("LABCTL_KEEP_TEST_DIRS"):
            shutil.rmtree(base, ignore_errors=True)


def test_the_wheel_carries_labgen_and_the_tree_files_and_is_tagged_for_this_platform(installed):
    _, wheel, _, _ = installed
    assert wheel.name.startswith("labctl-0.1.0-py3-none-linux_")
    names = set(zipfile.ZipFile(wheel).namelist())
    root = next(n.split("labctl/")[0] for n in names if n.endswith("labctl/api.py"))
    for member in ("labctl/_shipped/bin/labgen", "labctl/_build.json", "labctl/_shipped/scripts/apt-packages.txt",
                   "labctl/_shipped/playbooks/lab-host.yml", "labctl/_shipped/domains/quick.yaml",
                   "labctl/lab/libvirt/appliance/files/init.sh", "labctl/lab/libvirt/guestimage/files/rootfs/etc/hosts",
                   "labctl/analysis/html/templates/run.html.j2", "labctl/tui/app.tcss"):
        assert root + member in names, member
    info = zipfile.ZipFile(wheel).getinfo(root + "labctl/_shipped/bin/labgen")
    assert (info.external_attr >> 16) & 0o111  # executable


def test_the_installed_labctl_names_its_commit_and_finds_its_generator(installed):
    bin_dir, _, work, env = installed
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
                            capture_output=True, text=True).stdout.strip()
    version = _run([bin_dir / "labctl", "--version"], cwd=work, env=env).stdout.strip()
    assert version == f"labctl 0.1.0 (commit {commit}, package)"  # recorded into the sdist, then the wheel
    where = _run([bin_dir / "python", "-c", "from labctl import native, shipped; print(native.labgen_path()); "
                  "print(shipped.tree_path('playbooks')); print(shipped.is_checkout())"], cwd=work, env=env).stdout.split()
    site = str(bin_dir.parent / "lib")
    assert where[0].startswith(site) and where[0].endswith("labctl/_shipped/bin/labgen")
    assert where[1].startswith(site) and where[2] == "False"
    doctor = json.loads(_run([bin_dir / "labctl", "doctor", "--json"], cwd=work, env=env).stdout)
    assert doctor["packages"]["listed"] > 30 and doctor["packages"]["known"]


def test_validate_render_and_one_embedded_run_from_the_install(installed, tmp_path):
    bin_dir, _, work, env = installed
    env = dict(env, LABCTL_STATE_DIR=str(tmp_path / "state"), LABCTL_RUN_DIR=str(tmp_path / "run"),
               LABCTL_LOG_DIR=str(tmp_path / "log"))
    profiles = Path(_run([bin_dir / "python", "-c", "from labctl import shipped; print(shipped.tree_path('domains'))"],
                         cwd=work, env=env).stdout.strip())
    said = _run([bin_dir / "labctl", "validate", profiles / "quick.yaml", profiles / "guest-vhostuser.yaml"],
                cwd=work, env=env).stdout
    assert said.count(": ok") == 2
    xml = _run([bin_dir / "labctl", "render", profiles / "guest-vhostuser.yaml"], cwd=work, env=env).stdout
    assert xml.lstrip().startswith("<domain") and "vhostuser" in xml
    profile = tmp_path / "tiny.yaml"
    text = (profiles / "quick.yaml").read_text().replace("duration_s: 5", "duration_s: 1").replace("warmup_s: 1",
                                                                                                  "warmup_s: 0")
    profile.write_text(text.replace("name: quick", "name: pkgtest"))
    record = json.loads(_run([bin_dir / "labctl", "run", profile, "--rate", "0.5Mpps", "--json"], cwd=work,
                             env=env).stdout)
    assert record["status"] == "ok", record.get("error")
    assert record["metrics"]["offered_mpps"] > 0 and record["metrics"]["loss_ratio"] is not None  # labgen paced it
    assert not any((tmp_path / "run").rglob("*.sock"))
