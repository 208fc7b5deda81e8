"""The fault matrix: a signal sent to a labctl command at one phase, then the checks.

Used by ``tests/faults/test_matrix.py`` (a reduced set, in CI) and ``benchmarks/faults.py`` (every
case, one JSON table). A case is (command, signal, phase):

- commands: ``run``, ``sweep``, ``tune``, ``ndr`` on the embedded lab; ``up`` and ``down`` of a libvirt
  guest; ``guest`` (a measured trial on a libvirt guest, TCG: slow, so few); ``ovs-run`` and
  ``ovs-sweep``: the embedded lab with an OVS-DPDK vswitch (``vswitch: {kind: ovs-dpdk}``: a private
  ovsdb-server and ovs-vswitchd-dpdk, the latter in a network namespace of its own, labctl/lab/ovs/);
  ``fleet`` and ``fleet-host``: ``labctl fleet sweep PROFILE -i INVENTORY --db D`` (ansible-runner,
  playbooks/sweep.yml) over a local-connection inventory (playbooks/inventories/local.yml with this
  checkout's labctl and the case's directories): ``fleet`` signals the controller (at set-up, while the
  playbook copies the profile; at the host labctl's warm-up, measure and mid-teardown, sent by that
  labctl to its controller, ``LABCTL_FAULT`` TARGET ``fleet``; inside the controller's merge
  transaction), ``fleet-host`` the labctl sweep on the host (its ``labctl_env``), at each phase as for
  ``sweep``. The next labctl is the same fleet sweep again: it stops what a killed controller left (the
  job's ansible-playbook, workers, modules and the host's labctl) and the host's labctl takes over a
  killed labctl's resources. A ``fleet`` case must end 130/143/killed in one line; a ``fleet-host``
  case with exit 1 and the host's failure (``(exit 130|143|-9)``) in one line, nothing of it merged;
  the merge is all or nothing, the re-run merges exactly the plan, and no ansible-playbook, worker,
  module, labctl, DPDK process, socket, hugepage file, module temporary directory (ansible_remote_tmp,
  AnsiballZ payloads under the case's TMPDIR), ``ansible-local`` directory or ``job.json`` of the case
  is left;
- signals: SIGINT, SIGTERM, SIGKILL;
- phases: ``setup``, ``warm-up``, ``measure`` (the trial's ``phase`` events; ndr: its search),
  ``teardown`` (inside the ledger's teardown, after its first resource went), ``commit`` (inside the
  trial's store transaction, before COMMIT).

The signal is sent by labctl itself at the point (``LABCTL_FAULT``, :mod:`labctl.faults`), after a
short delay inside the phase, so every case hits what it names; the command then must end as the
signal says (130, 143, or killed), in one line, with no traceback. Then the next labctl acts: ``sweep
--resume`` (it removes what was left and finishes the run), else ``labctl down NAME``. After that:
no process, socket, tap, domain, hugetlbfs mount, DPDK runtime directory, OVS daemon or temporary
file of the lab is left (every check counts only the case's lab: its name ``PREFIX-COMMAND-INDEX-PID``,
``LABCTL_FAULTS_PREFIX``, default ``fx``, and its directories; other sessions' labs on the host are
never counted) (OVS: its daemons, found by the lab's OVS directory on their command lines
whatever namespace they run in, that directory with its DB and unixctl sockets, the vhost-user sockets,
the hugetlbfs mount and its files, the ``labctl-NAME-ovs-*`` DPDK runtime directory); the store passes ``integrity_check`` and every trial has all its rows; a
resumed sweep has exactly one finished trial per plan entry (``lost`` counts the missing ones and any
trial stored before the fault and gone after it).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from tests.conftest import default_sigint

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = ("INT", "TERM", "KILL")
PHASES = ("setup", "warm-up", "measure", "teardown", "commit")
EMBEDDED = ("run", "sweep", "tune", "ndr")
LIBVIRT = ("up", "down", "guest", "image")  # image: a user's disk image (guest.image) with its own testpmd
OVS = ("ovs-run", "ovs-sweep")  # the embedded lab with vswitch: {kind: ovs-dpdk}
SWEEPS = ("sweep", "ovs-sweep")  # resumed with --resume after the fault
# `labctl fleet sweep PROFILE -i INVENTORY --db D` over a local-connection inventory (this machine as the
# one host; playbooks/inventories/local.yml plus the case's directories): ``fleet`` signals the
# controller, ``fleet-host`` the labctl sweep its playbook runs on the host (see fleet_fault)
FLEET = ("fleet", "fleet-host")
FLEET_PLAN = 2  # the fleet profile's plan entries (embedded_profile's two-value sweep)
# the lab names of this harness: PREFIX-COMMAND-INDEX-PID (4 digits: no name is the start of another's)
PREFIX = os.environ.get("LABCTL_FAULTS_PREFIX", "fx")
EXIT = {"INT": 130, "TERM": 143, "KILL": -9}
HOST_EXIT = {"INT": 130, "TERM": 143, "KILL": -9}  # the host labctl's, in the fleet-host reason
URI = "qemu:///system"
QEMU_REACHABLE = Path("/run/labctl-faults")  # every case's run and log dirs (0755 parents, short paths)

def ovs_installed() -> bool:
    from labctl.lab.ovs import commands as ovs_cmd

    return Path(ovs_cmd.VSWITCHD).exists()


def fleet_installed() -> bool:
    """ansible-runner importable and ansible-playbook on PATH or next to this Python (as labctl finds it)."""
    import importlib.util
    import shutil

    return importlib.util.find_spec("ansible_runner") is not None and (
        shutil.which("ansible-playbook") is not None or (Path(sys.executable).parent / "ansible-playbook").exists())


def embedded_profile(name: str, duration_s: float = 1, warmup_s: float = 0.6, hugepages: bool = False,
                     generator: str = "labgen") -> str:
    """An embedded lab pinned to CPUs 0 (vswitch) and 1 (guest), a two-value sweep."""
    return (f"name: {name}\nbackend: embedded\nguest:\n  vcpus: 1\n  memory_mib: 512\n"
            f"  hugepages: {str(hugepages).lower()}\n  nics:\n"
            + "    - {backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}\n" * 2
            + f"  pinning: {{vcpus: {{0: \"1\"}}, vhost: \"0\"}}\n"
            f"workload: {{mode: io, duration_s: {duration_s}, warmup_s: {warmup_s}, generator: {generator}}}\n"
            "sweep:\n  guest.nics.*.rx_queue_size: [256, 1024]\nrepeat: 1\n")


def ovs_profile(name: str, duration_s: float = 1, warmup_s: float = 0.6) -> str:
    """domains/ovs-pvp.yaml made short: OVS's PMD on CPU 0, the guest on CPU 1, a two-value sweep of
    OVS's tx batching. OVS reserves its own hugepages; the guest runs without (as in ovs-pvp)."""
    return (f"name: {name}\nbackend: embedded\ntopology: pvp\n"
            "vswitch:\n  kind: ovs-dpdk\n  tx_flush_interval: 0\n  emc_insert_inv_prob: 100\n  smc: false\n"
            "  rxq_assign: cycles\n  socket_mem_mib: 512\n"
            "guest:\n  vcpus: 1\n  memory_mib: 512\n  hugepages: false\n  nics:\n"
            + "    - {backend: vhostuser, queues: 1, rx_queue_size: 256, tx_queue_size: 256}\n" * 2
            + "  pinning: {vcpus: {0: \"1\"}, vhost: \"0\"}\n"
            f"workload: {{mode: io, burst: 32, packet_size: 64, duration_s: {duration_s}, warmup_s: {warmup_s}}}\n"
            "sweep:\n  vswitch.tx_flush_interval: [0, 50]\nrepeat: 1\n")


