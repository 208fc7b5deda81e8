"""The labgen driver without DPDK: command lines, trial parameters, a recorded /labgen/stats reply,
the trial loop against a scripted labgen (timeouts, cancels, error replies)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from labctl import native, signals
from labctl.dpdk import labgen as lg
from labctl.dpdk.labgen import Labgen, TrialSpec, eal_argv, ring_labgen, vhost_client_labgen
from labctl.dpdk.labgen_replies import LabgenResult
from labctl.errors import Cancelled, WorkloadError

SOCKETS = [Path("/run/x/vhost-0.sock"), Path("/run/x/vhost-1.sock")]

# /labgen/stats of a real trial (embedded lab, 2 ports x 2 queues, 1.5 Mpps per port: more than the
# 1-vCPU guest forwards, and the generator fell behind at the end)
RECORDED = {
    "state": "done", "trial": 1, "rate": 1500000, "frames": 750000, "size": 64, "burst": 32, "flows": 4,
    "sending_ports": 2, "hz": 2600000000, "window_ns": 500044223,
    "port": {"0": {"active": 1, "offered": 745804, "sent": 455011, "tx_dropped": 290793, "unsent": 4196, "rx": 454686,
                   "lost": 49, "reordered": 0, "duplicate": 0, "warmup_tx": 150000, "warmup_rx": 58276, "stray": 0,
                   "late": 0, "q_tx": [227503, 227508], "q_tx_dropped": [145399, 145394], "q_rx": [227378, 227308]},
             "1": {"active": 1, "offered": 745804, "sent": 454879, "tx_dropped": 290925, "unsent": 4196, "rx": 454962,
                   "lost": 193, "reordered": 0, "duplicate": 0, "warmup_tx": 150000, "warmup_rx": 58356, "stray": 0,
                   "late": 0, "q_tx": [227491, 227388], "q_tx_dropped": [145411, 145514], "q_rx": [227470, 227492]}},
    "offered": 1491608, "sent": 909890, "tx_dropped": 581718, "unsent": 8392, "received": 909648, "unique": 909648,
    "lost": 242, "reordered": 0, "duplicate": 0, "beyond_window": 0, "warmup_tx": 300000, "warmup_rx": 116632,
    "stray": 0, "late": 0, "alloc_fail": 0, "early": 0, "stopped": 0, "achieved_rate": 1491476, "stall_ns": 26079786,
    "latency_ns": {"count": 909648, "min": 678, "mean": 222035, "p50": 7551, "p90": 19967, "p99": 5636095,
                   "p999": 38797311, "max": 39401894},
    "lateness_ns": {"count": 471238, "min": 21, "mean": 389329, "p50": 195, "p90": 835583, "p99": 5111807,
                    "p999": 23592959, "max": 26079341, "limit": 42666, "end": 2863843},
    "valid": 0, "reason": "generator fell behind: 8392 frames not sent by the end of the schedule + 42.7 us"}


def test_trial_parameters():
    spec = TrialSpec(rate_pps=1_000_000.4, duration_s=2, warmup_s=0.5, flows=4)
    assert spec.params() == "rate=1000000,warmup=0.5,drain=0.1,size=64,burst=32,flows=4,tolerance=64,duration=2"
    counted = TrialSpec(rate_pps=0, count=5000, drain_s=0, ports_mask=1, frame_size=1518, burst=64)
    assert counted.params() == "rate=0,warmup=0,drain=0,size=1518,burst=64,flows=1,tolerance=64,count=5000,ports=1"
    assert spec.expected_s() == pytest.approx(2.6) and TrialSpec(rate_pps=1000, count=500).expected_s() == pytest.approx(0.6)
    assert spec.sending_s() == pytest.approx(2.5) and counted.sending_s() is None  # unpaced and counted: unknown
    shifted = TrialSpec(rate_pps=1000, duration_s=1, shift_s=100e-6)  # workload.pacing shift
    assert shifted.params() == "rate=1000,warmup=0,drain=0.1,size=64,burst=32,flows=1,tolerance=64,duration=1,shift=0.0001"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"rate_pps": -1}, "rate -1 is negative"), ({"rate_pps": 1, "frame_size": 63}, "frame size 63 is not in 64..1518"),
    ({"rate_pps": 1, "burst": 0}, "burst 0"), ({"rate_pps": 1, "flows": 2000}, "flows 2000"),
    ({"rate_pps": 1, "duration_s": 0}, "needs a duration or a count"), ({"rate_pps": 1, "drain_s": -1}, "negative"),
    ({"rate_pps": 1, "shift_s": -1}, r"shift -1 is negative \(0: catch up after a pause\)")])
def test_bad_trials_are_one_line_errors(kwargs, message):
    with pytest.raises(WorkloadError, match=message) as err:
        TrialSpec(**kwargs)
    assert "\n" not in str(err.value)


def _vdevs(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--vdev"]


def test_vhost_client_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv(native.BINARY_ENV, sys.executable)  # any executable stands in for the binary
    gen = vhost_client_labgen(SOCKETS, 2, "labctl-x-gen", [frozenset({0})], None, tmp_path / "gen.log")
    argv = gen.argv
    assert argv[0] == sys.executable
    assert _vdevs(argv) == ["net_vhost0,iface=/run/x/vhost-0.sock,queues=2,client=1",
                            "net_vhost1,iface=/run/x/vhost-1.sock,queues=2,client=1"]
    eal, app = argv[1:argv.index("--")], argv[argv.index("--") + 1:]
    assert eal[:2] == ["--lcores", gen.eal.lcores] and gen.eal.lcores.endswith(",1@(0)")
    assert "--no-huge" in eal and "--no-shconf" in eal and "--in-memory" not in eal  # 22.11: legacy mem refuses it
    assert app == ["--queues=2", "--rxd=1024", "--txd=1024", f"--mbufs={gen.app.mbufs}", "--wait-ports"]
    hugepages = vhost_client_labgen(SOCKETS, 1, "p", [None], tmp_path / "huge", tmp_path / "g.log")
    assert "--in-memory" in eal_argv(hugepages.eal) and "--no-shconf" not in eal_argv(hugepages.eal)


def test_ring_labgen_and_two_workers(tmp_path):
    gen = ring_labgen(2, 4, "p", [frozenset({0}), frozenset({1})], tmp_path / "g.log")
    assert gen.eal.vdevs == ["net_ring0", "net_ring1"] and gen.eal.lcores.endswith(",1@(0),2@(1)")
    assert not gen.app.wait_ports and gen.app.queues == 4


def test_labgen_runs_the_binary_native_finds(monkeypatch, tmp_path):
    """The lookup ($LABCTL_LABGEN, the package, the checkout; its errors) is labctl/native.py's
    (tests/unit/packaging/test_native.py); the driver starts what it finds, an installed package's copy too."""
    binary = tmp_path / "labgen"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    gen = ring_labgen(2, 4, "p", [frozenset({0}), frozenset({1})], tmp_path / "g.log")
    monkeypatch.setenv(native.BINARY_ENV, str(binary))
    assert gen.argv[0] == str(binary)
    monkeypatch.setenv(native.BINARY_ENV, str(tmp_path / "nope"))
    with pytest.raises(WorkloadError, match="LABCTL_LABGEN=.*nope: not an executable labgen"):
        gen.argv


