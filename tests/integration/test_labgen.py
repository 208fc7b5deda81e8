"""labgen against real DPDK ports: net_ring loopback ports inside labgen, and the embedded lab's guest
forwarder (testpmd, net_virtio_user server ports, io mode) through net_vhost client ports.

Never a throughput: only counts that must add up, and ratios at low rates (20-100 kpps, far below
what one core of this 2-vCPU host sends). Pacing is checked on valid trials: achieved/offered within
1% (a valid trial's last burst left at most 64 frame intervals late, 0.8% of a 0.4 s trial at 20 kpps)
and the median burst on time. The host stops a vCPU for milliseconds now and then, which can make a
trial invalid (its end fell into a stall): such a trial is repeated, up to ATTEMPTS times.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psutil
import pytest

from labctl.dpdk.labgen import Labgen, TrialSpec, connect_ports, ring_labgen, vhost_client_labgen
from labctl.dpdk.labgen_replies import LabgenResult
from labctl.dpdk.telemetry import RUNTIME_ROOT
from labctl.errors import WorkloadError
from labctl.paths import log_dir, run_dir, state_dir
from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.lab.plan import LabDirs, derive
from labctl.dpdk.runtime import start_recorded
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import LabState, teardown
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS
from tests.integration.conftest import needs_dpdk
from tests.labgen_support import ensure_labgen

pytestmark = needs_dpdk
ATTEMPTS = 6
PACING_TOLERANCE = 0.01


PREFIX = "labctl-lgt-"  # every DPDK file prefix these tests use


def our_processes() -> list[psutil.Process]:
    """labgen and testpmd processes of these tests (by their file prefix)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(part.startswith(PREFIX) for part in cmdline):
            found.append(proc)
    return found


@pytest.fixture
def clean(tmp_path):
    """Build labgen; afterwards nothing of the test may be left: no process, runtime dir, socket or
    mount. The checks of tests/integration/conftest.py no_leftovers, narrowed to this test's own
    resources: the host is shared, and another lab's testpmd running (or hugepages it reserves)
    meanwhile is not a leftover. Pages this test reserves are checked through its ledger."""
    ensure_labgen()
    yield
    assert our_processes() == []
    assert list(RUNTIME_ROOT.glob(PREFIX + "*")) == [] if RUNTIME_ROOT.exists() else True
    run = tmp_path / "run"
    assert not run.exists() or not any(run.rglob("*")), list(run.rglob("*"))
    assert str(tmp_path) not in Path("/proc/mounts").read_text()


@pytest.fixture
def ring(clean, tmp_path):
    """One labgen on one net_ring port with 2 queues, its worker floating on both CPUs."""
    gen = ring_labgen(1, 2, "labctl-lgt-ring", [None], tmp_path / "ring.log")
    gen.start()
    try:
        gen.connect()
        yield gen
    finally:
        gen.quit()
    assert gen.proc.returncode == 0
    assert not (RUNTIME_ROOT / "labctl-lgt-ring").exists()  # labgen removes its runtime dir


def paced(gen: Labgen, spec: TrialSpec) -> LabgenResult:
    """The first valid of up to ATTEMPTS trials (each is checked for what must hold anyway)."""
    for _ in range(ATTEMPTS):
        result = gen.run_trial(spec)
        consistent(result)
        if result.valid:
            return result
    pytest.fail(f"no valid trial in {ATTEMPTS} at {spec.rate_pps} pps: {result.reason}")


def consistent(r: LabgenResult) -> None:
    """What every finished trial satisfies, whatever the host did."""
    assert r.early == 0  # no burst ever left before its due time
    assert r.offered == r.sent + r.tx_dropped
    assert r.received + r.lost == r.sent and r.duplicate == 0
    for port in r.ports.values():
        assert sum(port.q_tx) == port.sent and sum(port.q_tx_dropped) == port.tx_dropped and sum(port.q_rx) == port.rx
    assert sum(p.rx for p in r.ports.values()) == r.received
    if r.received:
        lat = r.latency
        assert 0 < lat.min_us <= lat.p50_us <= lat.p90_us <= lat.p99_us <= lat.p999_us <= lat.max_us


