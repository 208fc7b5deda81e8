"""The fleet playbooks (``playbooks/lab-host.yml``, ``playbooks/sweep.yml``) run through ansible-runner's
Python API, with per-host results.

Each call is one ansible-runner job in its own private data directory, ``DATA_DIR/IDENT/`` (default
``out/fleet/``), kept for inspection::

    fleet-vars.yml             the call's arguments, as variables of the group ``all``
    artifacts/IDENT/           ansible-runner's: job_events/*.json, stdout, status, rc, command
    hosts/HOST/                what the playbook brought back: trials.jsonl, labctl.log
    ansible-local/             ansible-playbook's controller-side temporary files (ANSIBLE_LOCAL_TEMP)

and, shared by the runs of one data directory, ``DATA_DIR/stage/``: the tarball of the working tree and the
wheel ``prepare`` builds from it (once per tree content) and installs on the hosts.

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
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from labctl import api, faults, signals
from labctl.errors import LabFault, UserError
from labctl.fleet.events import EventLog, HostEvent, HostStats, host_status
from labctl.fleet.inventory import STRICT_INVENTORY, ansible_on_path, inventory_hosts, runner_module
from labctl.fleet.merge import Merged, merge

DATA_DIR = Path("out/fleet")
COMMANDS = ("sweep", "ndr", "tune")


def playbooks_dir() -> Path:
    """``$LABCTL_PLAYBOOKS``, else the playbooks an installed package carries, else the checkout's
    ``playbooks/`` (``api.shipped_path``)."""
    env = os.environ.get("LABCTL_PLAYBOOKS")
    try:
        path = Path(env) if env else api.shipped_path("playbooks")
    except FileNotFoundError as exc:
        raise LabFault(f"no fleet playbooks: {exc} (or set LABCTL_PLAYBOOKS to a labctl checkout's playbooks/)") from exc
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
    notes: list[str] = field(default_factory=list)  # what was done before the job (stop_orphans)

    @property
    def failed(self) -> list[HostResult]:
        return [h for h in self.hosts if h.status != "ok"]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ident": self.ident, "data_dir": str(self.data_dir),
                "playbook": str(self.playbook), "runner_status": self.status, "rc": self.rc,
                "hosts": [h.to_dict() for h in self.hosts], "merged": [m.to_dict() for m in self.merged],
                "notes": self.notes}


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
    """What a stopped job leaves running, stopped.

    ansible-runner cancels a job with SIGKILL to ansible-playbook's process group
    (``Runner.handle_termination``), but ansible-core 2.19 runs each task in a worker process that starts
    a session of its own: the worker, its connection (``ssh``) and, on a local connection, the command it
    runs (``labctl sweep``) would outlive the job. So when the job is to stop, the reaper notes every
    descendant of ansible-playbook, whose pid every event carries (``event["pid"]``, the process whose
    callback emitted it; ansible-runner's ``Runner.host_events`` example shows it), and once
    ansible-playbook is gone stops them in two steps: first the commands the tasks run (the children of
    a module process, ``AnsiballZ_*.py``: ``labctl sweep``, which tears its lab down on SIGTERM), so the
    modules and workers above them end by themselves and remove their temporary files
    (``ansible_remote_tmp``'s ``ansible-tmp-*``, AnsiballZ's ``ansible_*_payload_*``); then, after
    ``grace_s``, whatever is still there gets SIGTERM, and SIGKILL 5 s later.
    A labctl already running on a remote host keeps running there when its ssh connection goes."""

    def __init__(self, grace_s: float = 30.0):
        self.grace_s = grace_s
        self.pid: int | None = None
        self.left: list = []

    def note(self, event: dict) -> bool:
        """Take ansible-playbook's pid from an event; True the first time."""
        if self.pid is None and isinstance(event.get("pid"), int):
            self.pid = event["pid"]
            return True
        return False

    def snapshot(self) -> None:
        import psutil

        if self.pid is not None and not self.left:
            try:
                self.left = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                self.left = []

    def kill_playbook(self) -> None:
        """SIGKILL to ansible-playbook's process group, as ansible-runner's cancel does (when the job
        stopped by an exception in this process, the runner did not): no task starts after this."""
        import signal

        if self.pid is None:
            return
        with contextlib.suppress(OSError):
            if os.getpgid(self.pid) == self.pid:  # pexpect made it a session (and group) leader
                os.killpg(self.pid, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def reap(self) -> None:
        reap(self.left, self.grace_s)


def _is_module(proc) -> bool:
    """A module process: ``python3 .../AnsiballZ_NAME.py`` (not the ``sh -c '...'`` around it)."""
    import psutil

    try:
        return any(Path(part).name.startswith("AnsiballZ_") and part.endswith(".py") and not any(c.isspace() for c in part)
                   for part in proc.cmdline()[1:])
    except psutil.Error:
        return False


def reap(left: list, grace_s: float = 30.0) -> None:
    """Stop ``left`` (psutil processes of a stopped job), commands first (see :class:`_Reaper`)."""
    import psutil

    alive = [proc for proc in left if proc.is_running()]  # is_running(): same pid and start time
    modules = {proc.pid for proc in alive if _is_module(proc)}
    commands = []
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            if proc.ppid() in modules:
                commands.append(proc)
    for proc in commands:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    psutil.wait_procs(commands, timeout=grace_s)
    _, rest = psutil.wait_procs([p for p in alive if p not in commands], timeout=5 if commands else 0.5)
    for proc in rest:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, stubborn = psutil.wait_procs(rest + [p for p in commands if p.is_running()], timeout=5)
    for proc in stubborn:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(stubborn, timeout=5)


# --- a job whose controller was killed (kill -9: nothing of it could act) ----------------------------

JOB_FILE = "job.json"  # in a run's private data directory while its job runs


def _process_id(pid: int) -> dict[str, Any] | None:
    import psutil

    try:
        return {"pid": pid, "started": psutil.Process(pid).create_time()}
    except psutil.Error:
        return None


def _same(ident: dict[str, Any] | None) -> Any:
    """The psutil process ``ident`` names (pid and start time), if it still runs."""
    import psutil

    if not ident:
        return None
    try:
        proc = psutil.Process(int(ident["pid"]))
        return proc if abs(proc.create_time() - float(ident["started"])) < 0.01 else None
    except (psutil.Error, KeyError, TypeError, ValueError):
        return None


def _job_processes(ident: str, playbook) -> list:
    """The processes of job ``ident``: ansible-playbook's descendants, and any process whose command line
    names the run (its workers and a local host's ``labctl``, also when they outlived ansible-playbook)."""
    import psutil

    found = {}
    if playbook is not None:
        with contextlib.suppress(psutil.Error):
            found.update({p.pid: p for p in playbook.children(recursive=True)})
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != os.getpid() and any(ident in part for part in proc.info.get("cmdline") or []):
            found.setdefault(proc.pid, proc)
    if playbook is not None:
        found.pop(playbook.pid, None)
    return list(found.values())


def stop_orphans(data_dir: str | Path, grace_s: float = 30.0) -> list[str]:
    """Stop the jobs of ``data_dir`` whose controller is gone but which still run (the controller was
    killed with SIGKILL: ansible-playbook runs on, ignoring SIGHUP, and so do its workers and a local
    host's ``labctl``). Each is stopped as a cancelled job is (:class:`_Reaper`), its controller-side
    temporary files removed. Returns one line per job stopped. A job whose controller still runs (another
    ``labctl fleet`` on this data directory) is left alone."""
    import shutil

    said = []
    for job in sorted(Path(data_dir).glob(f"*/{JOB_FILE}")):
        try:
            info = json.loads(job.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if _same(info.get("controller")) is not None:
            continue
        ident = job.parent.name
        playbook = _same(info.get("playbook"))
        left = _job_processes(ident, playbook)
        if playbook is not None or left:
            reaper = _Reaper(grace_s)
            reaper.pid, reaper.left = (playbook.pid if playbook is not None else None), left
            reaper.kill_playbook()
            reaper.reap()
            if playbook is not None:
                with contextlib.suppress(Exception):
                    playbook.wait(5)
            controller = info.get("controller") or {}
            said.append(f"stopped job {ident}, left running by a labctl fleet that was killed (pid "
                        f"{controller.get('pid')}): " + (f"ansible-playbook {playbook.pid} and " if playbook else "")
                        + f"{len(left)} processes under it")
        shutil.rmtree(job.parent / "ansible-local", ignore_errors=True)
        with contextlib.suppress(OSError):
            job.unlink()
    return said


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
    notes = stop_orphans(private.parent)
    job = private / JOB_FILE

    def handle(event: dict) -> bool:
        if reaper.note(event):  # what the next labctl fleet needs if this one is killed
            job.write_text(json.dumps({"controller": _process_id(os.getpid()), "playbook": _process_id(reaper.pid)}),
                           encoding="utf-8")
        if event.get("event") == "runner_on_start":
            faults.point(f"fleet.{(event.get('event_data') or {}).get('task')}")
        return log(event)

    with ansible_on_path(), signals.stoppable() as scope:

        def stop() -> bool:
            stopping = relay.error is not None or scope.cancelled
            if stopping:
                reaper.snapshot()
            return stopping

        try:
            runner = ansible_runner.run(
                private_data_dir=str(private), ident=ident, project_dir=str(playbook.parent), playbook=playbook.name,
                inventory=[str(Path(inventory).resolve()), str(defaults)], extravars={**(extravars or {}), **fixed},
                envvars=dict(STRICT_INVENTORY, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(private / "ansible-local")),
                forks=max(5, len(hosts)), quiet=True,
                event_handler=handle, cancel_callback=stop)
        except BaseException:
            # SIGINT (KeyboardInterrupt) or SIGTERM (Terminated) raised here, inside the runner: it did
            # not stop ansible-playbook, which ignores SIGHUP and would run the playbook to its end
            reaper.snapshot()
            reaper.kill_playbook()
            raise
        finally:
            reaper.reap()
            with contextlib.suppress(OSError):
                job.unlink()
            shutil.rmtree(private / "ansible-local", ignore_errors=True)  # a killed ansible-playbook's
            for partial in (private / "artifacts" / ident / "job_events").glob("*.json.tmp"):
                partial.unlink(missing_ok=True)  # an event the runner was writing when it stopped
        scope.check()
    if relay.error is not None:
        raise relay.error
    if log.stats is None:
        raise LabFault(f"{playbook.name} did not run (ansible-playbook exit {runner.rc}, runner {runner.status}): "
                       f"{_stdout_tail(private, ident)} (see {private / 'artifacts' / ident / 'stdout'})")
    return FleetRun(kind=kind, ident=ident, data_dir=private, playbook=playbook, status=runner.status, rc=runner.rc,
                    hosts=[_result(host, log, private, f"{playbook.name} (runner {runner.status})") for host in hosts],
                    notes=notes)


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
    from labctl import api

    if command not in COMMANDS:
        raise UserError(f"--command {command}: not a fleet command (allowed: {', '.join(COMMANDS)})")
    api.load_for_hosts(profile)  # a bad profile is the user's, before any host is touched
    if db is not None:
        api.check_store(db, "--db")  # a store, or a file that can be created: before hours of sweeping
    chosen = {"labctl_profile": str(Path(profile).resolve()), "labctl_command": command,
              "labctl_args": [str(a) for a in args], **(group_vars or {})}
    run = run_playbook("sweep", playbooks_dir() / "sweep.yml", inventory, chosen, None, data_dir, on_event)
    if db is not None:
        with signals.stoppable():  # SIGTERM mid-merge: Terminated, the transaction rolled back, exit 143
            run.merged = merge(run.hosts, db, run_name=run.ident)
    return run