def image_text(name: str) -> str:
    """The user's-image guest of tests/integration/test_image_guest.py (labctl's guest image, built or
    cached by ``build_guest_image``), booted directly, its own dpdk-testpmd forwarding."""
    from labctl.lab.libvirt.guestimage import build_guest_image
    from tests.integration.test_image_guest import direct_boot, image_profile

    info = build_guest_image()
    return image_profile(lambda text, _file: text, name, info.path, "testpmd", boot=direct_boot(info))


def guest_text(name: str) -> str:
    """The measured vhost-user guest of tests/integration/test_guest_trials.py."""
    from tests.integration.test_guest_trials import guest_profile

    return guest_profile(lambda text, _file: text, name, "vhostuser", "  workload.burst: [32]")


@dataclass
class Case:
    command: str
    signal: str
    phase: str

    @property
    def key(self) -> str:
        return f"{self.command}/{self.signal}/{self.phase}"


@dataclass
class Outcome:
    case: str
    injected: bool = False
    survived: bool = False
    leaks: list[str] = field(default_factory=list)
    lost: int = 0
    applicable: bool = True
    detail: str = ""
    seconds: float = 0.0


def applicable(case: Case) -> str | None:
    """Why a case does not exist (None: it does)."""
    if case.command in FLEET and not fleet_installed():
        return "ansible-runner / ansible-playbook are not installed (labctl fleet needs them)"
    if case.command in OVS and not ovs_installed():
        return "ovs-vswitchd-dpdk is not installed (openvswitch-switch-dpdk)"
    if case.command in ("run", "ovs-run") and case.phase == "commit":
        return "labctl run stores nothing"
    if case.command == "ndr" and case.phase == "warm-up":
        return "an NDR search's measurements have no warm-up phase event"
    if case.command == "up" and case.phase != "setup":
        return "labctl up has set-up only (vswitch, define, boot; it tears down only when that fails): see down"
    if case.command == "down" and case.phase != "teardown":
        return "labctl down only tears down"
    if case.command in ("guest", "image") and case.phase == "commit":
        return "covered by sweep (the store does not know the backend)"
    return None


