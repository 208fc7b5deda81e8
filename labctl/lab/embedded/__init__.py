"""The embedded lab (no VM): a vswitch testpmd with net_vhost ports and a guest testpmd with net_virtio_user ports."""
