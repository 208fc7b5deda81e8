"""The kernel-stack workload: TCP streams (iperf3) and request/response transactions (sockperf) between a
kernel guest's virtio-net NIC and the host, N sessions at a time; CPU from /proc/stat on both sides and
netperf's service demand.

    servers on the receiving side (one per session, port ``port_base + i``), then one client per session
    on the sending side -> warm-up -> counters (host /proc/stat; the guest's /proc/stat, /proc/interrupts,
    ethtool -S, /proc/net/snmp) -> window (thread monitor) -> counters -> the clients' results -> metrics

Sessions: iperf3 3.12 is single-threaded (``-P`` adds streams to one thread), so every session is its own
client process and its own server process (``labctl.platform.IPERF3``); tcp_rr runs one ``sockperf
ping-pong`` client per session against its own ``sockperf server``. ``direction`` names where the data
goes: guest_to_host puts the clients in the guest (streams are sent from there, requests asked from
there: netperf's "Guest -> Host"), host_to_guest puts them on the host.

Metrics, over the window after the warm-up:

- ``bandwidth_gbps``: the receivers' TCP payload (iperf3 ``end.sum_received``), summed over sessions;
  ``retransmits``: the senders' (``end.sum_sent.retransmits``, Linux ``tcpi_total_retrans``).
- ``transactions_per_s``: sockperf's ``[Valid Duration]`` ReceivedMessages / RunTime (round trips, its
  own warm-up excluded), summed over sessions; ``retransmits`` then is the guest's ``Tcp: RetransSegs``.
- service demand as netperf defines it (netperf ``src/netlib.c`` ``calc_service_demand_internal``):
  ``SD = util × CPUs × 1e6 / (units / divisor / elapsed)``, i.e. microseconds of CPU per KB (1024 bytes,
  received) for streams and per transaction for RR. ``util × CPUs`` is the busy CPU in cores, taken from
  /proc/stat deltas: busy = user + nice + system + irq + softirq + steal (guest time is already inside
  user and nice, proc(5)), over all states. The host's is system-wide (QEMU's vCPU, emulator and I/O
  threads, vhost workers, the host-side tools, and anything else running on the host); the guest's is the
  guest's own /proc/stat.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from labctl import platform, signals
from labctl.errors import WorkloadError
from labctl.host.monitor import measured_window
from labctl.host.processes import TAG_VARIABLE, stop_process
from labctl.host.threads import qemu_thread_kind
from labctl.owner import process_started
from labctl.results.record import Metrics

if TYPE_CHECKING:  # typing only: workload/ sits below lab/ and imports nothing of it at run time
    from labctl.lab.interface import KernelLab
    from labctl.lab.plan import LabPlan, TcpPlan

TOOLS = (platform.IPERF3, platform.SOCKPERF)
#: Seconds the clients run past the end of the window, so the second counters fall inside the traffic.
TAIL_S = 1
#: Extra seconds allowed for the clients' results after they should have ended (TCG guests are slow).
RESULT_GRACE_S = 60.0
_ANSI = re.compile(r"\x1b?\[[0-9;]*m")

# --- argument lists (the host runs them as they are; the guest's appliance runs the same lists) -----------


def server_argv(kind: str, bind: str, port: int) -> list[str]:
    """One session's server, bound to its side's address. Both reuse the address (iperf3 always does,
    sockperf with ``--uc-reuseaddr``): the last trial's connections on the port may be in TIME_WAIT."""
    if kind == "tcp_stream":
        return [platform.IPERF3, "-s", "-1", "-B", bind, "-p", str(port)]
    return [platform.SOCKPERF, "server", "--tcp", "--uc-reuseaddr", "-i", bind, "-p", str(port)]


