"""labgen against testpmd flowgen: the highest rate each sustains on one core against the same device
under test, and labgen's pacing error. Prints one JSON document.

The device under test is the embedded lab's guest forwarder (domains/quick.yaml: testpmd in io mode,
two net_virtio_user ports listening as vhost-user servers, one queue, 256-entry rings, on CPU 1). The
generator runs on CPU 0 and sends out of both ports at once, receiving on both: labgen with net_vhost
client ports, or the vswitch testpmd labctl's trials use (flowgen mode, the same client ports, 64
flows). Each generator gets a fresh guest. Measured:

- unpaced: labgen at rate 0 and flowgen, interleaved over ROUNDS rounds of WINDOWS windows: frames
  handed to the driver per second per port (offered) and frames received back per second per port;
- the highest paced rate labgen keeps valid (bisection on a log scale; a rate holds when 2 of 3
  trials are valid: the host's stalls make single trials invalid now and then);
- pacing at 25/50/75/90% of labgen's unpaced rate: achieved/intended - 1, lateness (burst p50, p99,
  worst, last burst) and validity.

The unpaced rate counts every frame handed to the driver, also those the full guest ring refused at
once (cheap); paced near that rate the guest forwards far more, and the same core must also receive
it, so the highest valid paced rate is well below the unpaced one.

The host is a 2-vCPU VM whose vCPUs stop for milliseconds at a time, and other work may share it:
every figure is from a noisy 2-vCPU VM, functional rather than representative. The steadiness probe
(labctl doctor --steadiness) runs before and after. BENCH_GENERATOR_QUICK=1 shortens everything.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from labctl import signals  # noqa: E402
from labctl.dpdk.labgen import Labgen, TrialSpec, connect_ports, vhost_client_labgen  # noqa: E402
from labctl.dpdk.labgen_replies import LabgenResult  # noqa: E402
from labctl.dpdk.testpmd import Testpmd  # noqa: E402
from labctl.errors import LabError  # noqa: E402
from labctl.host.steadiness import probe  # noqa: E402
from labctl.lab.embedded.forwarder import guest_forwarder  # noqa: E402
from labctl.lab.plan import LabDirs, derive  # noqa: E402
from labctl.lab.embedded import vswitch as vs  # noqa: E402
from labctl.dpdk.runtime import start_recorded  # noqa: E402
from labctl.lab.ledger import LabState, teardown  # noqa: E402
from labctl.profile.load import load_profile  # noqa: E402

QUICK = os.environ.get("BENCH_GENERATOR_QUICK") == "1"
ROUNDS = 1 if QUICK else 3
WINDOWS = 2 if QUICK else 3
WINDOW_S = 1.0 if QUICK else 2.0
SEARCH_S = 0.5 if QUICK else 1.0
SEARCH_STEPS = 3 if QUICK else 6
LEVELS = (0.25, 0.5, 0.75, 0.9)
LEVEL_TRIALS = 1 if QUICK else 3
WARMUP_S = 0.5
FLOWS = 64  # as the vswitch's flowgen (labctl.lab.embedded.vswitch.GENERATOR_FLOWS)
GEN_CPU = frozenset({0})
STEADINESS_S = 2.0 if QUICK else 4.0


class Bench:
    """One embedded lab at a time under a ledger in a temporary directory (nothing outlives the run)."""

    def __init__(self, workdir: Path):
        for name in ("STATE", "RUN", "LOG"):
            os.environ[f"LABCTL_{name}_DIR"] = str(workdir / name.lower())
        self.profile = load_profile(ROOT / "domains" / "quick.yaml", cpus=None).profile
        self.run = workdir / "run" / "bench"
        self.logs = workdir / "log"
        self.sockets = [self.run / f"vhost-{i}.sock" for i in range(len(self.profile.guest.nics))]
        self.state = LabState("bench-generator", workdir / "state" / "bench-generator.json")
        self.sessions = 0

    @contextlib.contextmanager
    def session(self, kind: str) -> Iterator[Labgen | Testpmd]:
        """A fresh guest forwarding, and the generator ``kind`` (labgen | flowgen) connected to it."""
        self.sessions += 1
        tag = f"labctl-benchgen{self.sessions}"
        procs: list = []
        try:
            self.state.record("dir", str(self.run))
            self.run.mkdir(parents=True, exist_ok=True)
            for sock in self.sockets:
                self.state.record("path", str(sock))
                sock.unlink(missing_ok=True)
            plan = derive(self.profile.model_copy(update={"name": tag.removeprefix("labctl-")}),
                          LabDirs(self.run, self.logs))
            guest = guest_forwarder(plan, None, server=True)
            if kind == "labgen":
                gen = vhost_client_labgen(self.sockets, 1, f"{tag}-gen", [GEN_CPU], None, self.logs / f"{tag}-gen.log")
            else:
                gen = vs.vswitch_testpmd(plan, None, client=True)  # flowgen, prefix {tag}-vs
            procs += [gen, guest]  # the guest quits first (its close talks to the generator)
            start_recorded(self.state, guest)
            if kind == "labgen":
                gen.start_recorded(self.state)
            else:
                start_recorded(self.state, gen)
            if kind == "labgen":
                gen.connect()
                connect_ports(gen, guest, self.sockets)
                guest.wait_ready()
                gen.wait_links()
                guest.command("start")
            else:
                gen.wait_ready()
                vs.connect_ports(gen, guest, self.sockets)
                guest.wait_ready()
                guest.command("start")
                gen.command("start")
            yield gen
        finally:
            for proc in reversed(procs):
                with contextlib.suppress(Exception):
                    proc.quit()
            failures = teardown(self.state)
            if failures:
                raise RuntimeError(f"teardown could not remove: {failures}")


def flowgen_windows(gen: Testpmd) -> list[dict]:
    """Offered and received frames per second per port over WINDOWS windows of forward statistics."""
    signals.sleep(WARMUP_S)
    out = []
    for _ in range(WINDOWS):
        t0, before = time.monotonic(), gen.fwd_stats()
        signals.sleep(WINDOW_S)
        t1, after = time.monotonic(), gen.fwd_stats()
        delta = [after[p].minus(before[p]) for p in sorted(after)]
        ports = len(delta)
        out.append({"offered_mpps_per_port": sum(d.tx_packets + d.tx_dropped for d in delta) / (t1 - t0) / ports / 1e6,
                    "received_mpps_per_port": sum(d.rx_packets for d in delta) / (t1 - t0) / ports / 1e6,
                    "tx_dropped_share": sum(d.tx_dropped for d in delta) / max(sum(d.tx_packets + d.tx_dropped for d in delta), 1)})
    return out


def labgen_windows(gen: Labgen) -> list[dict]:
    out = []
    for i in range(WINDOWS):
        r = gen.run_trial(TrialSpec(rate_pps=0, duration_s=WINDOW_S, warmup_s=WARMUP_S if i == 0 else 0, flows=FLOWS))
        out.append({"offered_mpps_per_port": r.achieved_rate_pps / 1e6,
                    "received_mpps_per_port": r.received_pps / r.sending_ports / 1e6,
                    "tx_dropped_share": r.tx_dropped / max(r.offered, 1)})
    return out


def summary(windows: list[dict]) -> dict:
    keys = ("offered_mpps_per_port", "received_mpps_per_port", "tx_dropped_share")
    return {**{f"median_{k}": statistics.median(w[k] for w in windows) for k in keys},
            **{k: [round(w[k], 4) for w in windows] for k in keys}}


def paced(gen: Labgen, rate: float, duration_s: float) -> LabgenResult:
    return gen.run_trial(TrialSpec(rate_pps=rate, duration_s=duration_s, warmup_s=0.2, flows=FLOWS))


def holds(gen: Labgen, rate: float) -> tuple[bool, list[bool]]:
    """2 of 3 trials valid (stops as soon as that is decided)."""
    valid: list[bool] = []
    while sum(valid) < 2 and len(valid) - sum(valid) < 2:
        valid.append(paced(gen, rate, SEARCH_S).valid)
    return sum(valid) >= 2, valid


def search_paced_max(gen: Labgen, unpaced_pps: float) -> dict:
    """Bisection on a log scale between a rate that holds and one that does not."""
    steps = []
    for share in (0.25, 0.05):  # a busy host may not hold even a quarter
        lo, hi = share * unpaced_pps, 1.5 * unpaced_pps
        ok, valid = holds(gen, lo)
        steps.append({"rate_mpps": lo / 1e6, "valid": valid})
        if ok:
            break
    else:
        return {"rate_mpps_per_port": None, "steps": steps, "note": "not even 5% of the unpaced rate held"}
    ok, valid = holds(gen, hi)
    steps.append({"rate_mpps": hi / 1e6, "valid": valid})
    if ok:
        return {"rate_mpps_per_port": hi / 1e6, "steps": steps, "note": "held at 150% of the unpaced rate"}
    for _ in range(SEARCH_STEPS):
        mid = (lo * hi) ** 0.5
        ok, valid = holds(gen, mid)
        steps.append({"rate_mpps": mid / 1e6, "valid": valid})
        lo, hi = (mid, hi) if ok else (lo, mid)
    return {"rate_mpps_per_port": lo / 1e6, "first_failing_mpps": hi / 1e6, "steps": steps,
            "share_of_unpaced": lo / unpaced_pps}


def pacing_levels(gen: Labgen, unpaced_pps: float) -> list[dict]:
    levels = []
    for share in LEVELS:
        rate = share * unpaced_pps
        results = [paced(gen, rate, WINDOW_S) for _ in range(LEVEL_TRIALS)]
        errors = [r.pacing_error for r in results]
        levels.append({
            "share_of_unpaced": share, "rate_mpps_per_port": rate / 1e6,
            "pacing_error": [round(e, 6) for e in errors], "median_pacing_error": statistics.median(errors),
            "valid": sum(r.valid for r in results), "trials": len(results),
            "lateness_us": {"p50": statistics.median(r.lateness.p50_us for r in results),
                            "p99": statistics.median(r.lateness.p99_us for r in results),
                            "max": max(r.lateness.max_us for r in results),
                            "last_burst": [r.late_end_us for r in results], "limit": results[0].late_limit_us},
            "worker_stall_max_us": max(r.stall_us for r in results),
            "loss_ratio": [round(r.loss_ratio or 0.0, 6) for r in results],
            "latency_p50_us": statistics.median(r.latency.p50_us for r in results),
            "reasons": sorted({r.reason.split(":")[0] for r in results})})
    return levels


def steadiness(out: list) -> None:
    """The host's own speed with nothing of ours running, and its load average (other work on it)."""
    try:
        out.append({"loadavg": os.getloadavg(), **probe(STEADINESS_S).to_dict(samples=False)})
    except LabError as exc:
        out.append({"loadavg": os.getloadavg(), "error": str(exc)})


