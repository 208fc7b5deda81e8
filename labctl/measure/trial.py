"""One trial on the embedded lab: vswitch (generator + sink) <-> guest forwarder, measured.

    start vswitch (net_vhost servers) -> start guest (net_virtio_user) -> links up -> forward
    -> warm-up -> snapshot -> measurement window (thread monitor) -> snapshot -> stop -> teardown

Every process, socket, runtime directory, hugetlbfs mount and hugepage reservation is recorded in
the lab's state file before it is created; teardown runs on success, failure, SIGINT and SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.lab.libvirt.domxml import socket_path
from labctl.host.fingerprint import cpu_hz, fingerprint
from labctl.errors import UserError, WorkloadError, ZeroForwardingError
from labctl.lab.embedded.forwarder import effective_rings, embedded_forwarder
from labctl.lab.hugepages import reserve
from labctl.profile.knobs import flatten
from labctl.host.paths import log_dir, run_dir
from labctl.host.monitor import ThreadMonitor
from labctl.lab.pins import dpdk_worker_pins
from labctl.profile.load import LoadedProfile
from labctl.results.record import Metrics, TrialRecord
from labctl.signals import stoppable
from labctl.profile.schema import Profile
from labctl.lab.ledger import LabState, locked, teardown
from labctl.dpdk.telemetry import Telemetry
from labctl.dpdk.testpmd import FwdStats, Testpmd
from labctl.lab.embedded.vswitch import connect_ports, start_recorded, vswitch_config, vswitch_testpmd

LINK_TIMEOUT_S = 30.0
MEMORY_ERRORS = re.compile(r"(?i)too many memory regions|failed to (?:mmap|map) .*region|"
                           r"vhost_user_set_mem_table.*fail|memory.*(?:error|fail)")


@dataclass
class Snapshot:
    t: float
    vswitch_fwd: dict[int, FwdStats]
    guest_fwd: dict[int, FwdStats]
    vswitch_ports: dict[int, dict[str, Any]]
    guest_ports: dict[int, dict[str, Any]]


def _take(vswitch: Testpmd, guest: Testpmd, vs_tel: Telemetry, g_tel: Telemetry) -> Snapshot:
    t = time.monotonic()
    vs_ports = vs_tel.snapshot()
    g_ports = g_tel.snapshot()
    return Snapshot(t, vswitch.fwd_stats(), guest.fwd_stats(), vs_ports, g_ports)


def _delta(after: dict[int, dict[str, Any]], before: dict[int, dict[str, Any]], key: str) -> dict[int, int]:
    return {p: int(after[p].get(key, 0)) - int(before.get(p, {}).get(key, 0)) for p in after}


def compute_metrics(a: Snapshot, b: Snapshot, nics: int, monitor_cpu: dict[str, float],
                    guest_cpu_s: float | None) -> tuple[Metrics, dict[str, Any]]:
    window = b.t - a.t
    vs_rx = _delta(b.vswitch_ports, a.vswitch_ports, "ipackets")
    vs_rx_bytes = _delta(b.vswitch_ports, a.vswitch_ports, "ibytes")
    vs_fwd = {p: b.vswitch_fwd[p].minus(a.vswitch_fwd.get(p, FwdStats(0, 0, 0, 0))) for p in b.vswitch_fwd}
    g_fwd = {p: b.guest_fwd[p].minus(a.guest_fwd.get(p, FwdStats(0, 0, 0, 0))) for p in b.guest_fwd}
    received = sum(vs_rx.values())
    offered = sum(s.tx_packets + s.tx_dropped for s in vs_fwd.values())
    tx_dropped = sum(s.tx_dropped for s in vs_fwd.values())
    guest_tx_dropped = sum(s.tx_dropped for s in g_fwd.values())
    g_rx = _delta(b.guest_ports, a.guest_ports, "ipackets")
    nombuf = sum(_delta(b.guest_ports, a.guest_ports, "rx_nombuf").values())
    imissed = sum(_delta(b.guest_ports, a.guest_ports, "imissed").values())
    metrics = Metrics(
        mpps=received / window / 1e6,
        gbps=sum(vs_rx_bytes.values()) * 8 / window / 1e9,
        offered_mpps=offered / window / 1e6,
        loss_ratio=(1 - received / offered) if offered else None,
        rx_packets=received,
        tx_packets=sum(s.tx_packets for s in vs_fwd.values()),
        tx_dropped=tx_dropped,
        guest_tx_dropped=guest_tx_dropped,
        window_s=window,
        cpu=monitor_cpu,
    )
    metrics.drops = {"guest_rx_ring_full": tx_dropped, "vswitch_rx_ring_full": guest_tx_dropped,
                     "guest_rx_nombuf": nombuf, "guest_imissed": imissed,
                     "unaccounted": max(offered - received - tx_dropped - guest_tx_dropped, 0)}
    if nics >= 2:
        # vswitch port 1 receives what the generator sent out of port 0 (through the guest), and back
        metrics.mpps_0to1 = vs_rx.get(1, 0) / window / 1e6
        metrics.mpps_1to0 = vs_rx.get(0, 0) / window / 1e6
        metrics.gbps_0to1 = vs_rx_bytes.get(1, 0) * 8 / window / 1e9
        metrics.gbps_1to0 = vs_rx_bytes.get(0, 0) * 8 / window / 1e9
    shares: dict[str, float] = {}
    per_queue: dict[str, Any] = {}
    for port in b.guest_ports:
        before = a.guest_ports.get(port, {})
        q_after, q_before = b.guest_ports[port].get("q_ipackets", []), before.get("q_ipackets", [])
        deltas = [x - (q_before[i] if i < len(q_before) else 0) for i, x in enumerate(q_after)]
        total = g_rx.get(port, 0)
        per_queue[f"guest.port{port}"] = {"rx": g_rx.get(port, 0), "q_ipackets": deltas[:16],
                                          "q_opackets": [x - (before.get("q_opackets", [0] * 16)[i])
                                                         for i, x in enumerate(b.guest_ports[port].get("q_opackets", []))][:16]}
        for q, d in enumerate(deltas):
            if total > 0 and d > 0:
                shares[f"guest.port{port}.rxq{q}"] = d / total
    metrics.queue_shares = shares
    forwarded = sum(s.tx_packets for s in g_fwd.values())
    hz = cpu_hz()
    if guest_cpu_s and forwarded and hz:
        metrics.cycles_per_packet = guest_cpu_s * hz / forwarded
    details = {"per_queue": per_queue,
               "vswitch_fwd": {p: s.__dict__ for p, s in vs_fwd.items()},
               "guest_fwd": {p: s.__dict__ for p, s in g_fwd.items()}}
    return metrics, details


def _wait_links(tel: Telemetry, ports: int, proc: Testpmd, timeout_s: float = LINK_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        states = [tel.command(f"/ethdev/link_status,{p}") or {} for p in range(ports)]
        if all(s.get("status") == "UP" for s in states):
            return
        if proc.proc and proc.proc.poll() is not None:
            raise WorkloadError(f"vswitch exited before the guest connected: {proc.last_error()}")
        if time.monotonic() > deadline:
            raise WorkloadError(f"vhost-user links not up after {timeout_s:.0f} s (log {proc.log_path})")
        signals.sleep(0.05)


def run_trial(loaded: LoadedProfile, on_phase: Callable[[str], None] | None = None,
              repeat_index: int = 0) -> TrialRecord:
    """Run one trial of an embedded profile; returns its record (status ok or failed)."""
    profile = loaded.profile
    if profile.backend != "embedded":
        raise UserError(f"{loaded.source}: backend: {profile.backend} trials need a guest (allowed here: embedded)")
    phase = on_phase or (lambda _p: None)
    started_at = time.time()
    record = TrialRecord(config=flatten(profile.model_dump()), repeat_index=repeat_index, started_at=started_at,
                         warnings=[w.render() for w in loaded.warnings])
    timings: dict[str, float] = {}
    with stoppable(), locked(profile.name) as state:
        if state.resources:
            leftovers = teardown(state)
            record.warnings.append("removed resources left by an earlier labctl" +
                                   (f" (could not remove: {leftovers})" if leftovers else ""))
        procs: list[Testpmd] = []
        try:
            _run(profile, state, record, phase, timings, procs)
        except (ZeroForwardingError, WorkloadError) as exc:
            record.status, record.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a trial that breaks is a failed trial, not a lost sweep
            record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            t0 = time.monotonic()
            phase("teardown")
            for proc in reversed(procs):  # newest first: the guest closes its vhost-user ports, then the vswitch
                with contextlib.suppress(Exception):
                    proc.quit()
            failures = teardown(state)
            timings["teardown_s"] = time.monotonic() - t0
            if failures:
                record.warnings.append(f"teardown could not remove: {'; '.join(failures)}")
    record.finished_at = time.time()
    record.details["timings"] = timings
    return record


def _run(profile: Profile, state: LabState, record: TrialRecord, phase: Callable[[str], None],
         timings: dict[str, float], procs: list[Testpmd]) -> None:
    t_setup = time.monotonic()
    phase("setup")
    lab_run = run_dir() / profile.name
    state.record("dir", str(lab_run))
    lab_run.mkdir(parents=True, exist_ok=True)
    logs = log_dir() / profile.name
    logs.mkdir(parents=True, exist_ok=True)
    sockets = [socket_path(profile, i, run_dir()) for i in range(len(profile.guest.nics))]
    prefix = f"labctl-{profile.name}"
    def build(hugedir: Path | None) -> tuple[Testpmd, Testpmd]:
        # the guest's ports listen and the vswitch connects to them (see labctl.lab.embedded.vswitch)
        return (vswitch_testpmd(vswitch_config(profile, sockets, f"{prefix}-vs", hugedir, client=True),
                                logs / "vswitch.log"),
                embedded_forwarder(profile, sockets, f"{prefix}-guest", hugedir, logs / "guest.log", server=True))

    hugedir = None
    if profile.guest.hugepages:
        mount = lab_run / "hugetlbfs"
        grant = reserve(state, mount, sum(proc.eal.memory_mb for proc in build(mount)))
        if grant is None:
            record.warnings.append("hugepages could not be reserved: ran with --no-huge")
        else:
            hugedir = grant.mount
    vswitch, guest = build(hugedir)
    for sock in sockets:
        state.record("path", str(sock))
        sock.unlink(missing_ok=True)  # the guest binds it; a stale file would fail (or fool) that
    timings["prepare_s"] = time.monotonic() - t_setup
    # both start at once: the guest waits in its first socket's accept() until the vswitch connects
    procs.extend([vswitch, guest])  # teardown: the guest quits first (its close talks to the vswitch)
    g_pid = start_recorded(state, guest)
    vs_pid = start_recorded(state, vswitch)
    vswitch.wait_ready()
    timings["vswitch_ready_s"] = time.monotonic() - t_setup
    connect_ports(vswitch, guest, sockets)
    guest.wait_ready()
    timings["guest_ready_s"] = time.monotonic() - t_setup
    with Telemetry.connect(vswitch.eal.file_prefix) as vs_tel, Telemetry.connect(guest.eal.file_prefix) as g_tel:
        _wait_links(vs_tel, len(sockets), vswitch)
        timings["links_up_s"] = time.monotonic() - t_setup
        guest.command("start")
        vswitch.command("start")
        timings["setup_s"] = time.monotonic() - t_setup
        phase("warm-up")
        signals.sleep(profile.workload.warmup_s)
        monitor = ThreadMonitor({"vswitch": vs_pid, "guest": g_pid})
        before = _take(vswitch, guest, vs_tel, g_tel)
        monitor.start()
        phase("measure")
        signals.sleep(profile.workload.duration_s)
        after = _take(vswitch, guest, vs_tel, g_tel)
        report = monitor.stop()
        t_stop = time.monotonic()
        vswitch.command("stop")
        guest.command("stop")
        timings["stop_s"] = time.monotonic() - t_stop
    guest_cpu_s = sum(t.cpu_pct for t in report.threads if t.role == "guest" and t.name.startswith(("rte-worker", "lcore-worker"))) \
        / 100.0 * (after.t - before.t)
    metrics, details = compute_metrics(before, after, len(sockets), report.cpu_by_role(), guest_cpu_s)
    record.metrics = metrics
    record.details.update(details)
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    record.details["monitor_cost_pct"] = report.cost_pct
    record.details["rings"] = dict(zip(("rxd", "txd"), effective_rings(profile)))
    pins = {**dpdk_worker_pins("vswitch", vs_pid), **dpdk_worker_pins("guest", g_pid)}
    pollers = vswitch.app.nb_cores + guest.app.nb_cores
    shared = bool(report.shared_busy_cpus) or pollers > len(os.sched_getaffinity(0))
    record.warnings.extend(report.warnings())
    if pollers > len(os.sched_getaffinity(0)):
        record.warnings.append(f"{pollers} polling cores on {len(os.sched_getaffinity(0))} CPUs: oversubscribed")
    record.env = fingerprint("embedded", pins, shared, hugedir is not None)
    forwarded = sum(s.tx_packets for s in details_fwd(details, "guest_fwd"))
    if forwarded == 0:
        reason = _zero_reason(vswitch, guest)
        raise ZeroForwardingError(f"the guest forwarded 0 packets in {metrics.window_s:.1f} s: {reason}")


def details_fwd(details: dict[str, Any], key: str) -> list[FwdStats]:
    return [FwdStats(**s) for s in details[key].values()]


def _zero_reason(vswitch: Testpmd, guest: Testpmd) -> str:
    for proc in (vswitch, guest):
        for line in proc.output().splitlines():
            if MEMORY_ERRORS.search(line):
                return f"vhost-user memory-table error in the {proc.role}: {line.strip()}"
    return "no packets reached the guest (vhost-user rings not serviced; see the logs in " \
           f"{vswitch.log_path.parent})"
