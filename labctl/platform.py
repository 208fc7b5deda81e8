"""Facts about QEMU, libvirt, DPDK and Debian that labctl relies on, each stated once with its source.

Rules, the domain XML, the negotiation report, the advisor, the host checks and the appliance all
read these names; none of them writes the number again.
"""

from __future__ import annotations

from pathlib import Path

# --- virtio-net in QEMU ------------------------------------------------------------------------------

#: Ring sizes QEMU accepts for virtio-net rx_queue_size / tx_queue_size: powers of two from 256 to 1024.
#: Source: QEMU hw/net/virtio-net.c (VIRTIO_NET_RX_QUEUE_MIN_SIZE, VIRTQUEUE_MAX_SIZE).
RING_SIZES: tuple[int, ...] = (256, 512, 1024)

#: QEMU caps tx_queue_size at this unless the backend is vhost-user: tap, network and user backends
#: give a 256-entry tx ring in the guest. Source: QEMU virtio_net_max_tx_queue_size(); seen in the guest
#: on these machines (tap, network and user: 256; vhost-user: 1024).
TX_RING_CAP = 256

#: The only NIC backend whose tx ring may exceed :data:`TX_RING_CAP`.
UNCAPPED_TX_BACKEND = "vhostuser"

#: virtio-net queue pairs: 1..256 (virtio spec 5.1.4, max_virtqueue_pairs); a Linux guest enables
#: min(queues, vCPUs) of them (Linux drivers/net/virtio_net.c).
MAX_QUEUE_PAIRS = 256


def tx_ring_cap(backend: str) -> int | None:
    """The largest tx ring QEMU gives a NIC of ``backend`` (None: the ring sizes' own maximum)."""
    return None if backend == UNCAPPED_TX_BACKEND else TX_RING_CAP


# --- QEMU under TCG -----------------------------------------------------------------------------------

#: Guest kernel argument that keeps QEMU 7.2 under TCG from segfaulting with vhost-user + MSI-X.
#: A TCG-only workaround: never on KVM. Seen on these machines (QEMU 7.2.22).
TCG_VHOSTUSER_CMDLINE = "pci=nomsi"

# --- libvirt on Debian --------------------------------------------------------------------------------

#: Debian's qemu.conf runs QEMU as libvirt-qemu:libvirt-qemu; vhost-user sockets are given to this group
#: (mode 0660), never to the world.
QEMU_GROUP = "libvirt-qemu"

#: Where libvirt's QEMU driver writes a running domain's pid file (``<domain>.pid``).
LIBVIRT_QEMU_RUN_DIRS: tuple[Path, ...] = (Path("/run/libvirt/qemu"), Path("/var/run/libvirt/qemu"))

#: libvirtd's socket: the daemon is up when it exists.
LIBVIRT_SOCKETS: tuple[Path, ...] = (Path("/run/libvirt/libvirt-sock"), Path("/var/run/libvirt/libvirt-sock"))

# --- DPDK 22.11 on Debian 12 --------------------------------------------------------------------------

#: A DPDK process's runtime directory (telemetry socket, config) is ``<root>/<file-prefix>``.
DPDK_RUNTIME_ROOT = Path("/var/run/dpdk")

#: Debian's DPDK library directory; the EAL plugins live in its ``pmds-<ABI>`` subdirectory.
DPDK_LIBDIR = Path("/usr/lib/x86_64-linux-gnu/dpdk")

#: PMD plugins the host side needs (the embedded lab and the vswitch): vhost-user ports, virtio_user
#: ports, the ring mempool. Debian packages: librte-net-vhost23, librte-net-virtio23, librte-mempool-ring23.
HOST_DPDK_PLUGINS: tuple[str, ...] = ("librte_net_vhost", "librte_net_virtio", "librte_mempool_ring")

#: PMD plugins the guest appliance carries: the EAL loads every .so of its plugin directory at start, so
#: only what its NICs need goes there (PCI and vdev buses, the virtio PMD, the e1000/e1000e PMD
#: net_e1000_em for QEMU's emulated Intel NICs, ring mempool).
GUEST_DPDK_PLUGINS: tuple[str, ...] = ("librte_bus_pci", "librte_bus_vdev", "librte_net_virtio",
                                       "librte_net_e1000", "librte_mempool_ring")

#: testpmd's burst limit (MAX_PKT_BURST in app/test-pmd/testpmd.h).
MAX_BURST = 512

# --- kernel-stack workload tools (Debian 12) -----------------------------------------------------------

#: iperf3 3.12 (Debian 12) runs every stream of one process on one thread (`-P N` adds streams, not
#: cores; multi-threaded iperf3 came with 3.16): one client/server process pair per session. Its
#: ``cpu_utilization_percent`` is that process only. Source: iperf3 3.16 release notes ("multi-threaded").
IPERF3 = "iperf3"

#: sockperf 3.7 (Debian 12) ping-pong mode: one TCP connection per client process, request/response
#: round trips as fast as they come back (``--mps=max``). netperf is not packaged in Debian 12.
SOCKPERF = "sockperf"

#: Parallel sessions of a tcp workload: each is one client and one server process and a port; the
#: reference tables go up to 96 sessions.
MAX_TCP_SESSIONS = 128

#: Where the host has no /dev/vhost-net, a tap/network NIC runs QEMU's userspace virtio-net backend
#: (``<driver name='qemu'>``); with it, the vhost-net kernel worker (``<driver name='vhost'>``).
VHOST_NET_DEVICE = Path("/dev/vhost-net")
