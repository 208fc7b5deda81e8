"""The live change in flight, for ``labctl reconf`` whatever counts the loss (labgen's stamped frames,
:mod:`labctl.measure.reconf`, or iperf3's numbered datagrams, :mod:`labctl.measure.reconf_kernel`): when it
started and ended on labctl's clock, what each action did and read back (:class:`ChangeMade`), its name in
report rows (:func:`describe_change`) and what makes its cost a lower bound (:func:`change_warnings`)."""

from __future__ import annotations

import time
from typing import Any

from labctl.measure.live_changes import LiveAction
from labctl.workload import timeline


def describe_change(actions: list[LiveAction]) -> str:
    """The change as report rows and ``labctl apply --dry-run`` name it: its knobs, or the command."""
    knobs = [k for a in actions for k in a.knobs]
    return "; ".join(sorted(knobs)) if knobs else "; ".join(a.label for a in actions)


class ChangeMade:
    """The change in flight: its start c0 and end c1 on labctl's clock, what each action did, read back."""

    def __init__(self, actions: list[LiveAction]):
        self.actions = actions
        self.c0 = self.c1 = 0
        self.applied: dict[str, list[str]] = {}
        self.read_back: dict[str, Any] = {}

    def make(self, lab: Any) -> None:
        self.c0 = time.monotonic_ns()
        for action in self.actions:
            self.applied[action.label] = action.apply(lab)
        self.c1 = time.monotonic_ns()

    def read(self, lab: Any) -> None:
        for action in self.actions:
            self.read_back[action.label] = action.read_back(lab)

    def cleanup(self, lab: Any) -> None:
        for action in self.actions:
            action.cleanup(lab)


def change_warnings(change: ChangeMade, window_s: float, after: list[timeline.Outage]) -> list[str]:
    """What makes a cost a lower bound or a change doubtful, whatever counted the loss."""
    out = []
    took_s = (change.c1 - change.c0) / 1e9
    if took_s > window_s / 2:
        out.append(f"the change took {took_s:.2f} s, more than half the {window_s:g} s window: the cost is a lower "
                   "bound (use a longer --window)")
    if any(o.tail for o in after):
        out.append("an outage lasted to the end of the window: the cost is a lower bound (use a longer --window)")
    for label, back in change.read_back.items():
        if isinstance(back, dict) and back.get("exit_code") not in (None, 0) and label.startswith("--exec"):
            out.append(f"{label}: exit code {back['exit_code']}")
    return out
