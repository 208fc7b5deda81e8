"""The fleet playbooks (``playbooks/lab-host.yml``, ``playbooks/sweep.yml``) run through ansible-runner's
Python API, with per-host results.

Each call is one ansible-runner job in its own private data directory, ``DATA_DIR/IDENT/`` (default
``out/fleet/``), kept for inspection::

    fleet-vars.yml             the call's arguments, as variables of the group ``all``
    artifacts/IDENT/           ansible-runner's: job_events/*.json, stdout, status, rc, command
    hosts/HOST/                what the playbook brought back: trials.jsonl, labctl.log
    ansible-local/             ansible-playbook's controller-side temporary files (ANSIBLE_LOCAL_TEMP)

and, shared by the runs of one data directory, ``DATA_DIR/stage/labctl-src.tar``: the tarball of the
working tree that ``prepare`` gives the hosts.

The call's arguments (profile, command, extra arguments, hugepages...) are written as ``all`` group
variables in an extra inventory source given after the user's, so a host's or a group's own variables in
the inventory still override them (e.g. a per-host ``labctl_profile`` or ``labctl_env``). Only what this
module needs to find the results again (``labctl_run``, ``labctl_artifacts``, ``labctl_stage``) and an
explicit ``reboot`` are extra variables, which nothing overrides.

ansible-runner facts used here (ansible-runner 2.4, "Using Runner as a Python Module Interface to
Ansible"): ``ansible_runner.run(private_data_dir=, ident=, project_dir=, playbook=, inventory=[sources],
extravars=, envvars=, forks=, quiet=, event_handler=, cancel_callback=)`` runs ``ansible-playbook`` (found
on PATH) in the foreground and returns a ``Runner`` with ``status`` (``successful``, ``failed``,
``timeout``, ``canceled``), ``rc`` (ansible-playbook's: 0; 2 when a host failed; 4 when one was
unreachable; other values when the playbook did not run) and ``stats``; ``cancel_callback`` is polled
while it runs and stops the job when it returns True. Events: see :mod:`labctl.fleet.events`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from labctl import signals
from labctl.errors import LabFault, UserError
from labctl.fleet.events import EventLog, HostEvent, HostStats, host_status
from labctl.fleet.inventory import STRICT_INVENTORY, ansible_on_path, inventory_hosts, runner_module
from labctl.fleet.merge import Merged, merge

DATA_DIR = Path("out/fleet")
COMMANDS = ("sweep", "ndr", "tune")
# a profile's CPU pins name the lab host's CPUs, which labctl checks on each host; here every CPU passes
ANY_CPU = frozenset(range(8192))


def playbooks_dir() -> Path:
    """``$LABCTL_PLAYBOOKS``, else the ``playbooks/`` of the checkout this labctl runs from."""
    env = os.environ.get("LABCTL_PLAYBOOKS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "playbooks"
    if not (path / "sweep.yml").is_file():
        raise LabFault(f"no fleet playbooks at {path} (set LABCTL_PLAYBOOKS to a labctl checkout's playbooks/)")
    return path


@dataclass
class HostResult:
    """What one host did in one playbook run."""

    host: str
    status: str  # ok | failed | unreachable
    reason: str | None  # one line: the first failed task and its message, or the unreachable message
    stats: HostStats
    artifacts: Path  # hosts/HOST/ under the run's private data directory
    jsonl: Path | None = None  # the fetched trials (sweep), when the host produced any
    facts: dict[str, Any] = field(default_factory=dict)  # labctl_* facts the host set (labctl_kernel_plan)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "status": self.status, "reason": self.reason, "stats": self.stats.to_dict(),
                "artifacts": str(self.artifacts), "jsonl": str(self.jsonl) if self.jsonl else None,
                "facts": self.facts}


@dataclass
class FleetRun:
    """One ansible-runner job over an inventory."""

    kind: str  # prepare | sweep
    ident: str
    data_dir: Path  # the private data directory
    playbook: Path
    status: str  # the runner's
    rc: int | None
    hosts: list[HostResult]
    merged: list[Merged] = field(default_factory=list)

    @property
    def failed(self) -> list[HostResult]:
        return [h for h in self.hosts if h.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ident": self.ident, "data_dir": str(self.data_dir),
                "playbook": str(self.playbook), "runner_status": self.status, "rc": self.rc,
                "hosts": [h.to_dict() for h in self.hosts], "merged": [m.to_dict() for m in self.merged]}


class _Relay:
    """Hands host steps to a face's callback; an exception there cancels the job and is raised after it."""

    def __init__(self, callback: Callable[[HostEvent], None] | None):
        self.callback = callback
        self.error: BaseException | None = None

    def __call__(self, step: HostEvent) -> None:
        if self.callback is None or self.error is not None:
            return
        try:
            self.callback(step)
        except BaseException as exc:  # noqa: BLE001 - re-raised once the job has stopped
            self.error = exc