def main() -> None:
    started = time.monotonic()
    with signals.stoppable(), tempfile.TemporaryDirectory(prefix="labctl-bench-generator-") as tmp:
        bench = Bench(Path(tmp))
        host: list = []
        steadiness(host)
        runs: dict[str, list[dict]] = {"labgen": [], "testpmd_flowgen": []}
        for round_ in range(ROUNDS):  # interleaved, alternating which goes first
            order = ("labgen", "flowgen") if round_ % 2 == 0 else ("flowgen", "labgen")
            for kind in order:
                with bench.session(kind) as gen:
                    if kind == "labgen":
                        runs["labgen"] += labgen_windows(gen)
                    else:
                        runs["testpmd_flowgen"] += flowgen_windows(gen)
        unpaced = {kind: summary(windows) for kind, windows in runs.items()}
        unpaced_pps = unpaced["labgen"]["median_offered_mpps_per_port"] * 1e6
        with bench.session("labgen") as gen:
            search = search_paced_max(gen, unpaced_pps)
            levels = pacing_levels(gen, unpaced_pps)
        steadiness(host)
    flowgen = unpaced["testpmd_flowgen"]
    print(json.dumps({
        "benchmark": "generator",
        "host_note": "a 2-vCPU VM (Firecracker guest), noisy: its vCPUs stop for milliseconds at a time and "
                     "other work may share its CPUs; figures are functional, not representative",
        "setup": {"dut": "embedded guest forwarder: testpmd io mode, 2 net_virtio_user server ports, 1 queue, "
                         "256-entry rings, 1 core (CPU 1)",
                  "generator": "1 core (CPU 0), both ports sending and receiving; net_vhost client ports",
                  "frame_size": 64, "burst": 32, "flows": FLOWS, "window_s": WINDOW_S, "rounds": ROUNDS,
                  "windows_per_round": WINDOWS, "quick": QUICK},
        "unpaced": {**unpaced,
                    "labgen_to_flowgen_offered": unpaced["labgen"]["median_offered_mpps_per_port"]
                    / flowgen["median_offered_mpps_per_port"],
                    "labgen_to_flowgen_received": unpaced["labgen"]["median_received_mpps_per_port"]
                    / flowgen["median_received_mpps_per_port"]},
        "paced_max_valid": search,
        "pacing": levels,
        "host_steadiness": host,
        "wall_s": time.monotonic() - started,
    }, indent=1))


if __name__ == "__main__":
    main()
