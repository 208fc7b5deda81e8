"""One event type for everything labctl reports while it works, and the one callback protocol.

Every long operation of :mod:`labctl.api` takes ``on_event: OnEvent | None`` and calls it with
:class:`Event` values; a face (the CLI's progress lines, the TUI's widgets, the fleet's logs) renders
them. Kinds:

=============  ====================================================================================
``phase``      a lab or trial moved to a phase (``message``: setup, warm-up, measure, teardown, or a
               lifecycle step such as "defining and starting labctl-x")
``run``        a run of the store started or resumed (``run_id``, ``total`` trials, ``done`` already)
``trial``      a trial finished and was stored (``record``, ``done``/``total``, ``data``: its plan entry; a
               search's measurement: ``data={"measurement": role}``, ``done`` unchanged)
``step``       an adaptive search step finished (``data``: :class:`advisor.search.Step`)
``steadiness`` the host's steadiness probe finished (``data``: the Steadiness, ``message`` its verdict)
``note``       a line for the user (``message``), e.g. "probing the host for 5 s"
``live``       a reconf or soak while it runs (``data``: ``{"kind": "reconf" | "soak", ...}``: a reconf's steps,
               a soak's newest seconds; ``message`` says it in words)
=============  ====================================================================================

Callbacks run on the thread doing the work; a face that draws on another thread hands events over
itself (Textual's ``call_from_thread``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from labctl import faults

if TYPE_CHECKING:
    from labctl.results.record import TrialRecord

EventKind = Literal["phase", "run", "trial", "step", "steadiness", "note", "live"]


@dataclass(frozen=True)
class Event:
    kind: EventKind
    lab: str | None = None
    message: str = ""
    run_id: int | None = None
    done: int | None = None
    total: int | None = None
    record: "TrialRecord | None" = None
    data: Any = None
    elapsed_s: float | None = None


OnEvent = Callable[[Event], None]


def notify(on_event: OnEvent | None, kind: EventKind, **fields: Any) -> None:
    """Call ``on_event`` (when there is one) with an Event of ``kind``."""
    if kind == "phase":
        faults.point(f"phase.{fields.get('message', '')}")
    if on_event is not None:
        on_event(Event(kind, **fields))