def on_schedule(r: LabgenResult, spec: TrialSpec) -> None:
    frames = round(spec.rate_pps * spec.duration_s)
    assert r.frames_per_port == frames and r.offered == frames * r.sending_ports and r.unsent == 0
    assert abs(r.pacing_error) <= PACING_TOLERANCE, r
    assert r.window_s >= spec.duration_s * (1 - 1 / frames)  # never faster than the schedule
    assert r.lateness.p50_us < 100  # the median burst left on time, stalls or not
    assert r.late_end_us <= r.late_limit_us


def test_ring_many_trials_in_one_process(ring):
    # paced, with warm-up and 4 flows over the 2 queues: exact counts, nothing of the warm-up counted
    spec = TrialSpec(rate_pps=20_000, duration_s=0.4, warmup_s=0.1, flows=4)
    a = paced(ring, spec)
    on_schedule(a, spec)
    assert a.received == a.sent == 8000 and a.lost == a.reordered == a.tx_dropped == a.stray == 0
    assert a.raw["warmup_tx"] == a.raw["warmup_rx"] == 2000
    assert a.ports[0].q_tx == [4000, 4000] and a.ports[0].q_rx == [4000, 4000]  # flow f on queue f % 2
    assert [(s.flow, s.sent, s.received, s.lost) for s in ring.streams(0)] == [(f, 2000, 2000, 0) for f in range(4)]
    assert a.late_limit_us == pytest.approx(64 / 20_000 * 1e6, rel=1e-3)  # 64 frame intervals > 0.001% of 0.4 s

    # the next trial counts only its own frames (a different rate, size, flows, no warm-up)
    spec = TrialSpec(rate_pps=100_000, duration_s=0.4, frame_size=1518, flows=1, drain_s=0.05)
    b = paced(ring, spec)
    on_schedule(b, spec)
    with pytest.raises(WorkloadError, match="flow 1: trial .* has 1 flows"):
        ring.command("/labgen/streams,0,1")
    assert b.trial > a.trial and b.received == b.sent == 40_000 and b.raw["warmup_rx"] == 0 and b.stray == 0
    assert b.ports[0].q_tx == [40_000, 0]

    # unpaced, counted: exactly that many frames, valid by definition; bursts of 64 can outrun the
    # receiver (32 per poll), and what the full ring refused is tx_dropped, not lost
    c = ring.run_trial(TrialSpec(rate_pps=0, count=100_000, burst=64))
    consistent(c)
    assert c.valid and c.offered == 100_000 and c.reason.startswith("unpaced")
    assert c.received == c.sent == c.offered - c.tx_dropped and c.lost == 0


@pytest.mark.parametrize("shift_s", [0, 100e-6], ids=["absolute", "shift"])
def test_ring_more_than_it_can_send_is_invalid_not_loss(ring, shift_s):
    """Also with pacing shift: a sender behind its schedule is never shifted, however long its passes."""
    spec = TrialSpec(rate_pps=200_000_000, duration_s=0.3, shift_s=shift_s)
    r = ring.run_trial(spec)
    consistent(r)
    # it gave up at the end of the schedule (+ its limit): the frames it had not sent by then stay unsent
    # (a sender that went on would send them all and only be late)
    assert not r.valid and r.unsent > 0 and r.offered + r.unsent == r.frames_per_port * r.sending_ports
    assert r.reason.startswith(f"generator fell behind: {r.unsent} frames not sent by the end of the schedule")
    assert r.lost == 0 and r.received == r.sent  # what it could not send is not loss
    assert r.pacing_error < -0.5 and r.shifts == 0


