"""Workloads: the forwarding workload's measurements (snapshots to metrics)."""
