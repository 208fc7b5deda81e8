"""The host's unsteadiness second by second (labctl.host.stalls): steal time and involuntary switches."""

from __future__ import annotations

import os
import threading
import time

import pytest

from labctl.host import stalls
from labctl.host.stalls import HostSecond, StallSampler, involuntary_switches, mark_stalls, steal_ticks

STAT = """cpu  100 5 50 1000 7 0 3 42 11 0
cpu0 50 2 25 500 3 0 1 20 5 0
intr 12345
"""


def test_steal_is_the_eighth_field_of_the_cpu_line():
    assert steal_ticks(STAT) == (42, 100 + 5 + 50 + 1000 + 7 + 0 + 3 + 42)  # guest time is inside user
    with pytest.raises(ValueError, match="no cpu line"):
        steal_ticks("intr 1\n")
    steal, total = steal_ticks()  # this host's own
    assert 0 <= steal <= total


def test_involuntary_switches_of_a_busy_thread_are_counted():
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        before = involuntary_switches([os.getpid()])
        time.sleep(0.3)
        after = involuntary_switches([os.getpid()])
    finally:
        stop.set()
        spinner.join()
    assert set(after) >= set(before) and all(after[k] >= before[k] for k in before)
    assert all(k.startswith(f"{os.getpid()}/") for k in after)
    assert involuntary_switches([2**22 + 12345]) == {}  # a process that is not there: nothing


def test_a_second_is_a_stall_by_steal_or_by_switches_well_above_the_median():
    seconds = [HostSecond(i, steal_ms=0.0, invol=5, top_thread=None) for i in range(10)]
    seconds[3] = HostSecond(3, steal_ms=stalls.STEAL_STALL_MS, invol=5, top_thread=None)
    seconds[6] = HostSecond(6, steal_ms=0.0, invol=25, top_thread="1/2 rte-worker-1")  # 5x the median, over 20
    seconds[8] = HostSecond(8, steal_ms=0.0, invol=19, top_thread=None)  # under the floor
    assert mark_stalls(seconds) == [i in (3, 6) for i in range(10)]
    busy = [HostSecond(i, 0.0, 100, None) for i in range(9)] + [HostSecond(9, 0.0, 300, None)]
    assert mark_stalls(busy) == [False] * 9 + [False]  # 3x a busy median is that host's normal
    assert mark_stalls([]) == []


def test_the_sampler_reports_each_second():
    sampler = StallSampler([os.getpid()], period_s=0.1).start()
    time.sleep(0.45)
    seconds = sampler.stop()
    assert 3 <= len(seconds) <= 5
    assert all(b.mono_ns > a.mono_ns for a, b in zip(seconds, seconds[1:]))
    assert all(s.steal_ms >= 0 and s.invol >= 0 for s in seconds)