def all_cases(commands=EMBEDDED + LIBVIRT + OVS + FLEET) -> list[Case]:
    return [Case(c, s, p) for c in commands for s in SIGNALS for p in PHASES]


def fleet_fault(case: Case) -> tuple[str | None, str | None]:
    """(the controller's LABCTL_FAULT, the host labctl's LABCTL_FAULT: its ``labctl_env``) of a fleet case.

    ``fleet``: the controller is signalled at set-up (while the playbook copies the profile, before
    labctl runs on the host), at the host labctl's warm-up, measure and mid-teardown (sent by that
    labctl to its controller: TARGET ``fleet``, so it lands in that phase whatever the CPU lock made the
    host wait before it) and inside the controller's own merge transaction (commit). ``fleet-host``: the
    host's labctl sweep is signalled as ``sweep`` is (the second trial; one is stored before)."""
    sig = case.signal
    if case.command == "fleet-host":
        return None, _fault(Case("sweep", sig, case.phase), "")
    if case.phase == "setup":
        return f"fleet.Copy the profile to the host:{sig}:1:0.3", None
    if case.phase == "commit":
        return f"store.commit:{sig}:1:0", None
    if case.phase == "teardown":
        return None, f"teardown:{sig}:2:0:fleet"
    return None, f"phase.{case.phase}:{sig}:1:{ {'warm-up': 0.2, 'measure': 0.5}[case.phase]}:fleet"


def _fault(case: Case, name: str) -> str:
    """LABCTL_FAULT for the case: the point, the signal, which occurrence, the delay into the phase."""
    sig = case.signal
    if case.phase == "commit":
        return f"store.commit:{sig}:{2 if case.command in SWEEPS else 1}:0"
    if case.phase == "teardown":
        return f"teardown:{sig}:2:0"  # mid-teardown: one resource removed, the rest still there
    if case.command == "up":
        return f"phase.defining and starting labctl-{name}:{sig}:1:0.5"
    if case.command == "ndr" and case.phase == "measure":
        return f"phase.searching NDR/PDR (mlrsearch):{sig}:1:1.5"
    nth = 2 if case.command in ("sweep", "tune", "ovs-sweep") else 1  # the second trial: one is stored before
    delay = {"setup": 0.3, "warm-up": 0.2, "measure": 0.5}[case.phase]
    if case.command == "guest":
        delay = {"setup": 3.0, "warm-up": 0.3, "measure": 0.8}[case.phase]
    if case.command == "image":  # setup: 20 s in, the guest booting and its agent not yet answering
        delay = {"setup": 20.0, "warm-up": 0.3, "measure": 0.8}[case.phase]
    return f"phase.{case.phase}:{sig}:{nth}:{delay}"