def test_result_from_recorded_stats():
    r = LabgenResult.from_stats(RECORDED)
    assert (r.trial, r.rate_pps, r.sending_ports, r.frames_per_port) == (1, 1500000, 2, 750000)
    assert r.offered == r.sent + r.tx_dropped == 1491608 and r.received == 909648 and r.lost == 242
    assert r.loss_count == 581718 + 242 and r.loss_ratio == pytest.approx(581960 / 1491608)
    assert r.intended_pps == 3_000_000 and r.window_s == pytest.approx(0.500044223)
    assert r.achieved_pps == pytest.approx(1491608 / 0.500044223)
    assert r.achieved_rate_pps == pytest.approx(RECORDED["achieved_rate"], rel=1e-5)
    assert r.pacing_error == pytest.approx(1491608 / 2 / 0.500044223 / 1.5e6 - 1)
    assert r.received_pps == pytest.approx(909648 / 0.500044223) and r.sent_pps < r.achieved_pps
    assert (r.latency.min_us, r.latency.p50_us, r.latency.p999_us) == (0.678, 7.551, 38797.311)
    assert (r.lateness.p50_us, r.late_end_us, r.late_limit_us, r.stall_us) == (0.195, 2863.843, 42.666, 26079.786)
    assert not r.valid and r.reason.startswith("generator fell behind") and r.unsent == 8392 and r.early == 0
    assert set(r.ports) == {0, 1}
    p0 = r.ports[0]
    assert p0.q_tx == [227503, 227508] and sum(p0.q_tx) == p0.sent and sum(p0.q_rx) == p0.rx
    assert sum(p0.q_tx_dropped) == p0.tx_dropped
    assert (r.shifts, r.paused_s) == (0, 0.0)  # a labgen without the pause rule (or pacing absolute)
    shifted = LabgenResult.from_stats({**RECORDED, "shifts": 3, "paused_ns": 4_500_000})
    assert (shifted.shifts, shifted.paused_s) == (3, 0.0045)


