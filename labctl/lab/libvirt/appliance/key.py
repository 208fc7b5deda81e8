"""What the appliance is made from (``KeyInputs``) and its cache key (``compute_key``).

The cache key is a hash of: the kernel .deb's SHA-256 (from the apt index, checked after download), the
versions of the Debian packages whose files are copied, init.sh's content, the module and plugin lists,
``BUILDER_VERSION`` and, for a build's forwarder, that binary's sha256.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from labctl import platform
from labctl.lab.libvirt.appliance.modules import MODULE_GROUPS

# Bump when the builder makes a different image from the same inputs.
BUILDER_VERSION = "2"  # 2: the ELF kernel (PVH) and an uncompressed cpio initramfs


@dataclass(frozen=True)
class KeyInputs:
    """Everything the appliance is made from; ``compute_key`` hashes it."""

    kernel_package: str
    kernel_deb_version: str
    kernel_deb_sha256: str
    packages: Mapping[str, str]
    init_sh_sha256: str
    builder_version: str = BUILDER_VERSION
    modules: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(MODULE_GROUPS))
    plugins: tuple[str, ...] = platform.GUEST_DPDK_PLUGINS
    kernel_deb_filename: str = ""  # where apt fetches it from; not part of the key
    #: a build's forwarder carried as the appliance's dpdk-testpmd: its sha256 is part of the key (so two builds
    #: never share an image), left out when empty (the stock appliance's key is unchanged); its path is not
    forwarder_sha256: str = ""
    forwarder_path: str = ""

    def canonical(self) -> str:
        data = asdict(self)
        data.pop("kernel_deb_filename")
        data.pop("forwarder_path")
        if not self.forwarder_sha256:
            data.pop("forwarder_sha256")
        data["packages"] = dict(sorted(self.packages.items()))
        data["modules"] = {k: list(v) for k, v in sorted(self.modules.items())}
        data["plugins"] = list(self.plugins)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))


def compute_key(inputs: KeyInputs) -> str:
    """The cache key: SHA-256 of the canonical form of the inputs."""
    return hashlib.sha256(inputs.canonical().encode()).hexdigest()