def client_argv(kind: str, server: str, port: int, warmup_s: int, seconds: int) -> list[str]:
    """One session's client: iperf3 omits the warm-up from its results (``-O``) and runs ``seconds``
    after it; sockperf runs warm-up + seconds (its own 400 ms warm-up and tail are left out of its
    ``[Valid Duration]``)."""
    if kind == "tcp_stream":
        return [platform.IPERF3, "-c", server, "-p", str(port), "-t", str(seconds), "-O", str(warmup_s),
                "-i", "0", "--json"]
    return [platform.SOCKPERF, "ping-pong", "--tcp", "-i", server, "-p", str(port), "-t",
            str(warmup_s + seconds), "--mps=max", "--no-rdtsc"]


def session_seconds(plan: LabPlan) -> tuple[int, int]:
    """(warm-up, client run after the warm-up) in whole seconds: the window plus :data:`TAIL_S`."""
    return math.ceil(plan.warmup_s), math.ceil(plan.duration_s) + TAIL_S


# --- parsers ------------------------------------------------------------------------------------------


@dataclass
class SessionResult:
    """One client's result: streams fill bits_per_second, bytes and retransmits; RR transactions_per_s."""

    port: int
    ok: bool
    error: str | None = None
    bits_per_second: float = 0.0
    bytes: int = 0
    retransmits: int = 0
    transactions_per_s: float = 0.0
    latency_us: float | None = None


def parse_iperf3(text: str, port: int = 0) -> SessionResult:
    """An iperf3 ``--json`` client report: the receiver's bytes and rate, the sender's retransmits."""
    import json

    try:
        data = json.loads(text)
    except ValueError:
        tail = text.strip().splitlines()[-1:] or ["no output"]
        return SessionResult(port, False, f"iperf3 wrote no JSON report: {tail[0][:200]}")
    if data.get("error"):
        return SessionResult(port, False, f"iperf3: {data['error']}")
    end = data.get("end") or {}
    received, sent = end.get("sum_received") or {}, end.get("sum_sent") or {}
    if "bits_per_second" not in received:
        return SessionResult(port, False, "iperf3: the report has no end.sum_received")
    return SessionResult(port, True, bits_per_second=float(received["bits_per_second"]),
                         bytes=int(received.get("bytes", 0)), retransmits=int(sent.get("retransmits", 0)))


_VALID = re.compile(r"\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)")
_LATENCY = re.compile(r"avg-latency=([0-9.]+)")


def parse_sockperf(text: str, port: int = 0) -> SessionResult:
    """A ``sockperf ping-pong`` report: round trips per second over its valid duration, mean latency."""
    clean = _ANSI.sub("", text)
    match = _VALID.search(clean)
    if not match:
        errors = [line for line in clean.splitlines() if "ERROR" in line or "error" in line]
        tail = (errors or clean.strip().splitlines() or ["no output"])[-1]
        return SessionResult(port, False, f"sockperf: no [Valid Duration] line: {tail.strip()[:200]}")
    run_s, received = float(match.group(1)), int(match.group(3))
    latency = _LATENCY.search(clean)
    if run_s <= 0:
        return SessionResult(port, False, "sockperf: a valid duration of 0 s")
    return SessionResult(port, True, transactions_per_s=received / run_s,
                         latency_us=float(latency.group(1)) if latency else None)


def parse_result(kind: str, text: str, port: int = 0) -> SessionResult:
    return parse_iperf3(text, port) if kind == "tcp_stream" else parse_sockperf(text, port)


#: /proc/stat cpu fields (proc(5)) and the ones that are busy time; guest and guest_nice are already
#: counted in user and nice.
STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    """One /proc/stat snapshot: the all-CPU line and the number of CPU lines, in clock ticks."""

    fields: dict[str, int]
    cpus: int

    @property
    def busy(self) -> int:
        return sum(self.fields.get(f, 0) for f in BUSY_FIELDS)

    @property
    def total(self) -> int:
        return sum(self.fields.get(f, 0) for f in STAT_FIELDS[:8])


def parse_proc_stat(text: str) -> CpuTimes:
    cpus = 0
    fields: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        if parts[0] == "cpu":
            fields = {name: int(v) for name, v in zip(STAT_FIELDS, parts[1:])}
        else:
            cpus += 1
    if not fields:
        raise ValueError("no cpu line in /proc/stat")
    return CpuTimes(fields, max(cpus, 1))


