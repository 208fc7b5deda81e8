"""ansible-runner's events, read for the fleet: per-host progress, one-line failure reasons, per-host stats.

Facts this module relies on, from the ansible-runner 2.4 documentation ("Runner Artifact Job Events (Host
and Playbook Events)" in the introduction, and "Using Runner as a Python Module Interface to Ansible":
https://ansible.readthedocs.io/projects/runner/en/stable/intro/ and .../python_interface/) and its
``Runner.stats`` property (``ansible_runner/runner.py``):

* ``ansible_runner.run(event_handler=f)`` calls ``f(event)`` for every event; a true return value keeps the
  event in ``<private_data_dir>/artifacts/<ident>/job_events/``. An event is a dict with ``event`` (the
  Ansible callback's name without ``v2_``), ``uuid``, ``counter``, ``stdout`` and ``event_data``.
* Host events name the host in ``event_data["host"]`` (the inventory hostname) and the task in
  ``event_data["task"]``; all but ``runner_on_start`` carry the module's result in ``event_data["res"]``:

  ==========================  =============================================================================
  ``runner_on_start``         a task starts on a host
  ``runner_on_ok``            ``res["changed"]`` says whether it changed anything
  ``runner_on_failed``        ``res["msg"]``; command-like modules add ``rc``, ``stdout``, ``stderr``;
                              ``event_data["ignore_errors"]`` is true when the task ignores its failure
  ``runner_on_skipped``       a ``when:`` was false
  ``runner_on_unreachable``   ``res["msg"]`` (ansible-core 2.19 starts it with ``"Task failed: "``)
  ==========================  =============================================================================

  A failed loop task's ``res["results"]`` holds one result per item, each with its own ``failed``/``msg``.
* ``playbook_on_stats`` ends a playbook; its ``event_data`` maps ``ok``, ``changed``, ``dark``
  (unreachable), ``failures``, ``skipped``, ``rescued``, ``ignored`` and ``processed`` each to
  ``{hostname: count}``; ``Runner.stats`` returns the same dicts (``None`` when there was no such event).
  A host with no count under a key has 0 there.

These shapes were checked against real runs of the fleet playbooks (ansible-core 2.19, ansible-runner
2.4.3); ``tests/unit/fleet`` replays events recorded from such runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# event name -> progress state (runner_on_ok becomes "changed" when its result changed something)
STATES: dict[str, str] = {
    "runner_on_start": "started",
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}

# facts a host sets that its result carries (playbooks/roles/labctl/tasks/lab-host.yml sets both)
RESULT_FACTS = ("labctl_kernel_plan", "labctl_hugepage_pool")

_BOX = re.compile(r"[\u2500-\u257f]+")  # box drawing (typer/rich error panels)
_ANSIBLE_PREFIX = "Task failed: "


@dataclass(frozen=True)
class HostEvent:
    """One step of one host: a task started, ended ok / changed / failed / skipped, or the host was unreachable."""

    host: str
    task: str
    state: str  # started | ok | changed | failed | ignored | skipped | unreachable
    message: str | None = None  # what went wrong, in one line, for failed / ignored / unreachable

    def line(self) -> str:
        return f"{self.host}: {self.task}: {self.state}" + (f": {self.message}" if self.message else "")


@dataclass(frozen=True)
class HostStats:
    """One host's counts from the playbook's final stats (``playbook_on_stats``)."""

    ok: int = 0
    changed: int = 0
    unreachable: int = 0
    failures: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0

    @classmethod
    def of(cls, stats: Mapping[str, Mapping[str, int]] | None, host: str) -> "HostStats":
        stats = stats or {}
        count = lambda key: int((stats.get(key) or {}).get(host, 0))  # noqa: E731
        return cls(ok=count("ok"), changed=count("changed"), unreachable=count("dark"), failures=count("failures"),
                   skipped=count("skipped"), rescued=count("rescued"), ignored=count("ignored"))

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def host_status(stats: HostStats, processed: bool) -> str:
    """ok / failed / unreachable from a host's stats; a host the playbook never processed failed."""
    if stats.unreachable:
        return "unreachable"
    if stats.failures or not processed:
        return "failed"
    return "ok"


