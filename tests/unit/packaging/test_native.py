"""labctl/native.py: where labgen is found ($LABCTL_LABGEN, the package, the checkout) and what the error
says for each way labctl was installed."""

from __future__ import annotations

import pytest

from labctl import native, shipped
from labctl.errors import WorkloadError


def _exe(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def places(monkeypatch, tmp_path):
    """A package directory and a checkout build directory of our own, neither holding labgen."""
    monkeypatch.delenv(native.BINARY_ENV, raising=False)
    monkeypatch.setattr(native, "installed_dir", lambda: tmp_path / "pkg" / "bin")
    monkeypatch.setattr(native, "CHECKOUT_BUILD_DIR", tmp_path / "checkout" / "build" / "labgen")
    return tmp_path


def test_the_environment_comes_first(places, monkeypatch):
    _exe(places / "pkg" / "bin" / "labgen")
    own = _exe(places / "own" / "labgen")
    monkeypatch.setenv(native.BINARY_ENV, str(own))
    assert native.labgen_path() == own


def test_a_bad_environment_path_is_named(places, monkeypatch):
    monkeypatch.setenv(native.BINARY_ENV, str(places / "nope"))
    with pytest.raises(WorkloadError, match=r"LABCTL_LABGEN=.*nope: not an executable labgen"):
        native.labgen_path()


def test_the_package_comes_before_the_checkout(places):
    checkout = _exe(places / "checkout" / "build" / "labgen" / "labgen")
    assert native.labgen_path() == checkout
    packaged = _exe(places / "pkg" / "bin" / "labgen")
    assert native.labgen_path() == packaged


def test_a_file_that_is_not_executable_is_passed_over(places):
    (places / "pkg" / "bin").mkdir(parents=True)
    (places / "pkg" / "bin" / "labgen").write_text("not executable")
    checkout = _exe(places / "checkout" / "build" / "labgen" / "labgen")
    assert native.labgen_path() == checkout


def test_a_checkout_is_told_to_run_the_build_script(places, monkeypatch):
    monkeypatch.setattr(shipped, "is_checkout", lambda: True)
    with pytest.raises(WorkloadError, match=r"labgen is not built \(looked in .*pkg/bin and .*checkout/build/labgen\):"
                                            r" run scripts/build-labgen.sh"):
        native.labgen_path()


def test_an_installed_package_is_told_to_reinstall_never_a_script_it_lacks(places, monkeypatch):
    monkeypatch.setattr(shipped, "is_checkout", lambda: False)
    with pytest.raises(WorkloadError) as caught:
        native.labgen_path()
    assert "reinstall labctl from a package built on a host with meson, ninja and libdpdk-dev" in str(caught.value)
    assert "build-labgen.sh" not in str(caught.value)


def test_the_selftest_sits_beside_the_environment_s_labgen(places, monkeypatch):
    own = _exe(places / "own" / "labgen")
    monkeypatch.setenv(native.BINARY_ENV, str(own))
    with pytest.raises(WorkloadError, match="labgen-selftest is not built at .*own/labgen-selftest"):
        native.selftest_path()
    selftest = _exe(places / "own" / "labgen-selftest")
    assert native.selftest_path() == selftest


def test_this_checkout_is_a_checkout():
    assert shipped.is_checkout()
    assert native.CHECKOUT_BUILD_DIR == shipped.CHECKOUT / "build" / "labgen"