class Lab:
    """One case's directories, profile and environment (every path its own: leaks are this case's)."""

    def __init__(self, work: Path, case: Case, index: int):
        self.case = case
        self.name = f"{PREFIX}-{case.command}-{index}-{os.getpid() % 10000:04d}"
        self.work = work / self.name
        self.work.mkdir(parents=True, exist_ok=True)
        self.db = self.work / "store.db"
        self.stdout = ""  # the last command's standard output (call)
        # run and log dirs under a short path: unix socket paths have 107 bytes (a pytest tmp dir is
        # longer than that allows), and QEMU (libvirt-qemu) must reach them: not under a 0700 tmp dir
        self.shared = QEMU_REACHABLE / self.name
        self.shared.mkdir(parents=True, exist_ok=True)
        for directory in (QEMU_REACHABLE, self.shared):
            directory.chmod(0o755)
        self.env = {**os.environ, "LABCTL_STATE_DIR": str(self.work / "state"),
                    "LABCTL_RUN_DIR": str(self.shared / "run"), "LABCTL_LOG_DIR": str(self.shared / "log"),
                    "PYTHONPATH": str(ROOT)}
        self.env.pop("LABCTL_FAULT", None)
        self.fault_log = self.work / "faults.log"  # every labctl-fault line, the host labctl's too
        self.env["LABCTL_FAULT_LOG"] = str(self.fault_log)
        self.profile = self.work / f"{self.name}.yaml"
        if case.command in ("up", "down", "guest"):
            text = guest_text(self.name)
        elif case.command == "image":
            text = image_text(self.name)
        elif case.command in OVS:
            text = ovs_profile(self.name)
        else:
            text = embedded_profile(self.name, hugepages=case.command == "run")
        self.profile.write_text(text, encoding="utf-8")
        if case.command in FLEET:
            self.env["TMPDIR"] = str(self.work / "tmp")  # the modules' AnsiballZ payloads: this case's
            (self.work / "tmp").mkdir(exist_ok=True)
            self.inventory = self.work / "inventory.yml"
            self.write_inventory(None)

    def write_inventory(self, host_fault: str | None) -> None:
        """playbooks/inventories/local.yml, with this checkout's labctl and the case's directories (and
        the host labctl's LABCTL_FAULT, for this run, when given)."""
        import yaml

        local = yaml.safe_load((ROOT / "playbooks" / "inventories" / "local.yml").read_text())
        env = {key: self.env[key] for key in ("LABCTL_STATE_DIR", "LABCTL_RUN_DIR", "LABCTL_LOG_DIR",
                                              "LABCTL_FAULT_LOG", "TMPDIR")}
        if host_fault:
            env["LABCTL_FAULT"] = host_fault
        for host in local["all"]["hosts"].values():
            host.update({"ansible_remote_tmp": str(self.work / "ansible-tmp"), "labctl_exe": [sys.executable, "-m", "labctl.cli"],
                         "labctl_chdir": str(ROOT), "labctl_work": str(self.work / "host"), "labctl_env": env})
        self.inventory.write_text(yaml.safe_dump(local, sort_keys=True), encoding="utf-8")

    def argv(self, command: str, *extra: str) -> list[str]:
        base = [sys.executable, "-m", "labctl.cli"]
        profile = str(self.profile)
        return {
            "run": [*base, "run", profile, "--json"],
            "sweep": [*base, "sweep", profile, "--db", str(self.db), "--json"],
            "resume": [*base, "sweep", profile, "--db", str(self.db), "--resume", "--json"],
            "tune": [*base, "tune", profile, "--budget", "3", "--db", str(self.db), "--json"],
            "ndr": [*base, "ndr", profile, "--db", str(self.db), "--final-trial", "1", "--precision", "0.2", "--json"],
            "up": [*base, "up", profile, "--mode", "workload", "--json"],
            "down": [*base, "down", self.name, *(["--uri", URI] if self.case.command in LIBVIRT else [])],
            "guest": [*base, "run", profile, "--json"],
            "image": [*base, "run", profile, "--json"],
            "ovs-run": [*base, "run", profile, "--json"],
            "ovs-sweep": [*base, "sweep", profile, "--db", str(self.db), "--json"],
            "fleet": [*base, "fleet", "sweep", profile, "-i", str(getattr(self, "inventory", "")), "--db", str(self.db),
                      "--data-dir", str(self.work / "fleet")],
        }[command] + list(extra)

    def call(self, argv: list[str], fault: str | None = None, timeout_s: float = 600.0) -> tuple[int, str]:
        env = dict(self.env)
        if fault:
            env["LABCTL_FAULT"] = fault
        done = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout_s, preexec_fn=default_sigint)
        self.stdout = done.stdout  # the last command's, for an outcome's detail when it ended otherwise than asked
        return done.returncode, done.stderr


