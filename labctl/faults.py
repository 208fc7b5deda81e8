"""A test hook for the fault matrix: a signal sent to labctl itself at a named point. Off by default.

``LABCTL_FAULT=POINT:ACTION[:NTH[:DELAY[:TARGET]]]`` (read once, when this module is imported, and
then taken out of the environment, so the processes labctl starts do not inherit it: a fleet
controller's fault stays the controller's, and a host's labctl gets its own through the inventory's
``labctl_env``; when it is unset, :func:`point` returns at once and costs one comparison):

- ``POINT``: ``phase.<name>`` when a phase event is sent (``phase.setup``, ``phase.warm-up``,
  ``phase.measure``, ``phase.teardown``, or a lifecycle step's text), ``store.commit`` inside the
  trial's store transaction, after its rows are written and before ``COMMIT``, ``teardown`` before
  each resource the ledger removes;
- ``ACTION``: ``INT``, ``TERM`` or ``KILL`` (the signal, sent to this process), or ``SLEEP`` (wait
  ``DELAY`` seconds through :func:`labctl.signals.sleep`, for an outside signal to land there);
- ``NTH``: act at that occurrence of the point (default 1);
- ``DELAY``: seconds after the point is reached (the signal is sent from a timer thread, so it lands
  while the phase runs; default 0: at once, at the point itself);
- ``TARGET``: whom the signal is sent to: this process (default), or ``fleet``: the ``labctl fleet``
  controller this labctl runs under (its nearest ancestor whose command line runs ``labctl ... fleet``;
  a host of a local-connection inventory), so a test can stop the controller at a phase of the host's
  labctl. No such ancestor: nothing is sent, and standard error says so.

At the point, labctl writes ``labctl-fault: POINT ACTION`` to standard error, so a test knows it hit,
and appends the same line to the file ``LABCTL_FAULT_LOG`` names, when set (that variable stays in
the environment: a local host's labctl, whose standard error its playbook task keeps, writes there too).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

_SPEC = os.environ.pop("LABCTL_FAULT", None) or None
_seen: dict[str, int] = {}
ACTIONS = ("INT", "TERM", "KILL", "SLEEP")


TARGETS = ("self", "fleet")


def parse(spec: str) -> tuple[str, str, int, float, str]:
    parts = spec.split(":")
    target = parts[4] if len(parts) > 4 and parts[4] else "self"
    if len(parts) < 2 or parts[1] not in ACTIONS or target not in TARGETS:
        raise ValueError(f"LABCTL_FAULT={spec}: expected POINT:ACTION[:NTH[:DELAY[:TARGET]]] "
                         f"(actions: {', '.join(ACTIONS)}; targets: {', '.join(TARGETS)})")
    nth = int(parts[2]) if len(parts) > 2 and parts[2] else 1
    delay = float(parts[3]) if len(parts) > 3 and parts[3] else 0.0
    return parts[0], parts[1], nth, delay, target


def fleet_controller() -> int | None:
    """The pid of the ``labctl fleet`` process this one runs under (see ``TARGET``), or None."""
    import psutil

    try:
        for proc in psutil.Process().parents():
            argv = proc.cmdline()
            if "fleet" in argv and any("labctl" in part for part in argv[: argv.index("fleet")]):
                return proc.pid
    except psutil.Error:
        return None
    return None


def point(name: str) -> None:
    """A named point labctl passes; acts when ``LABCTL_FAULT`` names it (see the module docstring)."""
    if _SPEC is None:
        return
    where, action, nth, delay, target = parse(_SPEC)
    if name != where:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] != nth:
        return
    pid = os.getpid() if target == "self" else fleet_controller()
    line = f"labctl-fault: {name} {action}" + ("" if target == "self" else f" to {target} {pid}") + "\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    if os.environ.get("LABCTL_FAULT_LOG"):
        with open(os.environ["LABCTL_FAULT_LOG"], "a", encoding="utf-8") as log:
            log.write(line)
    if pid is None:
        return
    if action == "SLEEP":
        from labctl import signals

        signals.sleep(delay)
        return
    signum = getattr(signal, f"SIG{action}")
    if delay > 0:
        timer = threading.Timer(delay, os.kill, (pid, signum))
        timer.daemon = True
        timer.start()
    else:
        os.kill(pid, signum)