class Scripted(Labgen):
    """A labgen whose telemetry replies come from a script: stats go through ``states``."""

    def __init__(self, tmp_path: Path, states: list[str], reply_error: str | None = None):
        super().__init__("generator", vhost_client_labgen(SOCKETS, 1, "p", [None], None, tmp_path / "g.log").eal,
                         lg.LabgenOptions(), tmp_path / "g.log")
        self.states = list(states)
        self.sent: list[str] = []
        self.reply_error = reply_error

    def command(self, cmd: str) -> dict:
        self.sent.append(cmd)
        if self.reply_error and cmd.startswith("/labgen/start"):
            raise WorkloadError(f"generator labgen: /labgen/start: {self.reply_error}")
        if cmd.startswith("/labgen/streams,"):
            _port, first = map(int, cmd.split(",")[1:])
            flows = range(first, min(first + 128, 200))  # 200 flows: two pages
            return {"flows": 200, "first": first, "sent": [10 * f for f in flows], "received": [10 * f - 1 for f in flows],
                    "lost": [1] * len(flows), "reordered": [0] * len(flows), "duplicate": [f % 2 for f in flows]}
        if cmd == "/labgen/stats":
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return {**RECORDED, "state": state}
        return {"trial": 1, "state": "running"}


def test_run_trial_polls_until_done(tmp_path):
    gen = Scripted(tmp_path, ["running", "draining", "done"])
    result = gen.run_trial(TrialSpec(rate_pps=1000, duration_s=0.01, drain_s=0))
    assert gen.sent[0] == "/labgen/start,rate=1000,warmup=0,drain=0,size=64,burst=32,flows=1,tolerance=64,duration=0.01"
    assert gen.sent[1:] == ["/labgen/stats"] * 3 and result.offered == 1491608


def test_run_trial_that_overruns_is_stopped(tmp_path):
    gen = Scripted(tmp_path, ["running"])
    with pytest.raises(WorkloadError, match="trial 1 still running after 0 s"):
        gen.run_trial(TrialSpec(rate_pps=1000, duration_s=0.01, drain_s=0), timeout_s=0.05)
    assert gen.sent[-1] == "/labgen/stop"


def test_cancel_stops_the_trial(tmp_path):
    gen = Scripted(tmp_path, ["running"])
    gen.tel = object()  # connected: a cancel sends /labgen/stop
    scope = signals.CancelScope()
    threading.Timer(0.1, scope.cancel).start()
    with pytest.raises(Cancelled), signals.stoppable(scope):
        gen.run_trial(TrialSpec(rate_pps=1000, duration_s=30))
    assert gen.sent[-1] == "/labgen/stop"


def test_error_reply_is_a_workload_error(tmp_path):
    gen = Scripted(tmp_path, ["idle"], reply_error="trial 3 is running: /labgen/stop it or wait")
    with pytest.raises(WorkloadError, match="/labgen/start: trial 3 is running"):
        gen.run_trial(TrialSpec(rate_pps=1000))


def test_exited_process_is_reported_with_its_log(tmp_path):
    gen = Scripted(tmp_path, ["idle"])
    with open(gen.log_path, "w") as log:
        gen.proc = subprocess.Popen([sys.executable, "-c", "print('EAL: Cannot create lock'); raise SystemExit(3)"],
                                    stdout=log)
    gen.proc.wait()
    with pytest.raises(WorkloadError, match=r"generator labgen exited with code 3: EAL: Cannot create lock \(log "):
        Labgen.connect(gen, timeout_s=1)


