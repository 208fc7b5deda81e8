"""DPDK processes: EAL options and memory, testpmd, the telemetry client."""
