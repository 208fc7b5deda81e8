"""Building labgen for the tests: scripts/build-labgen.sh (cached, so a second call costs milliseconds)."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest

from tests.conftest import ROOT


@functools.lru_cache(maxsize=1)
def _build() -> str | None:
    """None when built, else why it cannot be."""
    if shutil.which("meson") is None or shutil.which("ninja") is None:
        return "meson/ninja not installed (scripts/setup-host.sh installs them)"
    if subprocess.run(["pkg-config", "--exists", "libdpdk"], check=False).returncode != 0:
        return "libdpdk-dev not installed"
    proc = subprocess.run([str(ROOT / "scripts" / "build-labgen.sh")], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"scripts/build-labgen.sh failed:\n{proc.stdout}{proc.stderr}")
    return None


def ensure_labgen() -> None:
    """Build labgen (once per session) or skip the test when the toolchain is missing."""
    reason = _build()
    if reason:
        pytest.skip(reason)