class _Reaper:
    """What a cancelled job leaves running, stopped.

    ansible-runner cancels a job with SIGKILL to ansible-playbook's process group
    (``Runner.handle_termination``), but ansible-core 2.19 runs each task in a worker process that starts
    a session of its own: the worker, its connection (``ssh``) and, on a local connection, the command it
    runs (``labctl sweep``) would outlive the job. So when the job is to stop, the reaper notes every
    descendant of ansible-playbook, whose pid every event carries (``event["pid"]``, the process whose
    callback emitted it; ansible-runner's ``Runner.host_events`` example shows it), and once the runner has
    returned sends them SIGTERM (labctl tears its lab down on SIGTERM), then SIGKILL after ``grace_s``.
    A labctl already running on a remote host keeps running there when its ssh connection goes."""

    def __init__(self, grace_s: float = 30.0):
        self.grace_s = grace_s
        self.pid: int | None = None
        self.left: list = []

    def note(self, event: dict) -> None:
        if self.pid is None and isinstance(event.get("pid"), int):
            self.pid = event["pid"]

    def snapshot(self) -> None:
        import psutil

        if self.pid is not None and not self.left:
            try:
                self.left = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                self.left = []

    def reap(self) -> None:
        import psutil

        alive = [proc for proc in self.left if proc.is_running()]  # is_running(): same pid and start time
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.terminate()
        _, stubborn = psutil.wait_procs(alive, timeout=self.grace_s)
        for proc in stubborn:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(stubborn, timeout=5)


def _stdout_tail(data_dir: Path, ident: str) -> str:
    try:
        lines = (data_dir / "artifacts" / ident / "stdout").read_text(errors="replace").splitlines()
    except OSError:
        return "no output"
    said = [" ".join(line.split()) for line in lines if line.strip()]
    return said[-1] if said else "no output"


def run_playbook(kind: str, playbook: Path, inventory: str | Path, group_vars: dict[str, Any],
                 extravars: dict[str, Any] | None = None, data_dir: str | Path | None = None,
                 on_event: Callable[[HostEvent], None] | None = None) -> FleetRun:
    """Run ``playbook`` over ``inventory`` (see the module docstring) and read back every host's result.

    Raises ``UserError`` for an unusable inventory, ``LabFault`` when the playbook could not run at all
    (ansible-playbook's own error, e.g. a bad variable), and ``Cancelled``/``Terminated`` when the
    caller's cancel scope (:mod:`labctl.signals`) stopped the job."""
    ansible_runner = runner_module()
    hosts = inventory_hosts(inventory)
    ident = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{kind}-{secrets.token_hex(3)}"
    private = Path(data_dir or DATA_DIR).resolve() / ident
    private.mkdir(parents=True)
    defaults = private / "fleet-vars.yml"
    defaults.write_text(yaml.safe_dump({"all": {"vars": group_vars}}, sort_keys=True), encoding="utf-8")
    # the stage is shared by the runs of one data directory: an unchanged tree stays the same file
    fixed = {"labctl_run": ident, "labctl_artifacts": str(private / "hosts"),
             "labctl_stage": str(private.parent / "stage")}
    relay = _Relay(on_event)
    log = EventLog(on_event=relay)
    reaper = _Reaper()
    scope = signals.current()

    def handle(event: dict) -> bool:
        reaper.note(event)
        return log(event)

    def stop() -> bool:
        stopping = relay.error is not None or (scope is not None and scope.cancelled)
        if stopping:
            reaper.snapshot()
        return stopping

    with ansible_on_path():
        try:
            runner = ansible_runner.run(
                private_data_dir=str(private), ident=ident, project_dir=str(playbook.parent), playbook=playbook.name,
                inventory=[str(Path(inventory).resolve()), str(defaults)], extravars={**(extravars or {}), **fixed},
                envvars=dict(STRICT_INVENTORY, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(private / "ansible-local")),
                forks=max(5, len(hosts)), quiet=True,
                event_handler=handle, cancel_callback=stop)
        finally:
            reaper.reap()
    if relay.error is not None:
        raise relay.error
    if scope is not None:
        scope.check()
    if log.stats is None:
        raise LabFault(f"{playbook.name} did not run (ansible-playbook exit {runner.rc}, runner {runner.status}): "
                       f"{_stdout_tail(private, ident)} (see {private / 'artifacts' / ident / 'stdout'})")
    return FleetRun(kind=kind, ident=ident, data_dir=private, playbook=playbook, status=runner.status, rc=runner.rc,
                    hosts=[_result(host, log, private, f"{playbook.name} (runner {runner.status})") for host in hosts])


