"""One trial: a lab up, warm-up, a measurement window, metrics, teardown.

    lock the lab (remove what a killed labctl left) -> plan -> lab up and forwarding -> warm-up
    -> snapshot -> measurement window (thread monitor) -> snapshot -> stop -> metrics -> teardown

Teardown runs on success, failure, SIGINT, SIGTERM and a face's cancel (see :mod:`labctl.signals`);
every resource was recorded in the lab's ledger before it was created. A trial that fails is a record
with status ``failed`` and the reason, never a lost sweep.
"""

from __future__ import annotations

import os
import time

from labctl import signals
from labctl.errors import UserError, WorkloadError, ZeroForwardingError
from labctl.events import OnEvent, notify
from labctl.host.fingerprint import fingerprint
from labctl.host.monitor import ThreadMonitor
from labctl.host.threads import dpdk_worker_pins
from labctl.lab.embedded.lab import EmbeddedLab
from labctl.lab.ledger import locked, teardown
from labctl.lab.plan import derive
from labctl.profile.knobs import flatten
from labctl.profile.load import LoadedProfile
from labctl.results.record import TrialRecord
from labctl.workload.forward import compute_metrics, details_fwd, zero_reason

FORWARDING_THREADS = ("rte-worker", "lcore-worker")


def run_trial(loaded: LoadedProfile, repeat_index: int = 0, on_event: OnEvent | None = None) -> TrialRecord:
    """Run one trial of an embedded profile; returns its record (status ok or failed)."""
    profile = loaded.profile
    if profile.backend != "embedded":
        raise UserError(f"{loaded.source}: backend: {profile.backend} trials need a guest (allowed here: embedded)")

    def phase(name: str) -> None:
        notify(on_event, "phase", lab=profile.name, message=name)

    record = TrialRecord(config=flatten(profile.model_dump()), repeat_index=repeat_index, started_at=time.time(),
                         warnings=[w.render() for w in loaded.warnings])
    timings: dict[str, float] = {}
    with signals.stoppable(), locked(profile.name) as state:
        if state.resources:
            leftovers = teardown(state)
            record.warnings.append("removed resources left by an earlier labctl" +
                                   (f" (could not remove: {leftovers})" if leftovers else ""))
        lab = EmbeddedLab(derive(profile), state, record.warnings)
        try:
            phase("setup")
            lab.start()
            _measure(lab, record, phase)
        except (ZeroForwardingError, WorkloadError) as exc:
            record.status, record.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a trial that breaks is a failed trial, not a lost sweep
            record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            t0 = time.monotonic()
            phase("teardown")
            lab.close()
            failures = teardown(state)
            timings.update(lab.timings)
            timings["teardown_s"] = time.monotonic() - t0
            if failures:
                record.warnings.append(f"teardown could not remove: {'; '.join(failures)}")
    record.finished_at = time.time()
    record.details["timings"] = timings
    return record


def _measure(lab: EmbeddedLab, record: TrialRecord, phase) -> None:
    plan = lab.plan
    phase("warm-up")
    signals.sleep(plan.warmup_s)
    monitor = ThreadMonitor(dict(lab.pids))
    before = lab.snapshot()
    monitor.start()
    phase("measure")
    signals.sleep(plan.duration_s)
    after = lab.snapshot()
    report = monitor.stop()
    lab.stop_forwarding()
    guest_cpu_s = sum(t.cpu_pct for t in report.threads
                      if t.role == "guest" and t.name.startswith(FORWARDING_THREADS)) / 100.0 * (after.t - before.t)
    metrics, details = compute_metrics(before, after, len(plan.nics), report.cpu_by_role(), guest_cpu_s)
    record.metrics = metrics
    record.details.update(details)
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    record.details["monitor_cost_pct"] = report.cost_pct
    record.details["rings"] = {"rxd": plan.forwarder.rxd, "txd": plan.forwarder.txd}
    pins = {**dpdk_worker_pins("vswitch", lab.pids["vswitch"]), **dpdk_worker_pins("guest", lab.pids["guest"])}
    cpus = len(os.sched_getaffinity(0))
    shared = bool(report.shared_busy_cpus) or lab.pollers > cpus
    record.warnings.extend(report.warnings())
    if lab.pollers > cpus:
        record.warnings.append(f"{lab.pollers} polling cores on {cpus} CPUs: oversubscribed")
    record.env = fingerprint("embedded", pins, shared, lab.hugepages)
    forwarded = sum(s.tx_packets for s in details_fwd(details, "guest_fwd"))
    if forwarded == 0:
        assert lab.vswitch and lab.guest
        reason = zero_reason(lab.vswitch, lab.guest)
        raise ZeroForwardingError(f"the guest forwarded 0 packets in {metrics.window_s:.1f} s: {reason}")
