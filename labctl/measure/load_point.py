"""What reconf and soak share: the load they hold and how it was chosen (said to the user), the measurer they
need (labgen on a pvp lab), waiting for their one trial to be armed, and the head of their result.

FD.io CSIT holds its reconfiguration tests' load at the NDR lower bound it found before (CSIT methodology,
"Reconfiguration Tests"). labctl's default is half the NDR lower bound stored for the same configuration:
at the bound itself a trial loses now and then by itself (the bound is where loss begins), and on a host
whose speed wanders by a third (this one) half of it leaves room, so what is lost is lost to the change.
``--at ndr`` holds the bound itself, as CSIT does; ``--rate`` any paced load. Where the store holds no
NDR for the configuration the user is asked for ``--rate`` (exit 2, before anything starts).

The NDR is the newest stored NDR/PDR search (``details.role == "ndr"``, with ``ndr_lower_mpps``) whose
configuration equals this one's except for the trial's own settings (:data:`SETTINGS`: the rate and the
durations, which an NDR search sets itself).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from labctl import signals
from labctl.errors import UserError, WorkloadError
from labctl.profile.knobs import flatten
from labctl.profile.load import LoadedProfile
from labctl.profile.rates import Rate, parse_rate
from labctl.results.record import TrialRecord

if TYPE_CHECKING:
    from labctl.dpdk.labgen import Labgen, TrialSpec
    from labctl.lab.interface import PacedLab
    from labctl.measure.trial import Trial

#: The warm-up reconf and soak give the load at least (the profile's, if longer), on the trial's own schedule.
MIN_WARMUP_S = 1.0
#: Knobs a stored NDR may differ in and still be this configuration's.
SETTINGS = ("workload.rate", "workload.duration_s", "workload.warmup_s", "repeat")
AT = ("ndr",)


@dataclass(frozen=True)
class LoadPoint:
    """The load to hold: ``rate`` (all ports), ``said`` (how it was chosen, in words), ``source`` (the stored
    NDR it came from: run and trial ids, the bound; empty for ``--rate``)."""

    rate: Rate
    said: str
    source: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"rate": str(self.rate), "said": self.said, **({"from": self.source} if self.source else {})}


@dataclass
class HeldResult:
    """A stored reconf or soak trial (``record``), the run of ``db`` it is in and the load it held."""

    run_id: int
    record: TrialRecord
    db: str
    load: LoadPoint

    def head(self) -> dict[str, Any]:
        """What both commands' JSON begins with."""
        return {"run_id": self.run_id, "trial_id": self.record.id, "db": self.db, "status": self.record.status,
                "error": self.record.error, "load": self.load.to_dict()}


def check_measurer(loaded: LoadedProfile, kernel_ok: bool = False) -> None:
    """reconf and soak count loss by labgen's sequence numbers and send stamps: a forward workload, labgen as
    the host side, one guest (pvp); ``kernel_ok``: a kernel guest too (reconf counts its loss with iperf3's
    numbered datagrams, :mod:`labctl.workload.udp`). UserError naming the field otherwise."""
    from labctl.measure.live_changes import NOT_MEASURABLE

    w = loaded.profile.workload
    if w.kind != "forward":
        if kernel_ok:
            return
        raise UserError(f"workload.kind {w.kind}: {NOT_MEASURABLE} (allowed: forward)")
    if w.generator != "labgen":
        raise UserError(f"workload.generator {w.generator}: reconf and soak count loss by labgen's sequence numbers "
                        "and send stamps (allowed: labgen)")
    if loaded.profile.topology != "pvp":
        raise UserError(f"topology {loaded.profile.topology}: labgen is not the host side of two guests "
                        "(allowed: pvp)")


def held_trial(trial: Trial, rate: Rate, duration_s: float, bin_s: float, drain_s: float, command: str
               ) -> tuple[Labgen, TrialSpec]:
    """The trial a reconf or soak holds on ``trial.lab``: labgen (WorkloadError without it), the lab's words
    in the record, and the spec: the load per port for ``duration_s`` after the warm-up (the profile's, at
    least :data:`MIN_WARMUP_S`), in time bins of ``bin_s``."""
    from dataclasses import replace

    lab, record = trial.lab, trial.record
    if lab.generator is None:
        raise WorkloadError(f"{command} needs labgen as the lab's host side (workload.generator labgen)")
    paced = cast("PacedLab", lab).paced
    record.warnings.extend(lab.record_warnings())
    record.details.update(lab.details())
    spec = paced.spec(paced.rate_per_port(rate), duration_s, max(lab.plan.warmup_s, MIN_WARMUP_S))
    return lab.generator, replace(spec, bin_s=bin_s, drain_s=drain_s)


