"""The appliance builder's tool helpers: :mod:`labctl.lab.libvirt.buildtools` with its failures as
``ApplianceError`` and a 15-minute default timeout."""

from __future__ import annotations

from functools import partial

from labctl.errors import ApplianceError
from labctl.lab.libvirt import buildtools
from labctl.lab.libvirt.buildtools import Progress, say

__all__ = ["Progress", "release", "run", "say"]

run = partial(buildtools.run, error=ApplianceError, timeout=900)
release = partial(buildtools.release, error=ApplianceError)
