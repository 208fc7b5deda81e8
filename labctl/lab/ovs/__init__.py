"""labctl's own OVS-DPDK as the host-side vswitch: a private ovsdb-server and ovs-vswitchd-dpdk.

Never the host's system instance (its DB, sockets, logs and pid files are not used or read), never a
host PCI device. Use::

    switch = OvsSwitch(name, state, run_dir, log_dir, pmd_cpus=frozenset({0}), hugepages_mount=mount)
    switch.start()                                    # DB, ovsdb-server, ovs-vswitchd (DPDK up), bridge
    switch.add_vhostuser_client("gen0", sock, n_rxq)  # dpdkvhostuserclient: the other side listens
    switch.connect("gen0", "vm0")                     # in_port=gen0 -> vm0 and back; before traffic
    switch.configure(tx_flush_interval=50, pmd_rxq_affinity={"vm0": {0: 0}})
    switch.wait_connected()                           # every port connected, its n_rxq queues polled
    switch.clear_stats()                              # the measurement window starts
    record.details["ovs"] = {"pmd": switch.pmd_stats(), "ports": switch.port_stats()}
    switch.stop()                                     # graceful; then ledger.teardown(state) as always

Facts relied on, with their sources (OVS 3.1.0 and DPDK 22.11 as Debian 12 ships them)
-------------------------------------------------------------------------------------
Package (Debian ``openvswitch-switch-dpdk`` 3.1.0-2+deb12u1, pulling ``openvswitch-switch``/``-common``):
  installs non-interactively (DEBIAN_FRONTEND=noninteractive, ~6 s here). openvswitch-switch's postinst
  runs ``invoke-rc.d openvswitch-switch start`` and ``deb-systemd-helper enable``: on a host whose
  policy-rc.d allows it, that starts the *system* instance (``/etc/openvswitch/conf.db`` ->
  ``/var/lib/openvswitch``, ``/var/run/openvswitch``, ``/var/log/openvswitch``) with the non-DPDK
  ovs-vswitchd (update-alternatives: ``/usr/lib/openvswitch-switch/ovs-vswitchd`` priority 100 over
  ``/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk`` 50). Seen here: "policy-rc.d denied execution
  of start", nothing started. labctl runs the DPDK binary by its path, with its own DB file, run dir
  (OVS_RUNDIR, --unixctl, --pidfile), log files, DPDK --file-prefix and network namespace, and every
  client command names the private socket (``ovs-vsctl --db=unix:``, ``ovs-appctl -t``,
  ``ovs-ofctl ... unix:<bridge>.mgmt``): the two instances never meet.

Open_vSwitch other_config (ovs-vswitchd.conf.db(5)):
  ``dpdk-init=true`` makes ovs-vswitchd abort when DPDK cannot be initialised (seen: exit -6 with
  "EMER|Unable to initialize DPDK: Invalid argument"); ``dpdk-lcore-mask``/``pmd-cpu-mask`` are hex
  masks, lowest bit CPU 0 (without pmd-cpu-mask: one PMD per NUMA node); ``dpdk-socket-mem``
  preallocates and ``dpdk-socket-limit`` caps hugepage memory per socket; ``dpdk-hugepage-dir`` is the
  hugetlbfs mount; ``dpdk-extra`` is appended to the EAL arguments. Changing dpdk-* requires restarting
  the daemon, so labctl writes them (``--no-wait``) before starting it. ``tx-flush-interval``: µs a
  packet may wait in an output batch, 0..1000000, default 0. ``emc-insert-inv-prob``: 1/N insertion
  probability, default 100, 0 disables the EMC. ``smc-enable``: default false. ``pmd-rxq-assign``:
  cycles (default) | group | roundrobin. ``stats-update-interval``: the Interface statistics column is
  refreshed every 5000 ms at the most often (its minimum).
Interface (ovs-vswitchd.conf.db(5); OVS docs topics/dpdk/vhost-user): ``type=dpdkvhostuserclient`` with
  ``options:vhost-server-path`` (OVS is the vhost-user client, the VM/virtio side the server, and OVS
  reconnects by itself: seen, "failed to connect ... reconnecting..." until the socket exists).
  ``options:n_rxq`` is "not supported by DPDK vHost interfaces": the port takes its queue count from
  the virtio device when it connects (seen: n_rxq=2 on a 1-queue device left requested_rx_queues=1), so
  labctl does not write it and checks the count it expects in ``wait_connected``.
  ``other_config:pmd-rxq-affinity`` is ``<queue-id>:<core-id>,...``; PMDs with pinned queues become
  isolated; a core without a PMD makes OVS give the queue to some non-isolated PMD (topics/dpdk/pmd), so
  labctl refuses such a core.
Bridge (ovs-vswitchd.conf.db(5); topics/dpdk/bridge): ``datapath_type=netdev`` for DPDK ports;
  ``fail_mode=secure`` sets up no flow with no controller, where standalone installs a priority-0
  NORMAL (MAC learning) flow (seen: NORMAL forwarded the loop before any flow was added), so only the
  port-to-port flows forward. Custom port statistics (``ovs_*``) come with OpenFlow 1.4 port stats
  (``protocols`` must include OpenFlow14; ``ovs-ofctl -O OpenFlow14 dump-ports``).
Statistics (ovs-vswitchd(8); topics/dpdk/pmd): PMD stats are cumulative: clear them
  (``dpif-netdev/pmd-stats-clear``) at the start of a window. "idle cycles" are PMD iterations that
  forwarded nothing, "processing cycles" those that forwarded at least one packet (polling, processing,
  transmitting). ``pmd-rxq-show`` shows each rxq's PMD usage over 60 s by default, ``-secs`` 5..60 in
  5 s steps (added in 3.1.0), "NOT AVAIL" until there is history.
Memory (OVS lib/netdev-dpdk.c): the shared mempool starts at 262144 mbufs and halves on failure down to
  16384. Seen: with socket-mem = socket-limit = 256 MB the pool got 65536 mbufs of 3008 B (~197 MB;
  heap 256 MB, 200 MB used); with no limit it took 131072 (394 MB) of whatever was free. labctl sets
  the limit equal to socket-mem, so OVS takes exactly what labctl reserved.

Observed on this project's machines (2-vCPU Debian 12 VM, noisy; figures are functional, not targets)
-----------------------------------------------------------------------------------------------------
- OVS builds the EAL arguments ``--no-pci --file-prefix P -c <lcore mask> --huge-dir D --socket-mem N
  --in-memory``: hugepages are required (``--no-huge`` fails: "--legacy-mem is not compatible with
  --in-memory") and no hugepage file is left; the runtime dir /var/run/dpdk/<prefix> (telemetry socket)
  is, after a kill. Without ``--no-pci`` EAL probes the VM's own virtio NIC (0000:00:03.0).
- Start (DB created to DPDK initialised and bridge added): ~1.0 s with 256 MB; stop ~0.1 s.
- ovs-vswitchd makes ``<bridge>.mgmt``/``.snoop`` in OVS_RUNDIR, and the netdev datapath makes
  *persistent* taps named ``ovs-netdev`` (one name per host) and after each bridge: they stay after a
  kill -9, and a second instance in the same network namespace fails ("ovs-netdev: creating tap
  device failed: Device or resource busy"). Hence ovs-vswitchd runs under ``unshare --net``.
- Threads: with dpdk-lcore-mask=0x2 and pmd-cpu-mask=0x1, the main thread and those it starts
  (handler, revalidator, urcu, ovs_vhost) run on CPU 1; DPDK's control threads (eal-intr-thread,
  telemetry, vhost-events, vhost_reconn) on CPU 0, next to the PMD (DPDK gives them the CPUs outside
  the lcore mask).
- A looped ``--tx-first`` burst is lost for good when it meets a bridge without flows (deleting the
  NORMAL flow mid-loop stopped all traffic): install flows before traffic.
- In_port-only flows are served by OVS 3.1's simple match cache (simple match hits = packets).
- One PMD on CPU 0, testpmd io forwarding on CPU 1, 64-byte frames: 2.33 Mpps per port through the
  NORMAL flow; with port-to-port flows runs landed in two bands, ~2.8-2.9 and ~4.7-5.0 Mpps per port,
  with 255-361 processing cycles per packet and the PMD idle 2-21 % of its cycles. A second PMD on
  the testpmd's CPU collapsed it (~1 Mpps out, 2 kpps back). pmd-rxq-show's usage stays "NOT AVAIL"
  for the first seconds (no full interval of history yet). The Interface statistics column lagged: over one 3 s window it moved 6.4 M packets
  while the live counters moved ~14.5 M, so ``port_stats`` reads OpenFlow port stats, which are live.
"""

from labctl.lab.ovs.switch import OvsSwitch, default_lcores, pmd_cpus_of

__all__ = ["OvsSwitch", "default_lcores", "pmd_cpus_of"]
