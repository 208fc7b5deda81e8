"""EAL memory sizing: the mbuf budget against what DPDK was measured to use."""

from __future__ import annotations

import pytest

from labctl.dpdk.eal import EAL_HEADROOM_MB, mbuf_budget

# EAL heap in use (telemetry /eal/heap_info, DPDK 22.11, vswitch testpmd with 2 net_vhost ports x 4
# queues): 36864 mbufs took 100.2 MB on 2 MiB pages and 163.8 MB with --no-huge; 16384 took 51.4 MB on
# 2 MiB pages.
MEASURED_MB = [((2, 4, 1024, 1024), True, 100.2), ((2, 4, 1024, 1024), False, 163.8), ((2, 1, 256, 256), True, 51.4)]


@pytest.mark.parametrize("shape,hugepages,used_mb", MEASURED_MB)
def test_mbuf_budget_covers_what_dpdk_used(shape, hugepages, used_mb):
    mbufs, memory_mb = mbuf_budget(*shape, hugepages=hugepages)
    assert mbufs == (36864 if shape[1] == 4 else 16384)
    assert memory_mb % 2 == 0  # whole 2 MiB pages, so two processes' pages add up
    assert used_mb + 8 <= memory_mb <= used_mb + EAL_HEADROOM_MB + 16  # room to spare, no blanket floor


def test_hugepages_need_less_memory_than_4k_pages():
    assert mbuf_budget(2, 1, 256, 256, True)[1] < mbuf_budget(2, 1, 256, 256, False)[1]
