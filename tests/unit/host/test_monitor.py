"""The thread monitor: CPU per thread, affinity, and two busy pollers on one CPU flagged (and only then)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from labctl.host.monitor import ThreadMonitor

# the spinners must get their CPUs to themselves: not beside the parallel unit tests (make test)
pytestmark = pytest.mark.serial

SPIN = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.time() + 20\nwhile time.time() < end: pass\n"


def spinners(cpus: list[int]) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)]) for cpu in cpus]


def watch(procs: list[subprocess.Popen], seconds: float = 3.0):
    monitor = ThreadMonitor({f"spin{i}": p.pid for i, p in enumerate(procs)}, interval_s=0.5)
    time.sleep(0.3)
    monitor.start()
    time.sleep(seconds)
    report = monitor.stop()
    for proc in procs:
        proc.kill()
        proc.wait()
    return report


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_two_pollers_on_one_cpu_are_flagged():
    report = watch(spinners([1, 1]))
    assert list(report.shared_busy_cpus) == [1]
    assert len(report.shared_busy_cpus[1]) == 2 and report.warnings()
    busy = [t for t in report.threads if t.cpu_pct > 20]
    assert len(busy) == 2 and all(t.affinity == [1] for t in busy)
    assert sum(t.cpu_pct for t in busy) < 130  # they share one CPU


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_pollers_on_separate_cpus_are_not_flagged():
    report = watch(spinners([0, 1]))
    assert report.shared_busy_cpus == {} and report.warnings() == []
    assert sorted(t.affinity for t in report.threads if t.cpu_pct > 50) == [[0], [1]]
    assert report.cost_pct > 0 and report.window_s > 2  # the sampler measured itself over the window
    assert {k.split("/")[0] for k in report.cpu_by_role()} == {"spin0", "spin1"}