# --- the checks -----------------------------------------------------------------------------------

def _processes_of(lab: Lab) -> list[str]:
    """The lab's processes: any whose command line names its directories or ``labctl-NAME`` (a DPDK file
    prefix, a domain), never another lab's (other sessions run labs on this host at the same time). A
    fleet case's ansible-playbook, its workers, modules and the host's labctl all name the case's
    directories (inventory, data directory, ansible_remote_tmp, labctl_work)."""
    prefix = re.compile(re.escape(f"labctl-{lab.name}") + r"(?![A-Za-z0-9])")
    found = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        cmdline = proc.info.get("cmdline") or []
        text = " ".join(cmdline)
        mine = str(lab.work) in text or str(lab.shared) in text or prefix.search(text) is not None
        if proc.pid != os.getpid() and mine and "pytest" not in text:
            found.append(f"process {proc.pid} {proc.info.get('name')}")
    return found


def leaks_after(lab: Lab, after: dict) -> list[str]:
    """What the case left (:func:`leaks`), and the store when it is not whole after the next labctl."""
    left = leaks(lab)
    if not after["ok"]:
        left.append(f"store: {after.get('error', 'a trial is not whole or integrity_check failed')}")
    return left


def leaks(lab: Lab) -> list[str]:
    """Everything of the lab still there (after the next labctl acted)."""
    found = _processes_of(lab)
    for directory in (lab.shared / "run", lab.work / "state"):
        if directory.exists():
            found += [f"file {p}" for p in directory.rglob("*")]
    if (lab.shared / "log").exists():
        found += [f"temporary file {p}" for p in (lab.shared / "log").rglob("*.tmp")]
    mounts = Path("/proc/mounts").read_text()
    found += [f"mount {line.split()[1]}" for line in mounts.splitlines()
              if str(lab.work) in line or str(lab.shared) in line]
    runtime = Path("/var/run/dpdk")
    if runtime.exists():
        found += [f"DPDK runtime dir {p}" for p in runtime.glob(f"labctl-{lab.name}*")]
    if lab.case.command in LIBVIRT:
        found += _libvirt_leaks(lab)
    if lab.case.command in OVS:
        found += _ovs_leaks(lab, found)
    if lab.case.command in FLEET:
        found += _fleet_leaks(lab)
    return found


def _fleet_leaks(lab: Lab) -> list[str]:
    """A fleet case's temporary files: modules' temporary directories (ansible_remote_tmp), AnsiballZ
    payloads (TMPDIR), ansible-playbook's controller-side ones (each run's ``ansible-local``), a job
    record left (``job.json``: a job nobody stopped), and any ``*.tmp`` under the case."""
    found = [f"temporary file {p}" for d in ("ansible-tmp", "tmp") if (lab.work / d).exists()
             for p in (lab.work / d).iterdir()]
    data = lab.work / "fleet"
    if data.exists():
        found += [f"temporary file {p}" for p in data.glob("*/ansible-local/*")]
        found += [f"job left {p}" for p in data.glob("*/job.json")]
    found += [f"temporary file {p}" for p in lab.work.rglob("*.tmp")]
    return found


def _ovs_leaks(lab: Lab, found: list[str]) -> list[str]:
    """OVS daemons of the lab not already named: any ovsdb-server/ovs-vswitchd whose command line names
    the lab's OVS directory (``ovs-NAME``; ovs-vswitchd runs in its own network namespace, which goes
    with it, but its command line is visible from the host's). Their directory, vhost-user sockets,
    hugetlbfs mount and files, and DPDK runtime directory are found by the checks in :func:`leaks`:
    all are under the lab's run directory or named ``labctl-NAME-ovs-*``."""
    more = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        text = " ".join(proc.info.get("cmdline") or [])
        if ("ovsdb-server" in text or "ovs-vswitchd" in text) and f"ovs-{lab.name}" in text:
            entry = f"process {proc.pid} {proc.info.get('name')}"
            if entry not in found:
                more.append(f"OVS daemon {proc.pid} {proc.info.get('name')}")
    return more


def _libvirt_leaks(lab: Lab) -> list[str]:
    from labctl.lab.libvirt import hypervisor
    from labctl.lab.plan import tap_name

    found = []
    if hypervisor.lookup(URI, f"labctl-{lab.name}") is not None:
        found.append(f"domain labctl-{lab.name}")
    found += [f"tap {tap_name(lab.name, i)}" for i in range(4) if Path(f"/sys/class/net/{tap_name(lab.name, i)}").exists()]
    return found