def test_quit_escalates_to_sigterm_then_sigkill(tmp_path):
    """A labgen that ignores /labgen/quit and SIGTERM is killed; one that exited is left alone."""
    gen = Labgen("generator", vhost_client_labgen(SOCKETS, 1, "p", [None], None, tmp_path / "g.log").eal,
                 lg.LabgenOptions(), tmp_path / "g.log")
    gen.proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print('up', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    assert gen.proc.stdout.readline() == b"up\n"
    gen.quit(timeout_s=0.1, grace_s=0.1)
    assert gen.proc.returncode == -9
    gen.quit()  # already gone: nothing to do


def test_streams_are_paged(tmp_path):
    gen = Scripted(tmp_path, ["done"])
    streams = gen.streams(1)
    assert gen.sent == ["/labgen/streams,1,0", "/labgen/streams,1,128"]
    assert [s.flow for s in streams] == list(range(200)) and {s.port for s in streams} == {1}
    assert streams[150] == lg.StreamCounts(port=1, flow=150, sent=1500, received=1499, lost=1, reordered=0, duplicate=0)


def test_a_labgen_older_than_the_pause_rule_says_so(tmp_path):
    """A labgen built before workload.pacing refuses the shift key: the error says what to do, in one line."""
    gen = Scripted(tmp_path, ["idle"], reply_error="unknown key shift (rate, duration, count, warmup, drain, size, "
                                                   "burst, flows, tolerance, ports)")
    with pytest.raises(WorkloadError, match="older than this labctl .* scripts/build-labgen.sh") as err:
        gen.start_trial(TrialSpec(rate_pps=1000, shift_s=100e-6))
    assert "\n" not in str(err.value)
    gen = Scripted(tmp_path, ["idle"], reply_error="trial 3 is running: /labgen/stop it or wait")
    with pytest.raises(WorkloadError, match="trial 3 is running"):  # other refusals pass through as they are
        gen.start_trial(TrialSpec(rate_pps=1000))


def test_time_bins_are_a_start_key():
    spec = TrialSpec(rate_pps=1000, duration_s=2, bin_s=0.01)
    assert spec.params().endswith(",duration=2,bin=0.01")
    with pytest.raises(WorkloadError, match=r"time bins of 0.0001 s are not in 0.001..60.0 s"):
        TrialSpec(rate_pps=1000, bin_s=0.0001)


def test_trial_clock_measures_the_tsc_rate_against_the_monotonic_clock():
    # DPDK says 2.6 GHz; over 10 s the TSC ran 2.596e10 cycles while CLOCK_MONOTONIC ran 10 s
    clock = lg.TrialClock(arm_tsc=1_000_000, arm_mono_ns=5_000_000_000, ref_tsc=1_000_000 + 25_960_000_000,
                          ref_mono_ns=15_000_000_000, hz=2_600_000_000)
    assert clock.ns_per_cycle == pytest.approx(1 / 2.596)
    assert clock.mono_ns(1_000_000 + 2_596_000_000) == pytest.approx(6_000_000_000)
    assert clock.tsc(clock.mono_ns(123_456_789_000)) == pytest.approx(123_456_789_000)
    short = lg.TrialClock(1_000, 5_000, 1_000 + 1_000_000, 5_000 + 400_000, hz=2_000_000_000)
    assert short.ns_per_cycle == 0.5  # under half a second: DPDK's rate, a jittery reading proves nothing


class Timed(Scripted):
    """A labgen with 250 gaps (80 a reply) and 230 time bins (100 a reply)."""

    def command(self, cmd: str) -> dict:
        self.sent.append(cmd)
        if cmd.startswith("/labgen/gaps,"):
            log, first = cmd.split(",")[1], int(cmd.split(",")[2])
            rows = range(first, min(first + 80, 250))
            return {"log": log, "total": 250, "dropped": 7, "first": first, "before": [10 * i for i in rows],
                    "after": [10 * i + 5 for i in rows], "count": [3] * len(rows), "filled": [i % 2 for i in rows],
                    "stream": [i % 4 for i in rows], "kind": [lg.GAP_HEAD if i == 0 else lg.GAP_TAIL * (i == 249)
                                                              for i in rows]}
        if cmd.startswith("/labgen/series,"):
            first = int(cmd.split(",")[1])
            rows = range(first, min(first + 100, 230))
            return {"bins": 230, "first": first, "bin_cycles": 1000, "offered": [100] * len(rows),
                    "sent": [100] * len(rows), "received": [100 - (i % 3) for i in rows], "p50": [7] * len(rows),
                    "p99": [9] * len(rows), "max": [i for i in rows]}
        if cmd.startswith("/labgen/window,"):
            first, end = map(int, cmd.split(",")[1:])
            return {"first": first, "end": end, "offered": 100 * (end - first), "sent": 100 * (end - first),
                    "received": 99 * (end - first), "latency_ns": {"count": 99 * (end - first), "p50": 7000}}
        return super().command(cmd)


def test_gaps_are_read_page_by_page(tmp_path):
    gen = Timed(tmp_path, ["done"])
    got, dropped = gen.gaps("refused")
    assert len(got) == 250 and dropped == 7
    assert [c for c in gen.sent] == ["/labgen/gaps,refused,0", "/labgen/gaps,refused,80", "/labgen/gaps,refused,160",
                                     "/labgen/gaps,refused,240"]
    assert got[0].head and not got[0].tail and got[249].tail and (got[1].before_tsc, got[1].after_tsc) == (10, 15)
    assert got[1].missing == 2 and got[2].missing == 3 and got[3].stream == 3 and got[0].log == "refused"


def test_series_and_windows(tmp_path):
    gen = Timed(tmp_path, ["done"])
    every = gen.series()
    assert [b.index for b in every] == list(range(230)) and every[4].lost == 1 and every[7].max_ns == 7
    part = gen.series(95, 210)
    assert [b.index for b in part] == list(range(95, 210))
    window = gen.window(10, 20)
    assert (window.offered, window.received, window.lost, window.latency.p50_us) == (1000, 990, 10, 7.0)
    assert gen.sent[-1] == "/labgen/window,10,20"
