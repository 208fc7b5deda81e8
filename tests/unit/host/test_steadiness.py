"""The host steadiness probe: its verdict on known samples, its bounds, and a real (short) probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

from labctl.errors import ProbeError, UserError
from labctl.host import steadiness
from labctl.host.steadiness import STEADY_SPREAD, Sample, probe, summarise


def _samples(cpu_rates: list[float], copy_rates: list[float]) -> list[Sample]:
    return [Sample(t=0.5 * i, cpu=i % 2, cpu_rate=c, copy_gbps=m) for i, (c, m) in enumerate(zip(cpu_rates, copy_rates))]


def test_quiet_host_is_steady():
    s = summarise(_samples([1000 + (i % 3) for i in range(20)], [30.0 + 0.1 * (i % 4) for i in range(20)]), 5, 0.5)
    assert s.verdict == "steady"
    assert s.cpu_spread < 0.01 and s.copy_spread < 0.02
    assert s.describe().startswith("steady:") and "CPUs 0,1" in s.describe()


def test_two_band_host_is_unsteady():
    # ten seconds fast, then ten seconds at half speed: what a busy neighbour does
    cpu = [1000.0] * 20 + [500.0] * 20
    copy = [30.0] * 20 + [12.0] * 20
    s = summarise(_samples(cpu, copy), 20, 0.5)
    assert s.verdict == "unsteady"
    assert s.cpu_spread == pytest.approx(1.0)
    assert "two-band" in s.describe() and "spread 100%" in s.describe()


def test_one_unsteady_rate_is_enough():
    s = summarise(_samples([1000.0] * 20, [30.0] * 10 + [30.0 * (1 + 2 * STEADY_SPREAD)] * 10), 10, 0.5)
    assert s.cpu_spread == 0 and s.copy_spread > STEADY_SPREAD and s.verdict == "unsteady"


def test_too_few_samples_is_unknown():
    s = summarise(_samples([1000.0, 500.0] * 3, [30.0, 10.0] * 3), 1, 0.5)
    assert s.verdict == "unknown" and s.cpu_spread is None and "3 samples per CPU" in s.describe()


def test_a_slower_cpu_is_not_unsteadiness():
    # CPU 1 is steadily 40% slower (an SMT sibling, an IRQ-heavy CPU): steady over time
    samples = [Sample(t=0.5 * i, cpu=c, cpu_rate=1000.0 if c == 0 else 600.0, copy_gbps=30.0 if c == 0 else 18.0)
               for i in range(10) for c in (0, 1)]
    s = summarise(samples, 5, 0.5)
    assert s.verdict == "steady" and s.cpu_spread == 0 and s.copy_spread == 0
    assert s.cpu_medians() == {0: {"cpu_rate": 1000.0, "copy_gbps": 30.0}, 1: {"cpu_rate": 600.0, "copy_gbps": 18.0}}


@pytest.mark.parametrize("kwargs, field", [({"seconds": 0.5}, "steadiness 0.5 s"), ({"seconds": 601}, "steadiness 601 s"),
                                           ({"seconds": 2, "interval_s": 1.5}, "interval_s 1.5"), ({"seconds": 2, "interval_s": 0.01}, "interval_s 0.01"),
                                           ({"seconds": 2, "cpus": [9999]}, "cpus [9999]")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(UserError) as info:
        probe(**kwargs)
    assert str(info.value).startswith("steadiness") and field in str(info.value) and "allowed" in str(info.value)


def test_real_probe_samples_every_cpu_and_leaves_no_worker():
    cpus = sorted(os.sched_getaffinity(0))
    s = probe(1.0)
    assert s.cpus == cpus
    per_cpu = {c: [x for x in s.samples if x.cpu == c] for c in cpus}
    assert all(len(v) >= 2 for v in per_cpu.values())
    assert all(x.cpu_rate > 0 and x.copy_gbps > 0 for x in s.samples)
    assert s.verdict in ("steady", "unsteady")
    data = json.loads(json.dumps(s.to_dict()))
    assert data["cpu_rate"]["min"] <= data["cpu_rate"]["median"] <= data["cpu_rate"]["max"]
    assert not _workers_left()
    assert len(per_cpu[cpus[0]]) >= steadiness.MIN_SAMPLES  # the default interval gives every CPU enough


def _workers_left() -> list:
    left = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if "labctl.host.steadiness" in " ".join(proc.cmdline()):
                left.append(proc)
        except psutil.Error:  # gone, or a zombie another test left unreaped (no command line, no CPU)
            pass
    return left


def test_a_failing_worker_is_named_and_the_others_are_stopped(monkeypatch):
    real = steadiness._worker_argv
    first = sorted(os.sched_getaffinity(0))[0]

    def argv(cpu, *rest):
        if cpu == first:
            return [sys.executable, "-c", "import sys; sys.stderr.write('no numpy here\\n'); sys.exit(3)"]
        return real(cpu, *rest)

    monkeypatch.setattr(steadiness, "_worker_argv", argv)
    with pytest.raises(ProbeError) as info:
        probe(20)  # the other workers would run 20 s: they must be killed, not waited for
    assert str(info.value) == f"steadiness probe: the worker on CPU {first} exited with 3: no numpy here"
    assert not _workers_left()


def test_interrupted_probe_leaves_no_worker(monkeypatch):
    real_wait = subprocess.Popen.wait

    def wait(self, timeout=None):
        if "labctl.host.steadiness" in " ".join(map(str, self.args)) and self.returncode is None and timeout and timeout > 10:
            raise KeyboardInterrupt  # Ctrl-C while the probe waits for its workers
        return real_wait(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    with pytest.raises(KeyboardInterrupt):
        probe(20)
    monkeypatch.setattr(subprocess.Popen, "wait", real_wait)
    assert not _workers_left()


def test_doctor_steadiness_bad_value_one_line_exit_2(cli):
    code, out, err = cli("doctor", "--steadiness", "0.5")
    assert code == 2 and out == "" and err.strip() == "steadiness 0.5 s: allowed 1 to 600 seconds"


def test_doctor_steadiness_json(cli):
    code, out, _ = cli("doctor", "--json", "--steadiness", "1")
    data = json.loads(out)["steadiness"]
    assert code == 0 and data["verdict"] in ("steady", "unsteady") and data["samples"]