def store_state(db: Path) -> dict:
    """What the store holds: finished trials by id and seq, and whether every trial is whole."""
    if not db.exists():
        return {"ok": True, "done": {}, "runs": []}
    conn = sqlite3.connect(db)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        trials = conn.execute("SELECT id, run_id, seq, status, metrics_json FROM trials").fetchall()
        metric_rows = dict(conn.execute("SELECT trial_id, COUNT(*) FROM metrics GROUP BY trial_id").fetchall())
        runs = conn.execute("SELECT id, status, json_array_length(plan_json) FROM runs").fetchall()
    except sqlite3.Error as exc:
        return {"ok": False, "error": str(exc), "done": {}, "runs": []}
    finally:
        conn.close()
    from labctl.results.codecs import metric_items
    from labctl.results.record import Metrics

    whole = True
    for trial_id, _run, _seq, _status, metrics_json in trials:
        expected = len(metric_items(Metrics.model_validate(json.loads(metrics_json))))
        whole &= metric_rows.get(trial_id, 0) == expected
    done = {t[0]: (t[1], t[2]) for t in trials if t[3] in ("ok", "failed")}
    return {"ok": integrity == "ok" and whole, "done": done, "runs": runs}


def _stored_steps(stderr: str) -> int:
    return len(re.findall(r"^\[\d+/\d+\] ", stderr, flags=re.M))


def run_case(case: Case, work: Path, index: int) -> Outcome:
    outcome = Outcome(case.key)
    reason = applicable(case)
    if reason is not None:
        outcome.applicable, outcome.detail = False, reason
        return outcome
    t0 = time.monotonic()
    lab = Lab(work, case, index)
    try:
        if case.command in FLEET:
            _run_fleet_case(case, lab, outcome)
            return outcome
        if case.command == "down":
            code, err = lab.call(lab.argv("up"))
            if code != 0:
                outcome.detail = f"up before down failed ({code}): {err.strip()[-200:]}"
                return outcome
        command = "down" if case.command == "down" else case.command
        code, err = lab.call(lab.argv(command), _fault(case, lab.name))
        outcome.injected = "labctl-fault:" in err
        tail = [line for line in err.strip().splitlines() if not line.startswith(("labctl-fault:", "["))]
        clean_exit = code == EXIT[case.signal] and "Traceback" not in err and "internal error" not in err
        outcome.detail = f"exit {code}" + (f": {tail[-1][:160]}" if tail else "")
        if not clean_exit and lab.stdout.strip():
            outcome.detail += f"; its output ends: {' '.join(lab.stdout.split())[-400:]}"
        before = store_state(lab.db)
        if case.command in SWEEPS:
            code2, err2 = lab.call(lab.argv("resume"))
        else:
            code2, err2 = lab.call(lab.argv("down"))
        recovered = code2 == 0
        if not recovered:
            outcome.detail += f"; next labctl exit {code2}: {err2.strip()[-200:]}"
        after = store_state(lab.db)
        outcome.leaks = leaks_after(lab, after)
        lost = len(set(before["done"]) - set(after["done"]))  # stored before the fault, gone after
        if case.command in SWEEPS:
            seqs = [seq for (_run, seq) in after["done"].values()]
            planned = after["runs"][0][2] if after["runs"] else 0
            lost += planned - len(set(seqs))  # plan entries without a finished trial after --resume
            if len(seqs) != len(set(seqs)):
                outcome.leaks.append(f"store: {len(seqs) - len(set(seqs))} plan entries stored twice")
        elif case.command == "tune":
            lost += max(0, _stored_steps(err) - len(before["done"]))
        outcome.lost = lost
        outcome.survived = outcome.injected and clean_exit and recovered
    except subprocess.TimeoutExpired as exc:
        outcome.detail = f"timed out: {exc}"
    finally:
        outcome.seconds = round(time.monotonic() - t0, 1)
        _clean(lab)
    return outcome


def _injected(lab: Lab, err: str) -> bool:
    return "labctl-fault:" in err or (lab.fault_log.exists() and "labctl-fault:" in lab.fault_log.read_text())


