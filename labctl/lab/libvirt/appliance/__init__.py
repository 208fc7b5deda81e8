"""The workload appliance: a kernel and an initramfs that boot a guest straight into its job.

``cache.build()`` makes it from Debian packages and caches it by a hash of its inputs:

* the kernel comes from ``linux-image-amd64`` (the metapackage is resolved to the image package it
  depends on, which is fetched with ``apt-get download`` and unpacked with ``dpkg -x``; never installed):
  ``kernel``;
* the initramfs (``cpio -o -H newc``, uncompressed: :mod:`labctl.lab.libvirt.appliance.pvh`) holds busybox, the virtio stack and the uio/vfio modules of
  that kernel (decompressed, so busybox ``insmod`` can load them), ethtool, ``dpdk-testpmd`` with the
  shared libraries ``ldd`` finds for it, and the few DPDK PMD plugins a virtio guest needs (EAL loads
  every plugin of its plugin directory, so only those are put there): ``image``, ``modules``;
* its ``/init`` is ``labctl/lab/libvirt/appliance/files/init.sh``: it reads
  ``labctl.mode=verify|workload`` and the other ``labctl.*`` parameters from the kernel command line and
  reports on the serial console with ``LABCTL-*`` lines: ``console`` (``kernel_cmdline``,
  ``parse_console``).

A build's forwarder (``builds.NAME.forwarder`` on a libvirt guest) is carried as the appliance's
``dpdk-testpmd`` instead of Debian's, in a cache entry of its own: its sha256 is part of the key (left out
of the stock key, which is unchanged). It runs on the appliance's libraries, so every library it needs must
be one the appliance carries (``image.missing_libraries``, checked before anything starts).

The cache key (``key``) is a hash of everything the appliance is made from; ``cache`` holds the
entries, ``cached()`` and ``build()`` (over :mod:`labctl.lab.libvirt.buildcache`, the guest image's cache too);
``tools`` runs the host tools the builder needs (:mod:`labctl.lab.libvirt.buildtools`).
"""
