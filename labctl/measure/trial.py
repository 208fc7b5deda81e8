"""One trial: a lab up, warm-up, a measurement window, metrics, and the lab released.

    session (lock the lab, remove what a killed labctl left) -> plan -> lab up and forwarding
    -> warm-up -> snapshot -> measurement window (thread monitor) -> snapshot -> stop -> metrics
    -> release (an embedded lab is torn down; a libvirt guest stays up for the run's next trial)

:func:`trial_loop` is the one loop every kind of trial runs in: a plain trial (:func:`run_trial`), a tcp
trial (the same, :mod:`labctl.workload.tcp` measuring), and an NDR/PDR search
(:func:`labctl.measure.ndr.ndr_trial`); a trial kind is the measurement it hands the loop. The lab is an
embedded one (``labctl.lab.embedded``) or a libvirt guest (``labctl.lab.libvirt``), read through
:class:`labctl.lab.interface.MeasuredLab`. Teardown runs on success, failure, SIGINT, SIGTERM and a
face's cancel (see :mod:`labctl.signals`); every resource was recorded in the lab's ledger before it was
created. A trial that fails is a record with status ``failed`` and the reason, never a lost sweep.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

from labctl import signals
from labctl.errors import CpusBusyError, HypervisorError, WorkloadError, ZeroForwardingError
from labctl.events import OnEvent, notify
from labctl.host.monitor import ThreadMonitor, measured_window
from labctl.lab.busy import BusyWatch
from labctl.lab.plan import derive
from labctl.measure.labs import LabSession, check_measurable
from labctl.profile.knobs import flatten
from labctl.profile.load import LoadedProfile
from labctl.results.record import TrialRecord
from labctl.workload.forward import details_fwd, forward_metrics
from labctl.workload.paced import paced_metrics

if TYPE_CHECKING:
    from labctl.lab.interface import KernelLab, MeasuredLab, PacedLab, PairLab, SnapshotLab


@dataclass
class Trial:
    """A trial in flight, as :func:`trial_loop` hands it to the measurement it runs: the record (config,
    repeat index, profile warnings, the session's leftovers, the CPU wait), the lab up for its plan, the
    busy watch over the trial's CPUs, and ``phase`` (a ``phase`` event: fault points and the faces'
    phase lines)."""

    record: TrialRecord
    lab: MeasuredLab
    busy: BusyWatch
    phase: Callable[[str], None]

    def note_busy(self) -> None:
        """Strangers the busy watch found on the trial's CPUs, into the record (details and warnings)."""
        if self.busy.found:
            self.record.details["busy_strangers"] = self.busy.found
            self.record.warnings.extend(self.busy.warnings())


#: what runs inside the loop: it measures on ``trial.lab`` and fills ``trial.record`` (raising a
#: LabError, or any exception, makes the trial a failed one)
Measurement = Callable[[Trial], None]


def trial_loop(loaded: LoadedProfile, session: LabSession, measurement: Measurement, repeat_index: int = 0,
               on_event: OnEvent | None = None) -> TrialRecord:
    """The one trial loop every kind of trial runs in (a plain trial, a tcp trial, an NDR/PDR search):

    the record (config, ``repeat_index``, the profile's warnings, what an earlier labctl left) -> the
    ``setup`` phase -> the lab up for the profile's plan, its CPUs locked (:meth:`LabSession.acquire`;
    ``details.cpu_wait_s`` when another trial held them for 0.1 s or more) -> ``measurement`` -> the
    ``teardown`` phase -> the lab released (:meth:`LabSession.release`; what teardown could not remove
    is a warning) -> ``details.timings`` (the lab's set-up timings, ``teardown_s``, ``trial_s``) and
    ``finished_at``.

    Errors: :class:`CpusBusyError` (``--no-wait``) is raised, a trial that did not start; a
    ZeroForwarding, Workload or Hypervisor error is a ``failed`` record with its message, any other
    exception a ``failed`` record with ``Type: message``; both after :func:`signals.checkpoint`, so a
    trial broken by a cancel or SIGTERM (its processes stopped under it) raises ``Cancelled`` /
    ``Terminated`` instead: aborted, not failed. An interruption (SIGINT, SIGTERM, a face's cancel)
    propagates after the release, which then powers a guest off as for a failed trial."""
    profile = loaded.profile

    def phase(name: str) -> None:
        notify(on_event, "phase", lab=profile.name, message=name)

    record = TrialRecord(config=flatten(profile.model_dump()), repeat_index=repeat_index, started_at=time.time(),
                         warnings=[w.render() for w in loaded.warnings])
    if session.leftovers:
        record.warnings.append(session.leftovers)
        session.leftovers = None
    lab = None
    ended = False  # the measurement returned or failed (not interrupted)
    t0 = time.monotonic()
    with signals.stoppable():
        try:
            phase("setup")
            lab = session.acquire(derive(profile), record.warnings)
            if session.cpus.waited_s >= 0.1:
                record.details["cpu_wait_s"] = round(session.cpus.waited_s, 2)
            measurement(Trial(record, lab, BusyWatch(session.cpus.cpus, lab.pids.values()), phase))
            ended = True
        except CpusBusyError:
            raise  # --no-wait: not a trial that failed, a trial that did not start
        except (ZeroForwardingError, WorkloadError, HypervisorError) as exc:
            signals.checkpoint()  # broken by a cancel (its processes stopped under it): aborted, not failed
            record.status, record.error, ended = "failed", str(exc), True
        except Exception as exc:  # noqa: BLE001 - a trial that breaks is a failed trial, not a lost sweep
            signals.checkpoint()
            record.status, record.error, ended = "failed", f"{type(exc).__name__}: {exc}", True
        finally:
            timings = dict(lab.timings) if lab is not None else {}
            t_down = time.monotonic()
            phase("teardown")
            failures = session.release(lab, failed=record.status != "ok" or not ended)
            timings["teardown_s"] = time.monotonic() - t_down
            timings["trial_s"] = time.monotonic() - t0
            if failures:
                record.warnings.append(f"teardown could not remove: {'; '.join(failures)}")
            record.details["timings"] = timings
    record.finished_at = time.time()
    return record