def test_ring_stop_and_busy(ring):
    ring.start_trial(TrialSpec(rate_pps=10_000, duration_s=30))
    with pytest.raises(WorkloadError, match=r"/labgen/start: trial \d+ is (starting|warmup|running)"):
        ring.start_trial(TrialSpec(rate_pps=10_000))
    time.sleep(0.2)
    ring.stop_trial()
    r = LabgenResult.from_stats(ring.wait_done(5))
    consistent(r)
    assert not r.valid and r.reason == "stopped before the end of its schedule"
    assert 0 < r.offered < 300_000 and r.received == r.sent
    with pytest.raises(WorkloadError, match="unknown key bogus"):
        ring.command("/labgen/start,rate=1,bogus=2")


def test_ring_two_workers(clean, tmp_path):
    """Sending on one worker lcore and receiving on another."""
    gen = ring_labgen(1, 1, "labctl-lgt-two", [None, None], tmp_path / "two.log")
    gen.start()
    try:
        gen.connect()
        assert gen.command("/labgen/info")["workers"] == 2
        spec = TrialSpec(rate_pps=20_000, duration_s=0.4, flows=2)
        r = paced(gen, spec)
        on_schedule(r, spec)
        assert r.lost == 0  # a ring loses nothing it took (tx_dropped if the receiver stalled)
    finally:
        gen.quit()
    assert gen.proc.returncode == 0


def test_sigterm_mid_trial_exits_cleanly(clean, tmp_path):
    gen = ring_labgen(1, 1, "labctl-lgt-term", [None], tmp_path / "term.log")
    gen.start()
    gen.connect()
    gen.start_trial(TrialSpec(rate_pps=50_000, duration_s=30))
    time.sleep(0.2)
    gen.proc.send_signal(signal.SIGTERM)
    assert gen.proc.wait(10) == 0
    gen.quit()
    assert not (RUNTIME_ROOT / "labctl-lgt-term").exists()
    assert "labgen: stopping" in gen.log_path.read_text()


@pytest.mark.parametrize("hugepages", [False, True], ids=["no-huge", "hugepages"])
def test_embedded_guest_forwarder(clean, hugepages):
    """labgen's ports connect to the guest's listening virtio_user sockets one by one; the guest (testpmd
    io mode, 2 queues per port, on CPU 1) forwards port 0 <-> port 1; labgen sends on CPU 0."""
    profile = load_profile(DOMAINS / "quick.yaml", {"guest.nics.*.queues": 2}, cpus=None).profile
    state = LabState("lgt-embedded", state_dir() / "lgt-embedded.json")
    lab = run_dir() / "lgt-embedded"
    sockets = [lab / f"vhost-{i}.sock" for i in range(2)]
    gen = guest = None
    try:
        state.record("dir", str(lab))
        lab.mkdir(parents=True)
        for sock in sockets:
            state.record("path", str(sock))
        plan = derive(profile.model_copy(update={"name": "lgt"}), LabDirs(lab, log_dir()))

        def build(hugedir):
            return (guest_forwarder(plan, hugedir, server=True),
                    vhost_client_labgen(sockets, 2, "labctl-lgt-gen", [frozenset({0})], hugedir, log_dir() / "gen.log"))

        hugedir = None
        if hugepages:
            mount = lab / "hugetlbfs"
            grant = reserve(state, mount, sum(proc.eal.memory_mb for proc in build(mount)))
            if grant is None:
                pytest.skip("hugepages could not be reserved")
            hugedir = grant.mount
        guest, gen = build(hugedir)
        start_recorded(state, guest)
        gen.start_recorded(state)
        gen.connect()
        connect_ports(gen, guest, sockets)
        guest.wait_ready()
        gen.wait_links()
        guest.command("start")
        last = 0
        for spec in (TrialSpec(rate_pps=20_000, duration_s=0.4, flows=4, warmup_s=0.1),
                     TrialSpec(rate_pps=100_000, duration_s=0.4, flows=4, frame_size=512)):
            r = paced(gen, spec)
            on_schedule(r, spec)
            assert r.trial > last and r.sending_ports == 2 and set(r.ports) == {0, 1}
            last = r.trial
            for port in r.ports.values():  # flows 0, 2 on queue 0 and 1, 3 on queue 1 of each port
                assert port.offered == spec.rate_pps * spec.duration_s and min(port.q_rx) > 0
                assert all(abs(q - port.offered / 2) <= 1 for q in (a + b for a, b in zip(port.q_tx, port.q_tx_dropped)))
            assert r.latency.p50_us > 0  # (stray: frames of an earlier attempt the guest still held)
            streams = gen.streams(0) + gen.streams(1)
            assert len(streams) == 8 and sum(s.lost for s in streams) == r.lost
            assert sum(s.sent for s in streams) == r.sent and sum(s.received for s in streams) == r.received
        guest.command("stop")
    finally:
        for proc in (gen, guest):
            if proc is not None:
                proc.quit()
        assert teardown(state) == [] and state.resources == []  # pages given back, hugetlbfs unmounted