def wait_armed(gen: Labgen, timeout_s: float = 10.0) -> dict[str, Any]:
    """labgen's stats once the trial is armed (its clock and schedule fixed: ``arm_tsc``, ``run_tsc``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = gen.stats()
        if stats.get("arm_tsc"):
            return stats
        if time.monotonic() > deadline:
            raise WorkloadError(f"labgen: trial {stats.get('trial')} not armed within {timeout_s:.0f} s")
        signals.sleep(0.01)


def wait_running(gen: Labgen, timeout_s: float = 30.0) -> dict[str, Any]:
    """labgen's stats once the measured phase began (state ``running`` or later): its start is final then."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = gen.stats()
        if stats.get("state") in ("running", "draining", "done"):
            return stats
        if time.monotonic() > deadline:
            raise WorkloadError(f"labgen: trial {stats.get('trial')} still {stats.get('state')} after {timeout_s:.0f} s")
        signals.sleep(0.002)


def sleep_until(mono_ns: float) -> None:
    """Sleep (a cancel or SIGTERM wakes it) until ``time.monotonic_ns()`` reaches ``mono_ns``."""
    left = (mono_ns - time.monotonic_ns()) / 1e9
    if left > 0:
        signals.sleep(left)


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in SETTINGS}


def stored_ndr(db: str | Path, loaded: LoadedProfile) -> dict[str, Any] | None:
    """The newest stored NDR search of this configuration: ``{"run_id", "trial_id", "ndr_lower_mpps"}``."""
    from labctl.results.store import Store

    if not Path(db).exists():
        return None
    wanted = _comparable(flatten(loaded.profile.model_dump()))
    with Store(db) as store:
        for record in reversed(store.trials(status="ok")):
            lower = record.metrics.ndr_lower_mpps
            if record.details.get("role") == "ndr" and lower and _comparable(record.config) == wanted:
                return {"run_id": record.run_id, "trial_id": record.id, "ndr_lower_mpps": lower}
    return None


def check_load(rate: str | None, at: str | None) -> Rate | None:
    """``--rate`` / ``--at`` checked before anything else (one of them at most)."""
    if rate is not None and at is not None:
        raise UserError(f"--rate {rate} and --at {at}: give one load (allowed: --rate R, --at ndr, or neither: "
                        "half the stored NDR)")
    if at is not None and at not in AT:
        raise UserError(f"--at {at}: not a stored bound (allowed: {', '.join(AT)})")
    if rate is None:
        return None
    try:
        parsed = parse_rate(rate)
    except ValueError as exc:
        raise UserError(f"--rate {exc}") from None
    if parsed.kind == "max":
        raise UserError("--rate max: a live change is timed against a paced load (allowed: a rate such as "
                        "0.5Mpps or 40%)")
    return parsed


def kernel_load(rate: str | None, at: str | None) -> LoadPoint:
    """A kernel guest's load (iperf3's UDP datagrams): a rate in packets per second, given; no NDR is stored for
    a kernel guest and no maximum is measured to take a share of."""
    given = check_load(rate, at)
    if given is None or given.kind != "pps":
        shown = f"--rate {rate}" if rate is not None else (f"--at {at}" if at is not None else "no --rate")
        raise UserError(f"{shown}: a kernel guest's reconf holds iperf3 UDP datagrams at a rate given in packets per "
                        "second (allowed: --rate 20kpps, --rate 0.05Mpps)")
    return LoadPoint(given, f"--rate {given} (iperf3 UDP datagrams of 64 bytes)", {})


def choose_load(loaded: LoadedProfile, db: str | Path, rate: str | None, at: str | None, command: str) -> LoadPoint:
    """The load ``command`` (reconf, soak) holds: ``--rate``, else the stored NDR lower bound (``--at ndr``)
    or half of it; none stored: UserError asking for ``--rate``."""
    given = check_load(rate, at)
    if given is not None:
        return LoadPoint(given, f"--rate {given}", {})
    found = stored_ndr(db, loaded)
    if found is None:
        raise UserError(f"{command}: no NDR stored for this configuration of {loaded.profile.name} in {db} "
                        f"(allowed: --rate R, e.g. --rate 0.2Mpps; or run `labctl ndr {loaded.source} --db {db}` "
                        "first)")
    lower = found["ndr_lower_mpps"]
    share = 1.0 if at == "ndr" else 0.5
    what = "the NDR lower bound" if at == "ndr" else "half the NDR lower bound"
    chosen = Rate("pps", lower * 1e6 * share)
    said = (f"{what} stored for this configuration: {lower * share:.4f} Mpps (NDR lower bound {lower:.4f} Mpps, "
            f"run {found['run_id']} in {db})")
    return LoadPoint(chosen, said, found)
