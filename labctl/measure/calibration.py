"""The highest load labgen keeps its schedule for on a lab: an NDR/PDR search's maximum load.

Pacing costs labgen speed (on a 2-vCPU host it keeps a schedule at about half its full speed), and a
load above what it can pace is an invalid trial, repeated, at every step of a search that asks for it;
so a search's maximum load is calibrated first (:func:`max_load_pps`), with short paced trials from
98% of labgen's full speed down.

What labgen can pace depends on labgen and its host side, not on the guest: its frame size, burst,
flows, queues, worker cores and pacing, the vswitch it sends through, the number of ports, the trial
duration (:func:`calibration_key`). A run's lab session keeps one calibration per key
(:attr:`labctl.measure.labs.LabSession.calibrations`), so a sweep's searches calibrate once per host
side, not once per configuration. A search whose bound is at a calibrated maximum it reused (the lab
forwards at least what labgen was found to pace) calibrates again: the search may have been capped by
a calibration of an earlier moment (:func:`labctl.measure.ndr.find_ndr` then searches that goal again
up to the new maximum when it is higher).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from labctl.errors import WorkloadError

if TYPE_CHECKING:
    from labctl.lab.interface import PacedLab
    from labctl.lab.plan import LabPlan

CALIBRATION_STEPS = 9  # 98% of full speed, then x0.9 each: down to 42%

#: a calibrated maximum load per port and the warnings it carries, by :func:`calibration_key`
Calibrations = dict[tuple[Any, ...], tuple[float, list[str]]]


class Calibrating(Protocol):
    """What :func:`max_load_pps` needs of a measurer (:class:`labctl.measure.ndr.LabMeasurer`)."""

    lab: PacedLab
    ports: int
    calibration_trials: int
    calibration_seconds: float

    def attempt(self, duration_s: float, load_pps: float, role: str, attempt: int = 0) -> tuple[Any, Any]:
        """One paced trial at ``load_pps`` per port, recorded with ``role``."""


def calibration_key(plan: LabPlan, duration_s: float) -> tuple[Any, ...]:
    """What changes what labgen can pace on a lab of ``plan`` in trials of ``duration_s``: its host side
    (labgen's frame size, burst, flows, queues, workers and pacing; the vswitch between it and the guest;
    the ports) and the duration. The guest is not in it."""
    gen = plan.generator
    return (plan.lab, plan.topology, repr(plan.vswitch), gen.kind, gen.frame_size, gen.burst, gen.flows,
            gen.queues, gen.workers, gen.shift_s, len(plan.nics), duration_s)


def full_speed_pps(lab: PacedLab) -> float:
    """What labgen sends per port on this lab at full speed (an unpaced 1 s trial, not stored)."""
    spec = lab.paced.spec(0, 1.0, 0.2)
    result = lab.generator.run_trial(spec)
    per_port = result.achieved_rate_pps
    if per_port <= 0:
        raise WorkloadError("labgen sent nothing at full speed: no load to search")
    return per_port


def max_load_pps(measurer: Calibrating, duration_s: float) -> tuple[float, list[str]]:
    """The load a search may ask at most, per port: the highest of 98%, 90%, 81%, ... (down to 43%) of
    labgen's full speed at which one paced trial of ``duration_s`` kept its schedule. The calibration
    trials are stored (role ``calibration``) and counted apart from the search's
    (``calibration_trials``, ``calibration_seconds``). With no fraction valid, the lowest is the maximum
    and a warning says the generator limits the search."""
    full = full_speed_pps(measurer.lab)
    load = 0.98 * full
    for _step in range(CALIBRATION_STEPS):
        result, _record = measurer.attempt(duration_s, load, role="calibration")
        measurer.calibration_trials += 1
        measurer.calibration_seconds += duration_s
        if result.valid:
            return load, []
        load *= 0.9
    load /= 0.9
    return load, [f"labgen kept no schedule up to {load * measurer.ports / 1e6:.3f} Mpps ({load / full:.0%} of its "
                  "full speed): the search's loads are capped there and may be limited by the generator"]