def run_trial(loaded: LoadedProfile, repeat_index: int = 0, on_event: OnEvent | None = None,
              session: LabSession | None = None, wait: bool = True) -> TrialRecord:
    """Run one trial of a profile; returns its record (status ok or failed). ``session``: the run's labs
    (a sweep keeps a guest up between its trials); without one, the trial brings its lab up and down
    (``wait``: see :class:`LabSession`)."""
    profile = loaded.profile
    if session is None:
        check_measurable(profile)
        with signals.stoppable(), LabSession(profile.name, profile.libvirt_uri, on_event, wait) as own:
            return run_trial(loaded, repeat_index, on_event, own)
    return trial_loop(loaded, session, _measure, repeat_index, on_event)


def _measure(trial: Trial) -> None:
    """A trial at the profile's rate: the warm-up and the window; the busy watch names strangers on the
    trial's CPUs over each of them (sampled when the warm-up starts, when the window starts and when it
    ends). A tcp kind (tcp_stream / tcp_rr on a kernel guest) is :func:`labctl.workload.tcp.measure`."""
    lab, record, phase, busy = trial.lab, trial.record, trial.phase, trial.busy
    plan = lab.plan
    if plan.tcp is not None:  # tcp_stream / tcp_rr on a kernel guest
        from labctl.workload.tcp import measure as measure_tcp

        measure_tcp(cast("KernelLab", lab), record, phase)
        return
    record.warnings.extend(lab.record_warnings())
    record.details.update(lab.details())
    busy.start()
    window: list[float] = []

    def watched(name: str) -> None:
        if name == "measure":
            busy.check("warm-up")
            window.append(time.time())
        phase(name)

    if lab.generator is not None:
        paced = cast("PacedLab", lab).paced
        rate = paced.rate_per_port(plan.generator.rate)
        result, before, after, report = paced.trial(paced.spec(rate, plan.duration_s, plan.warmup_s),
                                                    ThreadMonitor(dict(lab.pids)), watched)
        window.append(time.time())
        lab.stop_forwarding()
        metrics, details = paced_metrics(result, before, after, plan.generator.frame_size, report.cpu_by_role(),
                                         lab.forwarding_cpu_s(report, after.t - before.t), lab.host_kind)
        if not result.valid:
            record.warnings.append(f"invalid trial: the generator fell behind its schedule ({result.reason}): "
                                   "not a loss of the lab; left out of comparisons")
    elif plan.topology == "vm2vm":
        pair = cast("PairLab", lab)
        before, after, report = measured_window(dict(lab.pids), plan.warmup_s, plan.duration_s, pair.snapshot,
                                                watched, started=lab.window_started)
        window.append(time.time())
        lab.stop_forwarding()
        metrics, details = pair.metrics(before, after)
        metrics.cpu = report.cpu_by_role()
    else:
        before, after, report = measured_window(dict(lab.pids), plan.warmup_s, plan.duration_s,
                                                cast("SnapshotLab", lab).snapshot,
                                                watched, started=lab.window_started)
        window.append(time.time())
        lab.stop_forwarding()
        metrics, details = forward_metrics(before, after, len(plan.nics), report.cpu_by_role(),
                                           lab.forwarding_cpu_s(report, after.t - before.t), lab.host_kind)
    host_details, host_metrics = lab.window_details()
    details.update(host_details)
    for name, value in host_metrics.items():
        setattr(metrics, name, value)
    busy.check("window")
    record.details["window_at"] = [round(t, 3) for t in window]  # wall clock: when it measured
    trial.note_busy()
    _fill(lab, record, metrics, details, report)


def _fill(lab: MeasuredLab, record: TrialRecord, metrics: Any, details: dict[str, Any], report: Any) -> None:
    plan = lab.plan
    record.metrics = metrics
    record.details.update(details)
    record.details["threads"] = [t.__dict__ for t in report.threads if t.cpu_pct >= 1.0]
    record.details["monitor_cost_pct"] = report.cost_pct
    record.details["rings"] = {"rxd": plan.forwarder.rxd, "txd": plan.forwarder.txd}
    cpus = len(os.sched_getaffinity(0))
    shared = bool(report.shared_busy_cpus) or lab.pollers > cpus
    record.warnings.extend(report.warnings())
    if lab.pollers > cpus:
        record.warnings.append(f"{lab.pollers} polling cores on {cpus} CPUs: oversubscribed")
    record.env = lab.environment(lab.pins(), shared)
    if plan.topology == "vm2vm":
        forwarded = metrics.rx_packets or 0  # what guest B received
    else:
        forwarded = sum(s.tx_packets for s in details_fwd(details, "guest_fwd"))
    if forwarded == 0:
        raise ZeroForwardingError(f"the guest forwarded 0 packets in {metrics.window_s:.1f} s: {lab.zero_reason()}")
