"""Driving labgen, labctl's paced DPDK generator and sink (``native/labgen``), over its telemetry commands.

DPDK 22.11's testpmd cannot pace traffic on vhost/virtio ports (its per-queue rate limit is an ethdev
op those PMDs do not have: ENOTSUP), so labctl carries its own generator. One labgen process serves
many trials: it starts once, its ports connect once, and each trial is a ``/labgen/start`` followed
by ``/labgen/stats`` until the trial is ``done``; a trial's counters are reset before its first frame
and frozen after its drain, and frames of another trial (or of a warm-up) are tagged apart, so
nothing leaks from one trial into the next.

Topology, as testpmd's paired mode: port 0 sends to port 1 and port 1 to port 0, both at once (a
single port is looped to itself); flow f of a port goes out on queue f % queues. Rates are per
sending port, as MLRsearch's loads are.

The protocol (every reply is one JSON object; a failed command replies ``{"error": "..."}``)::

    /labgen/info                  {"state": "starting"|"ready", "ports", "queues", "workers", "hz", "trial", ...}
    /labgen/ports                 {"0": {"name", "started", "link", "peer"}, ...}
    /labgen/port_start,N          configure and start port N (labgen ran with --wait-ports)
    /labgen/start,rate=R,duration=S|count=N,warmup=S,drain=S,size=B,burst=N,flows=N,tolerance=N,shift=S,ports=MASK
                                  {"trial", "state", "frames", "late_limit_ns"}
    /labgen/stats                 {"state": idle|starting|warmup|running|draining|done, "trial", "rate", "frames",
                                   "window_ns", "offered", "sent", "tx_dropped", "unsent", "received", "unique",
                                   "lost", "reordered", "duplicate", "warmup_tx", "warmup_rx", "stray", "late",
                                   "early", "achieved_rate", "stall_ns", "shifts", "paused_ns",
                                   "port": {"0": {..., "q_tx": [...], "q_tx_dropped": [...], "q_rx": [...]}},
                                   "latency_ns": {"count", "min", "mean", "p50", "p90", "p99", "p999", "max"},
                                   "lateness_ns": {... the same, "limit", "end"}, "valid", "reason"}
    /labgen/streams,PORT[,FIRST]  {"trial", "state", "port", "flows", "first", "sent": [...], "received": [...],
                                   "lost": [...], "reordered": [...], "duplicate": [...]}: per flow of sending
                                   port PORT, 128 flows from FIRST (one stream per flow and sending port)
    /labgen/stop                  end the current trial's sending now
    /labgen/quit                  exit (as SIGTERM does)
    /labgen/clock                 {"tsc", "mono_ns", "hz"}: the TSC and CLOCK_MONOTONIC read together, now
    /labgen/gaps,LOG[,FIRST]      {"log", "total", "dropped", "first", "before": [...], "after": [...], "count": [...],
                                   "filled": [...], "stream": [...], "kind": [...]}: 80 gaps of LOG (lost: numbers a
                                   stream skipped; refused: runs of frames the driver did not take) from FIRST
    /labgen/series[,FIRST]        {"bins", "bin_cycles", "first", "offered": [...], "sent": [...], "received": [...],
                                   "p50": [...], "p99": [...], "max": [...]}: 100 time bins from FIRST (start key bin=)
    /labgen/window,FIRST,END      {"offered", "sent", "received", "latency_ns": {...}}: bins FIRST..END-1 merged

Validity (native/labgen/src/worker.c ``lg_late_limit``): a paced trial is valid when every measured frame
was handed to the driver and each port's last burst went out at most max(0.001% of the duration,
``tolerance`` frame intervals) after its due time: siitperf's end-of-sending rule (defines.h TOLERANCE
1.00001) with a floor for a polling sender on a shared vCPU. Stalls in the middle are reported
(``lateness``, ``stall_us``), not counted as invalid; an invalid trial is never loss.

Time (labgen 1.1, for reconfiguration and soak trials): every frame carries its send stamp (TSC), so a frame
that went missing is placed in time. A *gap* is a run of missing frames with the stamps of the frames that got
through on either side (``before``, ``after``): numbers a stream skipped (log ``lost``, found by the receiver),
or frames the driver refused (log ``refused``, found by the sender: a full ring, or a port whose peer is gone,
as while a guest's port is stopped; refused frames are never numbered, so the receiver cannot see them).
With ``bin=S`` a trial also counts every measured frame in the time bin of its send stamp (offered, taken,
received, and the latency of those received): a series, and any window of it merged (``/labgen/window``).
Stamps are the TSC; ``arm_tsc``/``arm_mono_ns`` in the stats and a ``/labgen/clock`` reading after the trial
relate them to CLOCK_MONOTONIC, labctl's ``time.monotonic_ns()`` (:class:`TrialClock`): DPDK's TSC frequency
is a rounded estimate, so the rate between the two clocks is measured across the trial, not taken from it.

Pauses (``shift=S``, workload.pacing shift; worker.c ``shift_schedule``): a gap longer than S between two
sending passes is a pause of labgen's own CPU, and the rest of the schedule moves later by it instead of
the frames due in it going out back to back; ``shifts`` and ``paused_ns`` count those of the measured
phase, and ``window_ns`` leaves them out (the achieved rate is over the time the sender ran). Only a
sender that was caught up is shifted (one that cannot keep up never is), and a trial whose pauses took
more than 10% of its time is invalid ("generator paused too long": LG_PAUSED_MAX_PCT).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labctl import native, signals
from labctl.dpdk.telemetry import Telemetry, socket_path
from labctl.dpdk.eal import EalOptions, devarg_path, lcores_argument, mbuf_budget
from labctl.dpdk.labgen_replies import Gap, LabgenResult, Percentiles, SeriesBin, StreamCounts, TrialClock, WindowCounts
from labctl.dpdk.runtime import Ledger, start_recorded
from labctl.errors import WorkloadError
from labctl.host.sockets import unix_listening
from labctl.safefs import make_dir, open_new

if TYPE_CHECKING:
    from labctl.dpdk.testpmd import Testpmd

#: Limits of native/labgen/src/labgen.h.
MIN_FRAME, MAX_FRAME = 64, 1518
MAX_BURST, MAX_FLOWS, MAX_QUEUES = 512, 1024, 16
DEFAULT_TOLERANCE = 64
POLL_S = 0.02
MIN_BIN_S, MAX_BIN_S, MAX_BINS = 0.001, 60.0, 16384  # LG_MIN_BIN_NS, LG_MAX_BIN_NS, LG_MAX_BINS
GAPS_PER_REPLY, SERIES_PER_REPLY = 80, 100
GAP_REFUSED, GAP_HEAD, GAP_TAIL = 1, 0x100, 0x200  # stats.h LG_GAP_*


@dataclass
class LabgenOptions:
    """The application half of a labgen command line (after ``--``)."""

    queues: int = 1
    rxd: int = 1024
    txd: int = 1024
    mbufs: int = 16384
    wait_ports: bool = False  # configure ports only on /labgen/port_start (vhost client ports)

    def argv(self) -> list[str]:
        args = [f"--queues={self.queues}", f"--rxd={self.rxd}", f"--txd={self.txd}", f"--mbufs={self.mbufs}"]
        return args + (["--wait-ports"] if self.wait_ports else [])


def eal_argv(eal: EalOptions) -> list[str]:
    """EalOptions' arguments, plus --no-shconf without hugepages: --no-huge runs DPDK 22.11 in legacy
    memory mode, which refuses --in-memory ("Option --legacy-mem is not compatible with --in-memory"),
    while --no-shconf keeps the config and fbarray files out of /var/run/dpdk/<prefix> (labgen removes
    the then empty directory when it exits)."""
    args = eal.argv()
    return args + ["--no-shconf"] if eal.hugepages_dir is None else args


def _seconds(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".") or "0"


@dataclass(frozen=True)
class TrialSpec:
    """One trial: ``rate_pps`` frames per second per sending port (0: as fast as possible) for
    ``duration_s`` (or ``count`` frames per port), after ``warmup_s`` on the same schedule."""

    rate_pps: float
    duration_s: float = 1.0
    count: int | None = None
    warmup_s: float = 0.0
    drain_s: float = 0.1
    frame_size: int = 64
    burst: int = 32
    flows: int = 1
    tolerance_frames: int = DEFAULT_TOLERANCE
    shift_s: float = 0.0  # a pause of the sender longer than this shifts its schedule (0: caught up in a burst)
    ports_mask: int | None = None  # None: every started port sends
    bin_s: float = 0.0  # width of the trial's time bins (0: none)

    def __post_init__(self) -> None:
        checks = [(self.rate_pps >= 0, f"rate {self.rate_pps} is negative"),
                  (MIN_FRAME <= self.frame_size <= MAX_FRAME, f"frame size {self.frame_size} is not in {MIN_FRAME}..{MAX_FRAME}"),
                  (1 <= self.burst <= MAX_BURST, f"burst {self.burst} is not in 1..{MAX_BURST}"),
                  (1 <= self.flows <= MAX_FLOWS, f"flows {self.flows} is not in 1..{MAX_FLOWS}"),
                  (self.duration_s > 0 or bool(self.count), "a trial needs a duration or a count"),
                  (self.warmup_s >= 0, f"warm-up {self.warmup_s} is negative"),
                  (self.drain_s >= 0, f"drain {self.drain_s} is negative"),
                  (self.shift_s >= 0, f"shift {self.shift_s} is negative (0: catch up after a pause)"),
                  (self.bin_s == 0 or MIN_BIN_S <= self.bin_s <= MAX_BIN_S,
                   f"time bins of {self.bin_s} s are not in {MIN_BIN_S}..{MAX_BIN_S} s")]
        for ok, message in checks:
            if not ok:
                raise WorkloadError(f"labgen trial: {message}")

    def params(self) -> str:
        """The /labgen/start parameters."""
        parts = {"rate": str(round(self.rate_pps)), "warmup": _seconds(self.warmup_s), "drain": _seconds(self.drain_s),
                 "size": str(self.frame_size), "burst": str(self.burst), "flows": str(self.flows),
                 "tolerance": str(self.tolerance_frames)}
        if self.count:
            parts["count"] = str(self.count)
        else:
            parts["duration"] = _seconds(self.duration_s)
        if self.shift_s:
            parts["shift"] = _seconds(self.shift_s)
        if self.ports_mask is not None:
            parts["ports"] = str(self.ports_mask)
        if self.bin_s:
            parts["bin"] = _seconds(self.bin_s)
        return ",".join(f"{key}={value}" for key, value in parts.items())

    def sending_s(self) -> float | None:
        """How long sending should take, warm-up included (None: unpaced and counted, unknown)."""
        if self.count:
            return self.warmup_s + self.count / self.rate_pps if self.rate_pps else None
        return self.warmup_s + self.duration_s

    def expected_s(self) -> float:
        """How long the trial should take (without the generator falling behind)."""
        return (self.sending_s() or 0.0) + self.drain_s


@dataclass(eq=False)
class Labgen:
    """A labgen process (once started); its output goes to ``log_path``."""

    role: str
    eal: EalOptions
    app: LabgenOptions
    log_path: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)
    tel: Telemetry | None = field(default=None, repr=False)

    @property
    def argv(self) -> list[str]:
        return [str(native.labgen_path()), *eal_argv(self.eal), "--", *self.app.argv()]

    def start(self) -> int:
        argv = self.argv
        make_dir(self.log_path.parent)
        with open_new(self.log_path) as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self.proc.pid

    start_daemon = start  # labctl.dpdk.runtime.start_recorded may ask for either

    def start_recorded(self, ledger: Ledger) -> int:
        """Record the DPDK runtime in ``ledger``, start, record the pid with its start time
        (:func:`labctl.dpdk.runtime.start_recorded`: what the crash paths and ``labctl down`` remove)."""
        return start_recorded(ledger, self)

    def _tail(self) -> str:
        try:
            lines = [line for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return "no log"
        return " / ".join(lines[-2:]) or "no output"

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise WorkloadError(f"{self.role} labgen exited with code {self.proc.returncode}: {self._tail()} "
                                f"(log {self.log_path})")

    def connect(self, timeout_s: float = 30.0) -> None:
        """Wait until labgen answers on its telemetry socket and says it is ready."""
        deadline = time.monotonic() + timeout_s
        path = socket_path(self.eal.file_prefix)
        while True:
            self._check_alive()
            try:
                if self.tel is None:
                    self.tel = Telemetry(path)
                if (self.tel.command("/labgen/info") or {}).get("state") == "ready":
                    return
            except WorkloadError:
                if self.tel is not None:
                    self.tel.close()
                    self.tel = None
            if time.monotonic() > deadline:
                raise WorkloadError(f"{self.role} labgen not ready within {timeout_s:.0f} s (log {self.log_path})")
            signals.sleep(POLL_S)

    def command(self, cmd: str) -> dict[str, Any]:
        """One labgen telemetry command; its error reply becomes a WorkloadError."""
        if self.tel is None:
            self.connect()
        assert self.tel is not None
        try:
            reply = self.tel.command(cmd)
        except WorkloadError:
            self._check_alive()
            raise
        if not isinstance(reply, dict):
            raise WorkloadError(f"{self.role} labgen: {cmd.split(',')[0]} gave no reply (log {self.log_path})")
        if "error" in reply:
            raise WorkloadError(f"{self.role} labgen: {cmd.split(',')[0]}: {reply['error']}")
        return reply

    def ports(self) -> dict[int, dict[str, Any]]:
        return {int(k): v for k, v in self.command("/labgen/ports").items()}

    def port_start(self, port: int) -> None:
        self.command(f"/labgen/port_start,{port}")

    def wait_links(self, timeout_s: float = 30.0) -> None:
        """Wait until every port is started and its link is up (a vhost port: the guest's queues are ready)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ports = self.ports()
            if all(p.get("started") and p.get("link") for p in ports.values()):
                return
            if time.monotonic() > deadline:
                down = [str(n) for n, p in ports.items() if not (p.get("started") and p.get("link"))]
                raise WorkloadError(f"{self.role} labgen: links of ports {', '.join(down)} not up after "
                                    f"{timeout_s:.0f} s (log {self.log_path})")
            signals.sleep(POLL_S)

    def streams(self, port: int) -> list[StreamCounts]:
        """Every stream of sending port ``port`` in the current or last trial (paged, 128 flows a reply)."""
        out: list[StreamCounts] = []
        while True:
            reply = self.command(f"/labgen/streams,{port},{len(out)}")
            columns = [reply[name] for name in ("sent", "received", "lost", "reordered", "duplicate")]
            out += [StreamCounts(port, len(out) + i, *row) for i, row in enumerate(zip(*columns))]
            if len(out) >= int(reply["flows"]) or not columns[0]:
                return out

    def clock(self) -> dict[str, Any]:
        """labgen's TSC and CLOCK_MONOTONIC read together, now (``{"tsc", "mono_ns", "hz"}``)."""
        return self.command("/labgen/clock")

    def trial_clock(self, stats: dict[str, Any]) -> TrialClock:
        """The current or last trial's clock (``stats``: its /labgen/stats), measured against a reading now."""
        if not stats.get("arm_tsc"):
            raise WorkloadError(f"{self.role} labgen: trial {stats.get('trial')} was never armed (no clock): "
                                "rebuild labgen with scripts/build-labgen.sh if it is older than 1.1")
        return TrialClock.of(stats, self.clock())

    def gaps(self, log: str) -> tuple[list[Gap], int]:
        """Every gap of the current or last trial in ``log`` (lost | refused), and how many did not fit
        labgen's log (LG_MAX_GAPS)."""
        out: list[Gap] = []
        while True:
            reply = self.command(f"/labgen/gaps,{log},{len(out)}")
            columns = [reply[name] for name in ("before", "after", "count", "filled", "stream", "kind")]
            out += [Gap(log, b, a, c, f, st, bool(k & GAP_HEAD), bool(k & GAP_TAIL))
                    for b, a, c, f, st, k in zip(*columns)]
            if len(out) >= int(reply["total"]) or not columns[0]:
                return out, int(reply.get("dropped", 0))

    def series(self, first: int = 0, end: int | None = None) -> list[SeriesBin]:
        """Time bins ``first``..``end``-1 of the current or last trial (all of them when ``end`` is None)."""
        out: list[SeriesBin] = []
        index = first
        while end is None or index < end:
            reply = self.command(f"/labgen/series,{index}")
            columns = [reply[name] for name in ("offered", "sent", "received", "p50", "p99", "max")]
            rows = list(zip(*columns))
            if end is not None:
                rows = rows[:max(end - index, 0)]
            out += [SeriesBin(index + i, *row) for i, row in enumerate(rows)]
            index += len(rows)
            if not rows or index >= int(reply["bins"]):
                break
        return out

    def window(self, first: int, end: int) -> WindowCounts:
        """Time bins ``first``..``end``-1 merged (clipped to the trial's bins)."""
        reply = self.command(f"/labgen/window,{max(first, 0)},{max(end, first, 0)}")
        return WindowCounts(int(reply["first"]), int(reply["end"]), int(reply["offered"]), int(reply["sent"]),
                            int(reply["received"]), Percentiles.from_ns(reply.get("latency_ns") or {}))

    def start_trial(self, spec: TrialSpec) -> dict[str, Any]:
        try:
            return self.command(f"/labgen/start,{spec.params()}")
        except WorkloadError as exc:
            if "unknown key bin" in str(exc):  # a labgen built before reconfiguration and soak trials
                raise WorkloadError(f"{self.role} labgen is older than this labctl (its /labgen/start has no bin "
                                    "key): rebuild it with scripts/build-labgen.sh") from exc
            if "unknown key shift" in str(exc):  # a labgen built before workload.pacing
                raise WorkloadError(f"{self.role} labgen is older than this labctl (its /labgen/start has no shift "
                                    "key): rebuild it with scripts/build-labgen.sh, or set workload.pacing absolute"
                                    ) from exc
            raise

    def stats(self) -> dict[str, Any]:
        return self.command("/labgen/stats")

    def stop_trial(self) -> None:
        self.command("/labgen/stop")

    def stop_quietly(self) -> None:
        """Stop the current trial's sending if labgen still answers (after an error or an interruption:
        the original error matters, not this one)."""
        try:
            self.stop_trial()
        except Exception:  # noqa: BLE001 - the process may have gone with whatever ended the trial
            pass

    def wait_done(self, timeout_s: float) -> dict[str, Any]:
        """Poll /labgen/stats until the trial is done; stop it (and fail) when it overruns."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.stats()
            if stats.get("state") == "done":
                return stats
            if time.monotonic() > deadline:
                self.stop_trial()
                raise WorkloadError(f"{self.role} labgen: trial {stats.get('trial')} still {stats.get('state')} "
                                    f"after {timeout_s:.0f} s (stopped)")
            signals.sleep(POLL_S)

    def run_trial(self, spec: TrialSpec, timeout_s: float | None = None) -> LabgenResult:
        """Run one trial and return its result. A cancel or SIGTERM stops the trial's sending first."""
        self.start_trial(spec)
        try:
            # the first poll comes after the sending, half-way through the drain: a telemetry command
            # wakes a thread, which on this 2-vCPU host may briefly take the sending lcore's CPU
            signals.sleep((spec.sending_s() or 0.0) + spec.drain_s / 2)
            limit = timeout_s if timeout_s is not None else 2 * spec.expected_s() + 10.0
            return LabgenResult.from_stats(self.wait_done(limit))
        except BaseException:
            if self.tel is not None and (self.proc is None or self.proc.poll() is None):
                try:
                    self.stop_trial()
                except WorkloadError:
                    pass
            raise

    def quit(self, timeout_s: float = 10.0, grace_s: float = 5.0) -> None:
        """Ask labgen to exit (/labgen/quit); SIGTERM it after ``timeout_s``, SIGKILL after ``grace_s`` more."""
        if self.tel is not None:
            try:
                if self.proc is None or self.proc.poll() is None:
                    self.tel.command("/labgen/quit")
            except WorkloadError:
                pass
            self.tel.close()
            self.tel = None
        if self.proc is None:
            return
        proc = self.proc
        for escalate, wait_s in ((None, timeout_s), (proc.terminate, grace_s), (proc.kill, 5.0)):
            if proc.poll() is not None:
                return
            if escalate is not None:
                escalate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(wait_s)


def connect_ports(gen: Labgen, listener: "Testpmd", sockets: list[Path], timeout_s: float = 60.0) -> None:
    """Start port N of a --wait-ports labgen as soon as the listener listens on socket N (the embedded
    guest creates socket N+1 only after socket N was connected)."""
    for index, sock in enumerate(sockets):
        listener.wait_paths([sock], timeout_s, ready=unix_listening)
        gen.port_start(index)


def labgen_process(vdevs: list[str], queues: int, file_prefix: str, workers: list[frozenset[int] | None],
                   hugepages_dir: Path | None, log_path: Path, role: str = "generator",
                   wait_ports: bool = False) -> Labgen:
    """A labgen with ports ``vdevs``. ``workers``: one CPU set per worker lcore (None: float on every
    online CPU); with one, it sends and receives, with two the first sends and the second receives.
    Memory is sized as the testpmds' (every ring full twice over)."""
    mbufs, memory_mb = mbuf_budget(len(vdevs), queues, 1024, 1024, hugepages_dir is not None)
    eal = EalOptions(file_prefix=file_prefix, lcores=lcores_argument(workers), vdevs=vdevs, memory_mb=memory_mb,
                     hugepages_dir=hugepages_dir, log_levels=["lib.vhost.config:warning"])
    return Labgen(role, eal, LabgenOptions(queues=queues, mbufs=mbufs, wait_ports=wait_ports), log_path)


def vhost_client_labgen(sockets: list[Path], queues: int, file_prefix: str, workers: list[frozenset[int] | None],
                        hugepages_dir: Path | None, log_path: Path, role: str = "generator") -> Labgen:
    """A labgen whose ports are net_vhost clients of ``sockets`` (the embedded lab's guest listens), each
    connecting only on /labgen/port_start (see ``connect_ports``)."""
    vdevs = [f"net_vhost{i},iface={devarg_path(sock)},queues={queues},client=1" for i, sock in enumerate(sockets)]
    return labgen_process(vdevs, queues, file_prefix, workers, hugepages_dir, log_path, role, wait_ports=True)


def ring_labgen(ports: int, queues: int, file_prefix: str, workers: list[frozenset[int] | None], log_path: Path,
                role: str = "generator") -> Labgen:
    """A labgen on ``ports`` net_ring ports, each looped to itself (DPDK 22.11 drivers/net/ring: a
    net_ringN vdev's tx queue q and rx queue q share one 1024-slot ring, up to 16 queues): no device
    under test, for checking labgen itself."""
    return labgen_process([f"net_ring{i}" for i in range(ports)], queues, file_prefix, workers, None, log_path, role)
