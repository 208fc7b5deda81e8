"""The guest image builder's tool helpers: :mod:`labctl.lab.libvirt.buildtools` with its failures as
``GuestImageError`` and a 30-minute default timeout (mmdebstrap is given an hour by ``rootfs``)."""

from __future__ import annotations

from functools import partial

from labctl.errors import GuestImageError
from labctl.lab.libvirt import buildtools
from labctl.lab.libvirt.buildtools import Progress, mounts_under, processes_in, say, stop_group

__all__ = ["Progress", "loops_under", "mounts_under", "processes_in", "release", "run", "say", "stop_group"]

run = partial(buildtools.run, error=GuestImageError, timeout=1800)
loops_under = partial(buildtools.loops_under, error=GuestImageError)
release = partial(buildtools.release, error=GuestImageError)