def busy_cores(a: CpuTimes, b: CpuTimes) -> float:
    """CPU busy between two snapshots, in cores: (busy ticks / all ticks) × CPUs."""
    total = b.total - a.total
    if total <= 0:
        return 0.0
    return (b.busy - a.busy) / total * b.cpus


def service_demand(cores: float, units_per_s: float, divisor: float) -> float | None:
    """netperf's service demand: microseconds of CPU per unit of work, ``cores × 1e6 / (units/divisor/s)``
    (divisor 1024 for KB of a stream, 1 for transactions)."""
    rate = units_per_s / divisor
    return cores * 1e6 / rate if rate > 0 else None


_IRQ = re.compile(r"^\s*(\d+):((?:\s+\d+)+)\s+(.*?)\s*$")
_VIRTIO_QUEUE = re.compile(r"(virtio\d+)-(input|output)\.(\d+)$")


def parse_interrupts(text: str) -> dict[str, int]:
    """Per-queue virtio interrupt totals (all CPUs) from /proc/interrupts: ``{"rxq0": n, "txq0": n}``
    (virtio_net names its MSI-X vectors ``virtioN-input.Q`` / ``virtioN-output.Q``)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        match = _IRQ.match(line)
        if not match:
            continue
        queue = _VIRTIO_QUEUE.search(match.group(3))
        if queue:
            key = f"{'rx' if queue.group(2) == 'input' else 'tx'}q{queue.group(3)}"
            out[key] = out.get(key, 0) + sum(int(x) for x in match.group(2).split())
    return out


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """``ethtool -S`` as name -> value (virtio_net: rx_queue_0_packets, tx_queue_0_bytes, ...)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition(":")
        if sep and value.strip().lstrip("-").isdigit():
            out[name.strip()] = int(value)
    return out


