"""Fidelity of labctl's measurement: the same settings through `labctl run` and through testpmd
launched by hand (plain command lines, forward statistics read at the start and end of the window),
interleaved, 5 pairs. Prints one JSON document: both medians, their ratio, the thread monitor's
cost, and set-up plus teardown as a share of a 10 s trial.

"The same settings" are the knobs: one queue per port, 256-descriptor rings, burst 32, 64-byte
packets, the vswitch PMD on CPU 0 and the forwarder on CPU 1. The by-hand side is run the way an
engineer types it, not the way labctl does: the vswitch is the vhost-user server (labctl's embedded
lab makes the guest listen instead) and each testpmd takes `-m 256` of file-backed hugepages (labctl
sizes its EAL memory to the mbuf pool and runs --in-memory). Both differences were measured on
their own (README) and neither showed an effect this host can resolve.

Both sides use 2 MiB hugepages (the by-hand side reserves them and mounts its own hugetlbfs, as an
engineer would); FIDELITY_HUGEPAGES=0 runs both with --no-huge instead.

Targets: ratio >= 0.98; monitor < 1% of a core; set-up + teardown < 10% of the trial.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from labctl.errors import LabError  # noqa: E402
from labctl.host.steadiness import probe  # noqa: E402
PROFILE = ROOT / "domains" / "quick.yaml"
PAIRS = int(os.environ.get("FIDELITY_PAIRS", "5"))
STEADINESS_S = 5.0
DURATION_S = float(os.environ.get("FIDELITY_DURATION_S", "10"))
WARMUP_S = 2.0
HUGEPAGES = os.environ.get("FIDELITY_HUGEPAGES", "1") != "0"
HUGEPAGES_SYSFS = Path("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
MANUAL_PAGES = 256  # 512 MiB: 256 MB of EAL memory for each testpmd
# labctl with the same testpmd flowgen generator the hand-run pair uses (labgen is measured in generator.py)
SETTINGS = ["workload.generator=flowgen", "guest.nics.*.rx_queue_size=256", "workload.burst=32",
            f"guest.hugepages={str(HUGEPAGES).lower()}", f"workload.duration_s={DURATION_S:g}",
            f"workload.warmup_s={WARMUP_S:g}"]
FWD = re.compile(r"Forward statistics for port (\d+)\s+-+\s+RX-packets:\s+(\d+)")


def labctl_trial(workdir: Path) -> dict:
    env = {**os.environ, "LABCTL_STATE_DIR": str(workdir / "state"), "LABCTL_RUN_DIR": str(workdir / "run"),
           "LABCTL_LOG_DIR": str(workdir / "log")}
    argv = [str(ROOT / ".venv/bin/labctl"), "run", str(PROFILE), "--json"]
    for setting in SETTINGS:
        argv += ["--set", setting]
    started = time.monotonic()
    # its own session: a Ctrl-C on the terminal reaches labctl only through us, exactly once
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        stdout, stderr = child.communicate()
    except BaseException:
        # Ctrl-C or SIGTERM here: one SIGINT lets labctl tear its lab down, and we wait until it has
        # (its state file lives in our temporary directory, which goes when we do)
        child.send_signal(signal.SIGINT)
        while True:
            try:
                child.communicate()  # drains its pipes while it tears down
                break
            except KeyboardInterrupt:
                child.terminate()  # asked again: labctl cleans up on SIGTERM too, and exits sooner
        raise
    if child.returncode != 0:
        raise RuntimeError(f"labctl run exited with {child.returncode}: {stderr.strip()}")
    wall = time.monotonic() - started
    proc = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
    record = json.loads(proc.stdout)
    timings = record["details"]["timings"]
    return {"mpps": record["metrics"]["mpps"], "wall_s": wall, "monitor_cost_pct": record["details"]["monitor_cost_pct"],
            "setup_s": timings["setup_s"], "teardown_s": timings["teardown_s"] + timings.get("stop_s", 0.0)}


class Manual:
    """testpmd started by hand: vswitch (flowgen on net_vhost) and guest (io on net_virtio_user)."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.socks = [workdir / "m0.sock", workdir / "m1.sock"]
        self.huge = workdir / "huge"

    def memory_args(self) -> list[str]:
        return ["--huge-dir", str(self.huge)] if HUGEPAGES else ["--no-huge"]

    def __enter__(self) -> Manual:
        self.added = 0
        if HUGEPAGES:
            before = int(HUGEPAGES_SYSFS.read_text())
            HUGEPAGES_SYSFS.write_text(str(before + MANUAL_PAGES))
            self.added = max(int(HUGEPAGES_SYSFS.read_text()) - before, 0)
            try:
                self.huge.mkdir()
                subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(self.huge)], check=True)
            except BaseException:
                self._give_back()
                raise
        return self

    def __exit__(self, *_exc) -> None:
        if HUGEPAGES:
            try:
                if os.path.ismount(self.huge):
                    subprocess.run(["umount", str(self.huge)], check=True)
            finally:
                self._give_back()

    def _give_back(self) -> None:
        """Return the pages this benchmark added (not an absolute count: others may reserve meanwhile)."""
        if self.added:
            HUGEPAGES_SYSFS.write_text(str(max(int(HUGEPAGES_SYSFS.read_text()) - self.added, 0)))
            self.added = 0

    def _popen(self, argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "w") as out:
            proc = subprocess.Popen(["stdbuf", "-oL", *argv], stdin=subprocess.PIPE, stdout=out,
                                    stderr=subprocess.STDOUT, text=True)
        self.procs.append(proc)
        return proc

    def _wait(self, log: Path, needle: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while log.read_text(errors="replace").count(needle) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {needle!r} in {log}")
            time.sleep(0.05)

    def trial(self) -> float:
        self.procs: list[subprocess.Popen] = []
        try:
            return self._trial()
        finally:
            for proc in self.procs:  # whatever went wrong, no testpmd outlives its trial
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            for prefix in ("manual-vs", "manual-g"):
                shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)

    def _trial(self) -> float:
        for sock in self.socks:
            sock.unlink(missing_ok=True)
        vs_log, g_log = self.dir / "vs.log", self.dir / "g.log"
        vs = self._popen(["dpdk-testpmd", "--lcores", "0@(0-1),1@(0)", "--file-prefix", "manual-vs", "--no-pci",
                          "-m", "256", "--single-file-segments", *self.memory_args(),
                          "--vdev", f"net_vhost0,iface={self.socks[0]},queues=1",
                          "--vdev", f"net_vhost1,iface={self.socks[1]},queues=1", "--",
                          "-i", "--forward-mode=flowgen", "--nb-cores=1", "--rxq=1", "--txq=1", "--burst=32",
                          "--total-num-mbufs=16384", "--no-lsc-interrupt", "--disable-link-check", "--txpkts=64",
                          "--flowgen-flows=64"], vs_log)
        self._wait(vs_log, "testpmd> ")
        guest = self._popen(["dpdk-testpmd", "--lcores", "0@(0-1),1@(1)", "--file-prefix", "manual-g", "--no-pci",
                             "-m", "256", "--single-file-segments", *self.memory_args(),
                             "--vdev", f"net_virtio_user0,path={self.socks[0]},queues=1,queue_size=256",
                             "--vdev", f"net_virtio_user1,path={self.socks[1]},queues=1,queue_size=256", "--",
                             "-i", "--forward-mode=io", "--nb-cores=1", "--rxq=1", "--txq=1", "--burst=32",
                             "--total-num-mbufs=16384", "--no-lsc-interrupt", "--disable-link-check",
                             "--rxd=256", "--txd=256"], g_log)
        self._wait(g_log, "testpmd> ")
        self._wait(vs_log, "virtio is now ready for processing", 2)
        for proc in (guest, vs):
            proc.stdin.write("start\n")
            proc.stdin.flush()
        time.sleep(WARMUP_S)
        before = self._rx(vs, vs_log)
        t0 = time.monotonic()
        time.sleep(DURATION_S)
        after = self._rx(vs, vs_log)
        window = time.monotonic() - t0
        for proc in (guest, vs):
            proc.stdin.write("stop\nquit\n")
            proc.stdin.flush()
            proc.wait(30)
        return (after - before) / window / 1e6

    def _rx(self, proc: subprocess.Popen, log: Path) -> int:
        count = log.read_text(errors="replace").count("Accumulated forward statistics")
        proc.stdin.write("show fwd stats all\n")
        proc.stdin.flush()
        self._wait(log, "Accumulated forward statistics", count + 1)
        time.sleep(0.05)
        text = log.read_text(errors="replace")
        block = text[text.rfind("Forward statistics for port 0"):]
        return sum(int(rx) for _port, rx in FWD.findall(block)[:2])