def paused_trial(gen: Labgen, spec: TrialSpec, pause_s: float, at_s: float | None = None) -> LabgenResult:
    """A trial during which the whole labgen process stops for pause_s (SIGSTOP, SIGCONT), at_s after its
    start (default: halfway through its measured phase): what a pause of the host's vCPU does to it, on demand."""
    gen.start_trial(spec)
    time.sleep(spec.warmup_s + spec.duration_s / 2 if at_s is None else at_s)
    gen.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(pause_s)
    finally:
        gen.proc.send_signal(signal.SIGCONT)
    r = LabgenResult.from_stats(gen.wait_done(spec.expected_s() + pause_s + 10))
    consistent(r)
    return r


def first_valid(run) -> LabgenResult:
    """The first valid of up to ATTEMPTS results of run() (the host's own pauses can end a trial late)."""
    for _ in range(ATTEMPTS):
        result = run()
        if result.valid:
            return result
    pytest.fail(f"no valid trial in {ATTEMPTS}: {result.reason}")


def test_ring_pause_is_caught_up_or_shifted(ring):
    """workload.pacing: absolute catches up after a pause (the frames due in it leave back to back, late by up
    to the pause); shift moves the schedule by the pause (no burst goes out that late, the pause is counted).
    Both send every frame, never early; the same 60 ms pause each way."""
    pause = 0.06
    absolute = first_valid(lambda: paused_trial(ring, TrialSpec(rate_pps=50_000, duration_s=0.8, warmup_s=0.1), pause))
    assert absolute.unsent == 0 and absolute.received == absolute.sent == 40_000
    assert absolute.shifts == 0 and absolute.paused_s == 0
    assert absolute.lateness.max_us >= pause * 1e6 * 0.8  # the catch-up burst left about a pause late

    spec = TrialSpec(rate_pps=50_000, duration_s=0.8, warmup_s=0.1, shift_s=100e-6)
    shifted = first_valid(lambda: paused_trial(ring, spec, pause))
    assert shifted.unsent == 0 and shifted.received == shifted.sent == 40_000
    assert shifted.shifts >= 1 and shifted.paused_s >= pause * 0.8
    assert shifted.raw["paused_ns"] == round(shifted.paused_s * 1e9)
    assert shifted.lateness.max_us < pause * 1e6 * 0.5  # after the pause it went on from where it was

    # a pause in the warm-up moves the measured phase as a whole: nothing of it is counted
    warm = TrialSpec(rate_pps=50_000, duration_s=0.4, warmup_s=0.5, shift_s=100e-6)
    in_warmup = first_valid(lambda: paused_trial(ring, warm, pause, at_s=0.2))
    assert in_warmup.received == in_warmup.sent == 20_000 and in_warmup.raw["warmup_tx"] == 25_000
    assert in_warmup.lateness.max_us < pause * 1e6 * 0.5


def test_ring_paused_too_long_is_invalid(ring):
    """A trial whose schedule shifted for more than 10% of its time (labgen's LG_PAUSED_MAX_PCT) is invalid,
    not loss: the traffic the lab saw was not the rate asked for."""
    r = paused_trial(ring, TrialSpec(rate_pps=50_000, duration_s=0.6, shift_s=100e-6), 0.3)
    assert r.paused_s >= 0.25 and not r.valid and r.reason.startswith("generator paused too long")
    assert r.received == r.sent == 30_000 and r.lost == 0
