"""The guest's NICs: how many, their queues and virtio ring sizes, what each backend caps, what the embedded lab can carry."""

from __future__ import annotations

from typing import Iterator

from labctl import platform
from labctl.errors import Problem
from labctl.profile.rules.registry import err, out_of_range, rule, warn
from labctl.profile.schema import Profile


@rule("nic-count", "The forwarding workload needs one or two ports (io/mac forward between two, or "
      "back out of one); more NICs are allowed for provisioning.", "testpmd port topology")
def _nic_count(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    yield from out_of_range("guest.nics", len(p.guest.nics), 1, 8, " NICs")


@rule("queues", "virtio-net supports 1..256 queue pairs; a Linux guest enables min(queues, vcpus), so "
      "extra queues are wasted.", "virtio spec 5.1.4 (max_virtqueue_pairs), Linux virtio_net.c")
def _queues(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        path = f"guest.nics.{i}.queues"
        if not 1 <= nic.queues <= platform.MAX_QUEUE_PAIRS:
            yield err(path, f"{nic.queues} is out of range (allowed: 1..{platform.MAX_QUEUE_PAIRS})")
        elif nic.queues > p.guest.vcpus:
            yield warn(path, f"{nic.queues} queues on {p.guest.vcpus} vCPUs: a kernel guest enables only "
                              f"{p.guest.vcpus} (min(queues, vcpus))")


@rule("ring-size", "QEMU accepts virtio-net ring sizes that are powers of two from 256 to 1024.",
      "QEMU hw/net/virtio-net.c (VIRTIO_NET_RX_QUEUE_MIN_SIZE, VIRTQUEUE_MAX_SIZE)")
def _ring_size(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        for field in ("rx_queue_size", "tx_queue_size"):
            value = getattr(nic, field)
            if value not in platform.RING_SIZES:
                allowed = ", ".join(map(str, platform.RING_SIZES))
                yield err(f"guest.nics.{i}.{field}", f"{value} is not allowed (allowed: {allowed})")


@rule("tx-ring-backend", "QEMU caps tx_queue_size at 256 unless the backend is vhost-user; tap, network "
      "and user backends give a 256-entry tx ring in the guest.",
      "QEMU virtio_net_max_tx_queue_size(); seen in the guest on these machines")
def _tx_ring_backend(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    for i, nic in enumerate(p.guest.nics):
        cap = platform.tx_ring_cap(nic.backend)
        if cap is not None and nic.tx_queue_size > cap:
            yield err(f"guest.nics.{i}.tx_queue_size",
                       f"{nic.tx_queue_size} needs backend {platform.UNCAPPED_TX_BACKEND}; QEMU caps {nic.backend} at "
                       f"{cap} (allowed: {cap})")


@rule("embedded-backend", "The embedded lab connects DPDK virtio_user ports to the vswitch over vhost-user; "
      "it has no tap or libvirt network.", "DPDK net_virtio_user")
def _embedded_backend(p: Profile, cpus: frozenset[int]) -> Iterator[Problem]:
    if p.backend != "embedded":
        return
    for i, nic in enumerate(p.guest.nics):
        if nic.backend != "vhostuser":
            yield err(f"guest.nics.{i}.backend", f"{nic.backend} cannot run in the embedded lab (allowed: vhostuser)")
