"""A test hook for the fault matrix: a signal sent to labctl itself at a named point. Off by default.

``LABCTL_FAULT=POINT:ACTION[:NTH[:DELAY]]`` (read once, when labctl starts; when it is unset,
:func:`point` returns at once and costs one comparison):

- ``POINT``: ``phase.<name>`` when a phase event is sent (``phase.setup``, ``phase.warm-up``,
  ``phase.measure``, ``phase.teardown``, or a lifecycle step's text), ``store.commit`` inside the
  trial's store transaction, after its rows are written and before ``COMMIT``, ``teardown`` before
  each resource the ledger removes;
- ``ACTION``: ``INT``, ``TERM`` or ``KILL`` (the signal, sent to this process), or ``SLEEP`` (wait
  ``DELAY`` seconds through :func:`labctl.signals.sleep`, for an outside signal to land there);
- ``NTH``: act at that occurrence of the point (default 1);
- ``DELAY``: seconds after the point is reached (the signal is sent from a timer thread, so it lands
  while the phase runs; default 0: at once, at the point itself).

At the point, labctl writes ``labctl-fault: POINT ACTION`` to standard error, so a test knows it hit.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_SPEC = os.environ.get("LABCTL_FAULT") or None
_seen: dict[str, int] = {}
ACTIONS = ("INT", "TERM", "KILL", "SLEEP")


def parse(spec: str) -> tuple[str, str, int, float]:
    parts = spec.split(":")
    if len(parts) < 2 or parts[1] not in ACTIONS:
        raise ValueError(f"LABCTL_FAULT={spec}: expected POINT:ACTION[:NTH[:DELAY]] (actions: {', '.join(ACTIONS)})")
    nth = int(parts[2]) if len(parts) > 2 and parts[2] else 1
    delay = float(parts[3]) if len(parts) > 3 and parts[3] else 0.0
    return parts[0], parts[1], nth, delay


def point(name: str) -> None:
    """A named point labctl passes; acts when ``LABCTL_FAULT`` names it (see the module docstring)."""
    if _SPEC is None:
        return
    where, action, nth, delay = parse(_SPEC)
    if name != where:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] != nth:
        return
    sys.stderr.write(f"labctl-fault: {name} {action}\n")
    sys.stderr.flush()
    if action == "SLEEP":
        from labctl import signals

        signals.sleep(delay)
        return
    signum = getattr(signal, f"SIG{action}")
    if delay > 0:
        timer = threading.Timer(delay, os.kill, (os.getpid(), signum))
        timer.daemon = True
        timer.start()
    else:
        os.kill(os.getpid(), signum)