def _terminated(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    signal.signal(signal.SIGTERM, _terminated)
    with tempfile.TemporaryDirectory(prefix="labctl-fidelity-") as tmp:
        workdir = Path(tmp)
        labctl_runs, manual_runs = [], []
        steadiness = [probe(STEADINESS_S)]  # how steady the host is, before and after the pairs
        with Manual(workdir) as manual:
            pairs(manual, workdir, labctl_runs, manual_runs)
        try:
            steadiness.append(probe(STEADINESS_S))
        except LabError as exc:  # the pairs are measured: report them whatever the probe does
            print(f"fidelity: the steadiness probe after the pairs failed: {exc}", file=sys.stderr)
        report(labctl_runs, manual_runs, steadiness)


def pairs(manual: Manual, workdir: Path, labctl_runs: list[dict], manual_runs: list[float]) -> None:
    for pair in range(PAIRS):
        # interleaved, and the order alternates so neither side always runs first
        if pair % 2 == 0:
            labctl_runs.append(labctl_trial(workdir))
            manual_runs.append(manual.trial())
        else:
            manual_runs.append(manual.trial())
            labctl_runs.append(labctl_trial(workdir))


def ratio_ci(labctl: list[float], manual: list[float], resamples: int = 10000) -> list[float]:
    """95% bootstrap interval of median(labctl) / median(manual), pairs resampled together (seeded)."""
    import random

    rng = random.Random(0)
    pairs = list(zip(labctl, manual))
    ratios = []
    for _ in range(resamples):
        sample = [rng.choice(pairs) for _ in pairs]
        ratios.append(statistics.median(a for a, _ in sample) / statistics.median(b for _, b in sample))
    ratios.sort()
    return [ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]]