def _result(host: str, log: EventLog, private: Path, job: str) -> HostResult:
    stats = HostStats.of(log.stats, host)
    status = host_status(stats, log.processed(host))
    reason = None
    if status != "ok":
        reason = log.reasons.get(host) or (f"not processed by {job}" if not log.processed(host)
                                           else f"failed in {job}: see the job's stdout")
    where = private / "hosts" / host
    jsonl = where / "trials.jsonl"
    return HostResult(host=host, status=status, reason=reason, stats=stats, artifacts=where,
                      jsonl=jsonl if jsonl.is_file() else None, facts=log.facts.get(host, {}))


def _check_store(db: Path) -> None:
    """--db must be a result store, or a file that can be created (checked before hours of sweeping)."""
    from labctl.paths import can_create
    from labctl.results.store import Store

    if db.exists():
        Store(db).close()  # NotAStoreError (exit 2) for a file that is not a store
    elif not can_create(db):
        raise UserError(f"--db {db}: cannot write there (allowed: a file in an existing writable directory)")


def prepare(inventory: str | Path, *, hugepages: int | None = None, build_appliance: bool | None = None,
            reboot: bool = False, group_vars: dict[str, Any] | None = None, data_dir: str | Path | None = None,
            on_event: Callable[[HostEvent], None] | None = None) -> FleetRun:
    """Prepare every host of ``inventory`` as a lab host (``playbooks/lab-host.yml``). Each host's
    kernel-arguments plan is in its result's ``facts["labctl_kernel_plan"]``; ``reboot=True`` applies
    it (and reboots the hosts that need it)."""
    if hugepages is not None and not 0 <= hugepages <= 1_000_000:
        raise UserError(f"--hugepages {hugepages}: out of range (allowed: 0..1000000 pages of 2 MiB)")
    chosen = dict(group_vars or {})
    if hugepages is not None:
        chosen["labctl_hugepages"] = hugepages
    if build_appliance is not None:
        chosen["labctl_build_appliance"] = build_appliance
    return run_playbook("prepare", playbooks_dir() / "lab-host.yml", inventory, chosen,
                        {"reboot": True} if reboot else None, data_dir, on_event)


def sweep(profile: str | Path, inventory: str | Path, db: str | Path | None, *, command: str = "sweep",
          args: Sequence[str] = (), group_vars: dict[str, Any] | None = None, data_dir: str | Path | None = None,
          on_event: Callable[[HostEvent], None] | None = None) -> FleetRun:
    """Run ``labctl COMMAND PROFILE ARGS...`` on every host of ``inventory`` at once
    (``playbooks/sweep.yml``), fetch each host's trials and, when ``db`` is given, merge the good hosts'
    trials into it (:func:`labctl.fleet.merge.merge`; ``FleetRun.merged``). A failed or unreachable host
    is reported in its result and does not stop the others."""
    from labctl.profile.load import load_profile

    if command not in COMMANDS:
        raise UserError(f"--command {command}: not a fleet command (allowed: {', '.join(COMMANDS)})")
    load_profile(profile, cpus=ANY_CPU)  # a bad profile is the user's, before any host is touched
    if db is not None:
        _check_store(Path(db))
    chosen = {"labctl_profile": str(Path(profile).resolve()), "labctl_command": command,
              "labctl_args": [str(a) for a in args], **(group_vars or {})}
    run = run_playbook("sweep", playbooks_dir() / "sweep.yml", inventory, chosen, None, data_dir, on_event)
    if db is not None:
        run.merged = merge(run.hosts, db, run_name=run.ident)
    return run
