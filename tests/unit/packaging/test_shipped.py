"""labctl/shipped.py and labctl/buildinfo.py: tree files found in the package first, then the checkout;
the commit a package records, or a checkout's git describe."""

from __future__ import annotations

import json
import subprocess

import pytest

from labctl import buildinfo, shipped
from tests.conftest import ROOT


def test_every_shipped_path_exists_in_the_checkout():
    for relative in shipped.TREE:
        assert (ROOT / relative).exists(), relative


def test_a_checkout_reads_its_own_files(monkeypatch, tmp_path):
    monkeypatch.setattr(shipped, "shipped_root", lambda: tmp_path / "no-package")
    assert shipped.tree_path("scripts/apt-packages.txt") == ROOT / "scripts" / "apt-packages.txt"
    assert shipped.tree_path("playbooks/sweep.yml") == ROOT / "playbooks" / "sweep.yml"


def test_the_package_s_copy_comes_first(monkeypatch, tmp_path):
    copy = tmp_path / "pkg" / "playbooks" / "sweep.yml"
    copy.parent.mkdir(parents=True)
    copy.write_text("- hosts: all\n")
    monkeypatch.setattr(shipped, "shipped_root", lambda: tmp_path / "pkg")
    assert shipped.tree_path("playbooks/sweep.yml") == copy


def test_neither_place_names_both(monkeypatch, tmp_path):
    monkeypatch.setattr(shipped, "shipped_root", lambda: tmp_path / "pkg")
    monkeypatch.setattr(shipped, "CHECKOUT", tmp_path / "tree")
    with pytest.raises(FileNotFoundError, match=r"domains/quick.yaml: neither in the package \(.*pkg/domains/quick.yaml\)"
                                                r" nor in a checkout \(.*tree/domains/quick.yaml\); reinstall labctl"):
        shipped.tree_path("domains/quick.yaml")


def test_only_shipped_paths_are_asked_for():
    with pytest.raises(ValueError, match="labctl/api.py: not a shipped path"):
        shipped.tree_path("labctl/api.py")
    with pytest.raises(ValueError, match="scripts/demo.sh: not a shipped path"):
        shipped.tree_path("scripts/demo.sh")


def test_a_checkout_s_commit_is_git_describe():
    want = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert buildinfo.git_describe(ROOT) == want
    assert buildinfo.version_line("9.9") == f"labctl 9.9 (commit {want}, checkout {buildinfo.CHECKOUT})"


def test_outside_a_work_tree_there_is_no_commit(tmp_path):
    assert buildinfo.git_describe(tmp_path) is None


def test_a_package_names_the_commit_it_was_built_from(monkeypatch, tmp_path):
    info = tmp_path / "_build.json"
    info.write_text(json.dumps({"version": "0.1.0", "commit": "abc1234"}))
    monkeypatch.setattr(buildinfo, "packaged", lambda: json.loads(info.read_text()))
    assert buildinfo.commit() == "abc1234"
    assert buildinfo.version_line("0.1.0") == "labctl 0.1.0 (commit abc1234, package)"


def test_the_cli_prints_it():
    from labctl.cli.app import run
    import io
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(["--version"])
    assert code == 0
    assert out.getvalue().startswith("labctl 0.1.0 (commit ") and "checkout" in out.getvalue()