def fleet_store(db: Path) -> dict:
    """The merged store of a fleet case: whole, and its runs (one per merge: ``fleet IDENT: HOST``) with
    their finished trials' plan entries."""
    state = store_state(db)
    runs: dict = {}
    for run_id, seq in state["done"].values():
        runs.setdefault(run_id, []).append(seq)
    state["merged"] = runs
    if db.exists():
        conn = sqlite3.connect(db)
        try:
            state["run_ids"] = [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY id")]
        finally:
            conn.close()
    else:
        state["run_ids"] = []
    return state


def _run_fleet_case(case: Case, lab: Lab, outcome: Outcome) -> None:
    """A fault of ``labctl fleet sweep``; then the same fleet sweep again (the next labctl: it stops
    what a killed controller left, and the host's labctl takes over what a killed labctl left).

    ``fleet``: the controller ends as its signal says (130, 143, or killed), in one line. ``fleet-host``:
    the host's labctl does, so the host fails and the controller exits 1, naming it in one line, and
    merges nothing of it. Then: the merge is all or nothing (nothing of a merge the fault stopped is in
    the store), the re-run exits 0 and merges exactly the plan (``lost``: entries missing from it, and
    trials merged before the fault gone after it), and nothing of the case is left."""
    controller_fault, host_fault = fleet_fault(case)
    lab.write_inventory(host_fault)
    code, err = lab.call(lab.argv("fleet"), controller_fault)
    outcome.injected = _injected(lab, err)
    lines = [line for line in err.strip().splitlines() if not line.startswith("labctl-fault:")]
    if case.command == "fleet":
        clean_exit = code == EXIT[case.signal]
        if code != -9:  # its last line is the one that says why (progress lines come before it)
            clean_exit &= bool(lines) and lines[-1] in ("labctl: interrupted", "labctl: terminated by SIGTERM (cleaned up)")
    else:
        host_exit = f"(exit {HOST_EXIT[case.signal]})"
        failed = [line for line in lines if line.startswith("local: labctl sweep: failed")]
        clean_exit = code == 1 and any(host_exit in line for line in failed)
        lines = failed or lines
    clean_exit &= "Traceback" not in err and "internal error" not in err
    outcome.detail = f"exit {code}" + (f": {lines[-1][:160]}" if lines else "")
    before = fleet_store(lab.db)
    half = [run_id for run_id, seqs in before["merged"].items() if len(seqs) != FLEET_PLAN]
    half += [run_id for run_id in before["run_ids"] if run_id not in before["merged"]]
    lab.write_inventory(None)
    code2, err2 = lab.call(lab.argv("fleet"))
    recovered = code2 == 0
    notes = [line for line in err2.splitlines() if line.startswith("note: ")]
    if notes:
        outcome.detail += f"; {notes[0][:160]}"
    if not recovered:
        outcome.detail += f"; next labctl fleet exit {code2}: {err2.strip()[-200:]}"
    after = fleet_store(lab.db)
    outcome.leaks = leaks_after(lab, after)
    if half:
        outcome.leaks.append(f"store: runs {half} half-merged by the fleet sweep the fault stopped")
    lost = len(set(before["done"]) - set(after["done"]))
    newest = after["run_ids"][-1] if after["run_ids"] else None
    seqs = after["merged"].get(newest, []) if recovered else []
    lost += FLEET_PLAN - len(set(seqs))
    if len(seqs) != len(set(seqs)):
        outcome.leaks.append(f"store: {len(seqs) - len(set(seqs))} plan entries merged twice")
    outcome.lost = max(lost, 0)
    outcome.survived = outcome.injected and clean_exit and recovered


def _clean(lab: Lab) -> None:
    """Whatever a failed case left, removed (the next case must start clean); only this lab's."""
    if leaks(lab):
        if lab.case.command in FLEET:
            from labctl.fleet.run import stop_orphans

            stop_orphans(lab.work / "fleet")
        lab.call(lab.argv("down"))
    import shutil

    shutil.rmtree(lab.shared, ignore_errors=True)


def table(outcomes: list[Outcome]) -> dict:
    ran = [o for o in outcomes if o.applicable]
    return {
        "faults_injected": sum(o.injected for o in ran),
        "survived": sum(o.survived for o in ran),
        "leaks": sum(len(o.leaks) for o in ran),
        "trials_lost": sum(o.lost for o in ran),
        "cases": len(ran),
        "not_applicable": {o.case: o.detail for o in outcomes if not o.applicable},
        "rows": [asdict(o) for o in ran],
    }
