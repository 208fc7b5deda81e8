"""The appliance builder's plumbing: running host tools (apt, dpkg, ldd, busybox) with their failures as
``ApplianceError``, progress messages, and file hashes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from labctl.errors import ApplianceError

Progress = Callable[[str], None] | None


def say(progress: Progress, msg: str) -> None:
    """Pass ``msg`` to the caller's progress callback, if there is one."""
    if progress is not None:
        progress(msg)


def run(args: list[str], *, cwd: Path | None = None, check: bool = True,
        timeout: float | None = 900) -> subprocess.CompletedProcess[str]:
    """Run a host tool; its absence, a timeout or (with ``check``) a failure is an ``ApplianceError``."""
    try:
        proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except FileNotFoundError as exc:
        raise ApplianceError(f"{args[0]} is not installed: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise ApplianceError(f"{' '.join(args)} timed out after {timeout} s") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ApplianceError(f"{' '.join(args)} failed ({proc.returncode}): "
                             f"{detail[-1] if detail else 'no output'}")
    return proc