def parse_snmp_tcp(text: str) -> dict[str, int]:
    """The ``Tcp:`` counters of /proc/net/snmp (a header line, then a values line)."""
    rows = [line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:")]
    if len(rows) < 2:
        return {}
    return {k: int(v) for k, v in zip(rows[0], rows[1]) if v.lstrip("-").isdigit()}


def listening_ports(text: str) -> set[int]:
    """Ports in LISTEN state (``0A``) in /proc/net/tcp or tcp6."""
    ports = set()
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A":
            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


def host_listening_ports() -> set[int]:
    ports: set[int] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            ports |= listening_ports(Path(name).read_text())
        except OSError:
            continue
    return ports


def read_host_stat() -> CpuTimes:
    return parse_proc_stat(Path("/proc/stat").read_text())


# --- the guest's counters --------------------------------------------------------------------------


@dataclass
class GuestCounters:
    """What the guest's STAT reply carries, parsed."""

    cpu: CpuTimes
    interrupts: dict[str, int]
    ethtool: dict[str, int]
    tcp: dict[str, int]

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "GuestCounters":
        return cls(parse_proc_stat(data.get("stat", "")), parse_interrupts(data.get("interrupts", "")),
                   parse_ethtool_stats(data.get("ethtool", "")), parse_snmp_tcp(data.get("snmp", "")))


@dataclass
class Counters:
    t: float
    host: CpuTimes
    guest: GuestCounters


_ETH_QUEUE = re.compile(r"^(rx|tx)_queue_(\d+)_(packets|bytes)$")


def queue_deltas(a: GuestCounters, b: GuestCounters) -> dict[str, dict[str, int]]:
    """Per guest queue in the window: packets and bytes (ethtool -S) and interrupts (/proc/interrupts)."""
    out: dict[str, dict[str, int]] = {}
    for name, value in b.ethtool.items():
        match = _ETH_QUEUE.match(name)
        if match:
            entry = out.setdefault(f"{match.group(1)}q{match.group(2)}", {})
            entry[match.group(3)] = value - a.ethtool.get(name, 0)
    for queue, value in b.interrupts.items():
        out.setdefault(queue, {})["interrupts"] = value - a.interrupts.get(queue, 0)
    return dict(sorted(out.items(), key=lambda item: (item[0][:2], int(item[0][3:]))))


def thread_cpu(threads: list[Any]) -> dict[str, float]:
    """CPU per QEMU thread kind (vcpuN, emulator, io, vhost, worker, other) and per host tool, in % of
    a core, from the thread monitor's samples."""
    out: dict[str, float] = {}
    for t in threads:
        if t.role == "qemu":
            key = f"qemu.{qemu_thread_kind(t.name, t.tid == t.pid)}"
        else:
            key = f"host.{t.name}"
        out[key] = out.get(key, 0.0) + t.cpu_pct
    return {k: round(v, 1) for k, v in sorted(out.items())}


def tcp_metrics(kind: str, direction: str, results: list[SessionResult], a: Counters, b: Counters,
                    cpu: dict[str, float], queues_enabled: int | None) -> tuple[Metrics, dict[str, Any]]:
    """The trial's metrics from the sessions' results and the counters at both ends of the window.
    Queue shares count the guest's receive queues, or its transmit queues when it sends a stream."""
    ok = [r for r in results if r.ok]
    host = busy_cores(a.host, b.host)
    guest = busy_cores(a.guest.cpu, b.guest.cpu)
    per_queue = queue_deltas(a.guest, b.guest)
    metrics = Metrics(window_s=b.t - a.t, host_cpu_cores=host, guest_cpu_cores=guest, cpu=cpu,
                      guest_queues_enabled=queues_enabled, sessions_ok=len(ok))
    if kind == "tcp_stream":
        bps = sum(r.bits_per_second for r in ok)
        metrics.bandwidth_gbps = bps / 1e9
        metrics.retransmits = sum(r.retransmits for r in ok)
        metrics.service_demand_host_us_per_kb = service_demand(host, bps / 8, 1024)
        metrics.service_demand_guest_us_per_kb = service_demand(guest, bps / 8, 1024)
    else:
        tps = sum(r.transactions_per_s for r in ok)
        metrics.transactions_per_s = tps
        latencies = [r.latency_us for r in ok if r.latency_us is not None]
        metrics.rr_latency_us = statistics.median(latencies) if latencies else None
        metrics.retransmits = b.guest.tcp.get("RetransSegs", 0) - a.guest.tcp.get("RetransSegs", 0)
        metrics.service_demand_host_us_per_tx = service_demand(host, tps, 1)
        metrics.service_demand_guest_us_per_tx = service_demand(guest, tps, 1)
    side = "tx" if kind == "tcp_stream" and direction == "guest_to_host" else "rx"
    counted = {q: v.get("packets", 0) for q, v in per_queue.items() if q.startswith(side)}
    total = sum(counted.values())
    metrics.queue_shares = {f"guest.{q}": n / total for q, n in counted.items() if total and n > 0}
    details = {"per_queue": per_queue,
               "sessions": [r.__dict__ for r in results],
               "cpu_window": {"host_cpus": b.host.cpus, "guest_cpus": b.guest.cpu.cpus}}
    return metrics, details


# --- host-side processes ----------------------------------------------------------------------------


@dataclass
class HostTools:
    """The host's iperf3/sockperf processes of one lab: every one carries ``LABCTL_TAG=<tag>`` in its
    environment, the ledger's ``tagged`` resource (recorded before the first is started) finds them."""

    tag: str
    log_dir: Path
    procs: list[tuple[str, int, subprocess.Popen, Path]] = field(default_factory=list)

    def start(self, role: str, port: int, argv: list[str]) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        out = self.log_dir / f"host-{role}-{port}.out"
        with open(out, "wb") as handle:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT,
                                    env={**os.environ, TAG_VARIABLE: self.tag}, start_new_session=True)
        self.procs.append((role, port, proc, out))
        return proc

    def pids(self) -> dict[str, int]:
        return {f"host-{role}.{port}": proc.pid for role, port, proc, _ in self.procs if proc.poll() is None}

    def wait_listening(self, ports: list[int], timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            missing = set(ports) - host_listening_ports()
            if not missing:
                return
            dead = [f"{role} {port}: {out.read_text(errors='replace').strip()[-200:]}"
                    for role, port, proc, out in self.procs if proc.poll() is not None and port in missing]
            if dead:
                raise WorkloadError(f"host server ended before listening: {dead[0]}")
            if time.monotonic() > deadline:
                raise WorkloadError(f"host servers not listening on ports {sorted(missing)} after {timeout_s:.0f} s")
            signals.sleep(0.05)

    def results(self, role: str, timeout_s: float) -> dict[int, str]:
        """Each ``role`` process's output once it ended (the ones still running after ``timeout_s`` are
        stopped and give what they wrote)."""
        deadline = time.monotonic() + timeout_s
        out: dict[int, str] = {}
        for r, port, proc, path in self.procs:
            if r != role:
                continue
            while proc.poll() is None and time.monotonic() < deadline:
                signals.sleep(0.1)
            if proc.poll() is None:
                _stop(proc)
            out[port] = path.read_text(errors="replace")
        return out

    def stop(self) -> None:
        for _role, _port, proc, _out in self.procs:
            _stop(proc)
        self.procs = []


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        stop_process(proc.pid, process_started(proc.pid), timeout_s=5.0)  # SIGTERM, then SIGKILL
        proc.poll()


# --- one trial ---------------------------------------------------------------------------------------


def run_sessions(lab: KernelLab, tcp: TcpPlan, warmup_s: int, seconds: int, host_addr: str, guest_addr: str) -> None:
    """Servers on the receiving side, then one client per session on the sending side."""
    server_side, client_side = ("host", "guest") if tcp.clients_in_guest else ("guest", "host")
    server_addr = host_addr if server_side == "host" else guest_addr
    servers = [server_argv(tcp.kind, server_addr, port) for port in tcp.ports]
    clients = [client_argv(tcp.kind, server_addr, port, warmup_s, seconds) for port in tcp.ports]
    lab.start_servers(server_side, list(tcp.ports), servers)
    lab.start_clients(client_side, list(tcp.ports), clients)


def measure(lab: KernelLab, record: Any, phase: Callable[[str], None]) -> None:
    """One tcp trial on a kernel-stack lab (:class:`labctl.lab.interface.KernelLab`: today
    :class:`labctl.lab.libvirt.kernel.KernelGuestLab`)."""
    plan: LabPlan = lab.plan
    tcp = plan.tcp
    assert tcp is not None
    record.warnings.extend(lab.record_warnings())
    record.details.update(lab.details())
    warmup_s, seconds = session_seconds(plan)
    phase(f"{tcp.sessions} {tcp.kind} session(s), {tcp.direction}")
    run_sessions(lab, tcp, warmup_s, seconds, lab.host_addr, lab.guest_addr)
    before, after, report = measured_window(lab.monitored(), warmup_s, plan.duration_s, lab.counters, phase)
    outputs = lab.client_outputs(seconds + RESULT_GRACE_S)
    lab.stop_sessions()
    results = [parse_result(tcp.kind, text, port) for port, text in sorted(outputs.items())]
    metrics, details = tcp_metrics(tcp.kind, tcp.direction, results, before, after, thread_cpu(report.threads),
                                       lab.queues_enabled)
    record.metrics = metrics
    record.details.update(details)
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    record.details["monitor_cost_pct"] = report.cost_pct
    record.warnings.extend(report.warnings())
    record.warnings.append("host service demand counts the whole host's CPU (system-wide /proc/stat): "
                           "anything else running here is in it")
    record.env = lab.environment(lab.pins(), bool(report.shared_busy_cpus))
    failed = [r for r in results if not r.ok]
    if failed:
        record.warnings.append(f"{len(failed)} of {len(results)} sessions failed: {failed[0].error}")
    if not results or len(failed) == len(results):
        reason = failed[0].error if failed else "no client reported"
        raise WorkloadError(f"no {tcp.kind} session completed: {reason}")