def report(labctl_runs: list[dict], manual_runs: list[float], steadiness: list) -> None:
    labctl_mpps = [r["mpps"] for r in labctl_runs]
    median_labctl, median_manual = statistics.median(labctl_mpps), statistics.median(manual_runs)
    overhead = [(r["setup_s"] + r["teardown_s"]) / DURATION_S for r in labctl_runs]
    print(json.dumps({
        "benchmark": "fidelity", "pairs": PAIRS, "duration_s": DURATION_S,
        "labctl_mpps": labctl_mpps, "manual_mpps": manual_runs,
        "median_labctl_mpps": median_labctl, "median_manual_mpps": median_manual,
        "ratio": median_labctl / median_manual if median_manual else None,
        # the ratio's own noise: with trial-to-trial cv around 20% here, 5 pairs cannot resolve 2%
        "ratio_ci95_bootstrap": ratio_ci(labctl_mpps, manual_runs),
        "pair_ratios": [a / b for a, b in zip(labctl_mpps, manual_runs)],
        "monitor_cost_pct_of_core": statistics.median(r["monitor_cost_pct"] for r in labctl_runs),
        "setup_s": statistics.median(r["setup_s"] for r in labctl_runs),
        "teardown_s": statistics.median(r["teardown_s"] for r in labctl_runs),
        "setup_teardown_share_of_trial": statistics.median(overhead),
        "labctl_wall_s": statistics.median(r["wall_s"] for r in labctl_runs),
        "targets": {"ratio": ">= 0.98", "monitor_cost_pct_of_core": "< 1", "setup_teardown_share_of_trial": "< 0.10"},
        "hugepages": HUGEPAGES,
        "host_note": "2-vCPU guest host: two pollers plus control threads on 2 CPUs (oversubscribed)",
        # `labctl doctor --steadiness`: the host's own speed, with nothing running, before and after
        "host_steadiness": [s.to_dict(samples=False) for s in steadiness],
    }, indent=2))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: everything above has cleaned up on the way out
        print(f"fidelity: interrupted ({exc or 'SIGINT'}); labctl's lab and the by-hand testpmds are cleaned up",
              file=sys.stderr)
        sys.exit(143 if "signal 15" in str(exc) else 130)
