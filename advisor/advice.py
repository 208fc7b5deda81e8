"""The advisor's results: :class:`Recommendation` (a setting with its gain, interval, evidence and
rationale), :class:`Inconclusive` (a knob the data cannot decide, and what to measure next) and
:class:`Advice`, which holds them with the warnings and gives the JSON shape and the report of
``labctl advise``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MAX_LOSS",
    "Recommendation",
    "Inconclusive",
    "Advice",
    "show_value",
]

#: Default acceptable loss: a median of at most 1 packet in 1000 offered (0.1 %). Zero-loss
#: (RFC 2544) cannot be the bar here: testpmd 22.11 cannot pace the generator, so every trial runs at
#: saturation and loses what the guest cannot forward; what separates configurations is the ring-full
#: drops at a given rate. When no value meets the limit the advisor ranks by rate and says so.
DEFAULT_MAX_LOSS = 0.001


# --------------------------------------------------------------------------------------------------
# results


@dataclass
class Recommendation:
    """One recommended setting. ``metric`` is ``mpps`` (``gain_pct``: relative change of the median
    rate) or ``loss_ratio`` (``gain_pct``: relative change of the median loss ratio, negative = fewer
    losses), against ``baseline``. ``condition`` (knob -> value) is empty for an unconditional
    recommendation; ``settings`` are the knob assignments that apply it."""

    knob: str
    value: Any
    metric: str
    gain_pct: float
    ci_pct: tuple[float, float] | None
    trials: list[int]
    rationale: str
    baseline: Any = None
    condition: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.trials)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "knob": self.knob,
            "value": self.value,
            "metric": self.metric,
            "gain_pct": round(self.gain_pct, 2),
            "ci_pct": None if self.ci_pct is None else [round(self.ci_pct[0], 2), round(self.ci_pct[1], 2)],
            "evidence": {"trials": list(self.trials), "n": self.n},
            "rationale": self.rationale,
        }
        if self.condition:
            data["condition"] = dict(self.condition)
        return data


@dataclass
class Inconclusive:
    """A knob the data cannot decide, with the reason and what to measure next (in ``reason``)."""

    knob: str
    reason: str
    condition: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"knob": self.knob, "reason": self.reason}


@dataclass
class Advice:
    recommendations: list[Recommendation] = field(default_factory=list)
    inconclusive: list[Inconclusive] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    max_loss: float = DEFAULT_MAX_LOSS
    trials_used: int = 0
    # knob -> lowest median loss, where no value met ``max_loss`` (the pooled decision then ranked by rate);
    # whether labgen paced those trials. Kept to word (and withdraw) the warning that says so.
    saturated: dict[str, float] = field(default_factory=dict)
    saturated_paced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"recommendations": [...], "inconclusive": [...], "warnings": [...]}`` (``labctl advise
        --json``). A conditional recommendation also carries ``"condition": {knob: value}``."""
        return {
            "recommendations": [r.to_dict() for r in self.recommendations],
            "inconclusive": [i.to_dict() for i in self.inconclusive],
            "warnings": list(self.warnings),
        }

    def saturation_warning(self) -> str:
        """The warning for the knobs (``self.saturated``) none of whose values met the loss limit: their
        values were ranked by rate alone, and what would compare them within a loss goal."""
        names = ", ".join(f"{knob} (lowest median loss {_pct_loss(low)})" for knob, low in self.saturated.items())
        if self.saturated_paced:
            cause = ("the paced load was above what every value forwards within it, so these values are ranked by "
                     "rate alone; a run judged on loss_ratio (sweep --verdict-metric loss_ratio) compares their loss, "
                     "and a lower workload.rate, or labctl sweep --metric ndr|pdr, gives rates within a loss goal")
        else:
            cause = ("the trials offered more than the guest forwards (unpaced: workload.rate max, or generator "
                     "flowgen), so these values are ranked by rate alone; a paced workload.rate, or labctl sweep "
                     "--metric ndr|pdr, gives rates within a loss goal")
        return f"no value of {names} met the {_pct_loss(self.max_loss)} loss limit: {cause}"

    def format(self) -> str:
        """The human-readable report of ``labctl advise``."""
        lines = []
        for r in self.recommendations:
            ci = "" if r.ci_pct is None else f" [{r.ci_pct[0]:+.1f}, {r.ci_pct[1]:+.1f}]"
            cond = f" (with {', '.join(f'{k}={show_value(v)}' for k, v in r.condition.items())})" if r.condition else ""
            lines.append(f"recommend {r.knob} = {show_value(r.value)}{cond}: {r.gain_pct:+.1f}%{ci} {r.metric} "
                         f"(n={r.n})")
            lines.append(f"  {r.rationale}")
        for i in self.inconclusive:
            lines.append(f"inconclusive {i.knob}: {i.reason}")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        if not lines:
            lines.append("nothing varies across these trials: there is nothing to compare")
        return "\n".join(lines)


def show_value(value: Any) -> str:
    """A knob value for people: pinning dicts as ``path=value`` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _pct_loss(x: float) -> str:
    if x == 0:
        return "0%"
    return f"{100.0 * x:.2g}%"
