"""The lab's name, its libvirt URI and the guest's size."""

from __future__ import annotations

import re
from typing import Iterator

from labctl.errors import Problem
from labctl.profile.rules.registry import err, out_of_range, rule
from labctl.profile.schema import Profile


NAME_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")
URI_PATTERN = re.compile(r"^(qemu|test)(\+(ssh|tcp|tls|unix|libssh|libssh2))?://[A-Za-z0-9._@:\[\]-]*/[A-Za-z0-9._/-]*(\?[A-Za-z0-9._=&/-]*)?$")


@rule("name", "The name becomes a libvirt domain name, the DPDK file prefix labctl-<name> (the runtime "
      "directory /var/run/dpdk/labctl-<name>), file names under /run/labctl and XML text: lowercase letters, "
      "digits and '-' cannot break any of them.",
      "libvirt domain XML <name>, alphanumeric (https://libvirt.org/formatdomain.html#general-metadata); "
      "DPDK EAL --file-prefix (https://doc.dpdk.org/guides/linux_gsg/linux_eal_parameters.html)")
def _name(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if not NAME_PATTERN.match(p.name):
        shown = p.name if len(p.name) <= 40 else p.name[:37] + "..."
        yield err("name", f"{shown!r} is not allowed (allowed: 1-40 of a-z, 0-9 and '-', "
                           "starting and ending with a letter or digit)")


@rule("uri", "Only the libvirt backend talks to libvirt; a URI is a plain libvirt URI without spaces "
      "or shell characters.", "libvirt URI format (https://libvirt.org/uri.html)")
def _uri(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.uri is None:
        return
    if p.backend != "libvirt":
        yield err("uri", "only the libvirt backend takes a uri (allowed: leave it out for embedded)")
    elif not URI_PATTERN.match(p.uri):
        yield err("uri", f"{p.uri[:60]!r} is not a libvirt URI (allowed: qemu:///system, qemu:///session, "
                          "test:///default, qemu+ssh://host/system)")


@rule("guest-size", "A guest needs at least one vCPU and enough memory for the DPDK forwarder; "
      "hugepage-backed memory comes in whole 2 MiB pages.", "QEMU -smp/-m, DPDK EAL memory")
def _guest_size(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from out_of_range("guest.vcpus", p.guest.vcpus, 1, 64)
    yield from out_of_range("guest.memory_mib", p.guest.memory_mib, 256, 262144, " MiB")
    if p.guest.hugepages and p.guest.memory_mib % 2:
        yield err("guest.memory_mib", f"{p.guest.memory_mib} is not a multiple of 2 MiB "
                                       "(allowed: even values when hugepages is true)")
