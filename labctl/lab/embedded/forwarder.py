"""The guest forwarder: testpmd forwarding between the guest's virtio ports in the profile's mode.

In the embedded lab it runs on the host with ``net_virtio_user`` ports (real split rings and the
real vhost-user handshake, no VM); in the libvirt lab the appliance runs the same settings inside
the guest on the virtio-net PCI devices.
"""

from __future__ import annotations

from pathlib import Path

from labctl.host.cpuset import parse_cpuset
from labctl.profile.schema import Profile
from labctl.dpdk.testpmd import EalOptions, Testpmd, TestpmdOptions, mbuf_budget
from labctl.lab.embedded.vswitch import devarg_path, lcores_argument


def effective_rings(profile: Profile) -> tuple[int, int]:
    """The descriptors the forwarder uses: virtio PMDs cap --rxd/--txd at the virtqueue size."""
    nics = profile.guest.nics
    rxd = min(profile.workload.rxd, min(n.rx_queue_size for n in nics))
    txd = min(profile.workload.txd, min(n.tx_queue_size for n in nics))
    return rxd, txd


def noisy_arguments(profile: Profile) -> list[str]:
    if profile.workload.mode != "noisy":
        return []
    n = profile.workload.noisy
    return [f"--noisy-tx-sw-buffer-size={n.tx_sw_bufsz}", f"--noisy-tx-sw-buffer-flushtime={n.tx_sw_buf_flushtime}",
            f"--noisy-lkup-memory={n.lkup_memory_mib}", f"--noisy-lkup-num-reads={n.lkup_num_reads}",
            f"--noisy-lkup-num-writes={n.lkup_num_writes}",
            f"--noisy-lkup-num-reads-writes={n.lkup_num_reads_writes}"]


def noisy_memory_mb(profile: Profile) -> int:
    """noisy mode allocates its lookup memory (and a software TX ring) from DPDK's heap once per
    port (testpmd 22.11 noisy_fwd_begin)."""
    if profile.workload.mode != "noisy":
        return 0
    noisy = profile.workload.noisy
    ring_mb = -(-noisy.tx_sw_bufsz * 8 // (1 << 20)) + 1
    memory_mb = len(profile.guest.nics) * (noisy.lkup_memory_mib + ring_mb)
    return memory_mb + memory_mb % 2  # whole 2 MiB pages


def forwarder_options(profile: Profile) -> TestpmdOptions:
    rxd, txd = effective_rings(profile)
    queues = max(n.queues for n in profile.guest.nics)
    mbufs, _memory = mbuf_budget(len(profile.guest.nics), queues, rxd, txd)
    return TestpmdOptions(forward_mode=profile.workload.mode, nb_cores=profile.guest.vcpus, rxq=queues,
                          txq=queues, rxd=rxd, txd=txd, burst=profile.workload.burst, total_mbufs=mbufs,
                          extra=noisy_arguments(profile))


def vcpu_cpusets(profile: Profile) -> list[frozenset[int] | None]:
    pins = profile.guest.pinning.vcpus
    return [parse_cpuset(pins[i]) if i in pins else None for i in range(profile.guest.vcpus)]


def embedded_forwarder(profile: Profile, sockets: list[Path], file_prefix: str, hugepages_dir: Path | None,
                       log_path: Path, server: bool = False) -> Testpmd:
    """``server``: the virtio_user ports listen on their sockets (the vswitch connects as a client)."""
    vdevs = []
    role = ",server=1" if server else ""
    for i, (nic, sock) in enumerate(zip(profile.guest.nics, sockets)):
        size = max(nic.rx_queue_size, nic.tx_queue_size)
        vdevs.append(f"net_virtio_user{i},path={devarg_path(sock)},queues={nic.queues},queue_size={size}{role}")
    app = forwarder_options(profile)
    _mbufs, memory_mb = mbuf_budget(len(profile.guest.nics), app.rxq, app.rxd or 1024, app.txd or 1024,
                                    hugepages_dir is not None)
    eal = EalOptions(file_prefix=file_prefix, lcores=lcores_argument(vcpu_cpusets(profile)), vdevs=vdevs,
                     memory_mb=memory_mb + noisy_memory_mb(profile), hugepages_dir=hugepages_dir)
    return Testpmd("guest", eal, app, log_path)