def _lines(text: Any) -> list[str]:
    """The lines of a command's output that say something (box drawing and blank lines dropped)."""
    if not isinstance(text, str):
        return []
    lines = (_BOX.sub(" ", line).strip(" \t\u2502|") for line in text.splitlines())
    return [" ".join(line.split()) for line in lines if re.search(r"\w", line)]


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _detail(res: Mapping[str, Any]) -> str:
    """What a failed result says, in one line: a command's own last word (for exit 1 with a summary on
    stdout, that summary; otherwise the last line of stderr), else the module's ``msg``."""
    items = [item for item in res.get("results") or [] if isinstance(item, Mapping) and item.get("failed")]
    if items:
        res = items[0]
    msg = _one_line(res.get("msg") or "").removeprefix(_ANSIBLE_PREFIX)
    out, err = _lines(res.get("stdout")), _lines(res.get("stderr"))
    rc = res.get("rc")
    line = (out[-1] if out and rc == 1 else None) or (err[-1] if err else None) or (out[-1] if out else None)
    if line is None:
        return msg or "failed"
    return f"{line} (exit {rc})" if rc is not None else line


def _message(event: Mapping[str, Any]) -> str | None:
    """What went wrong, in one line, for a failed or unreachable host event; ``None`` otherwise."""
    kind = event.get("event")
    res = (event.get("event_data") or {}).get("res") or {}
    if kind == "runner_on_unreachable":
        return _one_line(res.get("msg") or "no message").removeprefix(_ANSIBLE_PREFIX)
    if kind == "runner_on_failed":
        return _detail(res)
    return None


def failure_reason(event: Mapping[str, Any]) -> str | None:
    """One line for a failed or unreachable host event (``None`` for every other event): the task and
    what went wrong, e.g. ``labctl sweep: p.yaml: line 8: ...: 300 is not allowed (...) (exit 2)`` or
    ``unreachable at TASK: Failed to connect to the host via ssh: ...``."""
    message = _message(event)
    if message is None:
        return None
    task = (event.get("event_data") or {}).get("task") or "?"
    if event.get("event") == "runner_on_unreachable":
        return f"unreachable at {task}: {message}"
    return f"{task}: {message}"


def host_event(event: Mapping[str, Any]) -> HostEvent | None:
    """The progress step an ansible-runner event stands for, or ``None`` for playbook-level events."""
    state = STATES.get(event.get("event", ""))
    data = event.get("event_data") or {}
    host = data.get("host")
    if state is None or not host:
        return None
    res = data.get("res") or {}
    if state == "ok" and res.get("changed"):
        state = "changed"
    if state == "failed" and data.get("ignore_errors"):
        state = "ignored"
    return HostEvent(host=host, task=data.get("task") or "?", state=state, message=_message(event))


@dataclass
class EventLog:
    """An ``event_handler`` for ``ansible_runner.run``: keeps what the per-host results need (the first
    failure's reason per host, the ``RESULT_FACTS`` hosts set, the final stats) and reports every host
    step to ``on_event``. Every event is kept in the artefacts (the handler returns True)."""

    on_event: Callable[[HostEvent], None] | None = None
    reasons: dict[str, str] = field(default_factory=dict)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, dict[str, int]] | None = None

    def __call__(self, event: Mapping[str, Any]) -> bool:
        if event.get("event") == "playbook_on_stats":
            data = event.get("event_data") or {}
            self.stats = {key: dict(data.get(key) or {}) for key in
                          ("ok", "changed", "dark", "failures", "skipped", "rescued", "ignored", "processed")}
            return True
        step = host_event(event)
        if step is None:
            return True
        if step.state in ("failed", "unreachable"):
            self.reasons.setdefault(step.host, failure_reason(event) or step.state)  # the first failure: the cause
        if step.state in ("ok", "changed"):
            facts = ((event.get("event_data") or {}).get("res") or {}).get("ansible_facts") or {}
            kept = {name: value for name, value in facts.items() if name in RESULT_FACTS}
            if kept:
                self.facts.setdefault(step.host, {}).update(kept)
        if self.on_event is not None:
            self.on_event(step)
        return True

    def processed(self, host: str) -> bool:
        return self.stats is not None and host in (self.stats.get("processed") or {})
