"""libvirt's resource kinds in the ledger: domains, networks and image overlays (see :mod:`labctl.lab.ledger`)."""

from __future__ import annotations

import os

from labctl.lab.ledger import Resource, ResourceKind, resource_kind
from labctl.lab.libvirt import hypervisor


@resource_kind
class DomainKind(ResourceKind):
    """A libvirt domain on ``uri``: destroyed and undefined."""

    name = "domain"

    def remove(self, resource: Resource) -> None:
        hypervisor.remove_domain(resource.data["uri"], resource.ident)

    def verify(self, resource: Resource) -> bool:
        return hypervisor.lookup(resource.data["uri"], resource.ident) is not None


@resource_kind
class NetworkKind(ResourceKind):
    """A libvirt network labctl started (never one that was running before)."""

    name = "network"

    def remove(self, resource: Resource) -> None:
        hypervisor.stop_network(resource.data["uri"], resource.ident)

    def verify(self, resource: Resource) -> bool:
        return hypervisor.network_active(resource.data["uri"], resource.ident)


@resource_kind
class OverlayKind(ResourceKind):
    """A copy-on-write overlay of a user's image (``labctl.lab.libvirt.overlay``): removed; the image stays."""

    name = "overlay"

    def remove(self, resource: Resource) -> None:
        from labctl.lab.libvirt.overlay import remove

        remove(resource.ident)

    def verify(self, resource: Resource) -> bool:
        return os.path.lexists(resource.ident)
