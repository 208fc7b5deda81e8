"""The fleet playbooks for real, through ansible-runner's Python API (labctl.fleet).

* lab-host.yml on this machine with the local connection, twice: the second run changes nothing. The
  test keeps it light and private: a labctl home, hugetlbfs mount point, sysctl.d file and fstab in a
  temporary directory, and 2 hugepages more than the pool holds (given back afterwards). The appliance
  step runs for real (``labctl image build`` from the host's new venv; a cache hit when this machine has
  built it before, as the appliance's own tests do).
* sweep.yml across test hosts made here: network namespaces, each with its own sshd (a throwaway host
  key, an authorized key made by the test, sshd_config in a temporary directory, ListenAddress on the
  namespace's veth address only), joined by veth pairs to a controller namespace. Nothing listens in
  this machine's own network namespace: the controller (ansible-playbook, run by ansible-runner in this
  process's namespace) reaches each host through ``ProxyCommand ip netns exec CTL busybox nc %h %p``,
  i.e. from inside the controller namespace. h1 and h2 sweep a tiny embedded-lab profile (each its own
  profile name, so their DPDK file prefixes differ, and its own LABCTL_STATE_DIR/RUN_DIR/LOG_DIR, since
  the namespaces share this filesystem); h3 is given a profile that fails validation there; h4's sshd
  is never started (unreachable).
* ci.yml, the CI job: test_fleet_ci.py, which shares this module's helpers.
* the runner job itself: a cancel stops it, and a playbook that cannot run is a lab fault.

Everything made here (namespaces, veths, sshd processes, ssh control masters, keys, temporary
directories, the mount, the hugepages) is removed by finalizers, also when a test fails
(LABCTL_KEEP_TEST_DIRS=1 keeps the directories for a look).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml

from labctl.fleet import HostEvent, prepare, sweep
from labctl.fleet.events import EventLog
from labctl.fleet.run import run_playbook
from labctl.results.store import Store
from tests.conftest import ROOT
from tests.integration.conftest import needs_dpdk

pytestmark = [
    needs_dpdk,
    pytest.mark.skipif(shutil.which("ansible-playbook") is None
                       and not (Path(sys.executable).parent / "ansible-playbook").exists(),
                       reason="ansible-core is not installed"),
]
needs_sshd = pytest.mark.skipif(not Path("/usr/sbin/sshd").exists() or shutil.which("busybox") is None,
                                reason="needs openssh-server and busybox (scripts/apt-packages.txt)")

LABCTL = [sys.executable, "-m", "labctl.cli"]  # this checkout's labctl (cwd first on sys.path)
POOL = Path("/proc/sys/vm/nr_hugepages")


def run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=60)


def private_dir(prefix: str, request) -> Path:
    """A temporary directory removed at the end (unless LABCTL_KEEP_TEST_DIRS is set)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if not os.environ.get("LABCTL_KEEP_TEST_DIRS"):
        request.addfinalizer(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def tiny_profile(path: Path, name: str, rx_ring: int = 256) -> Path:
    """quick.yaml cut down: 1 s windows, no warm-up, no hugepages, 2 configurations, 1 repeat."""
    data = yaml.safe_load((ROOT / "domains" / "quick.yaml").read_text())
    data["name"] = name
    data["guest"]["hugepages"] = False
    for nic in data["guest"]["nics"]:
        nic["rx_queue_size"] = rx_ring
    data["workload"].update(duration_s=1, warmup_s=0)
    data["sweep"] = {"guest.nics.*.rx_queue_size": [256, 1024]}
    data["repeat"] = 1
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def local_connection(base: Path) -> dict:
    """Host variables for this machine as a host; modules' temporary files stay under ``base`` (a
    cancelled job leaves them behind)."""
    return {"ansible_connection": "local", "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_remote_tmp": str(base / "ansible-tmp")}


def _pool() -> int:
    return int(POOL.read_text())


def _daemons() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] in ("virtlogd", "libvirtd")}


# --- lab-host.yml, locally ------------------------------------------------------------------------------


@pytest.fixture
def local_host(request):
    """An inventory of this machine (local connection) with everything lab-host.yml changes pointed at
    a temporary directory; afterwards the mount is gone and the pages the playbook added are given back.

    Other labs on this machine reserve and give back hugepages while this runs (each adds and removes
    its own share), so the playbook asks for a pool of at least 2 pages and the test gives back what the
    playbook reports it added, never a pool size it read earlier."""
    base = private_dir("labctl-fleet-local-", request)
    before_daemons = _daemons()
    mount = base / "hugepages"
    fstab = base / "fstab"
    fstab.write_text("# test fstab\n")
    inventory = base / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"local": {
        **local_connection(base),
        "labctl_home": str(base / "home"), "labctl_hugepages": 2,
        "labctl_hugetlbfs": str(mount), "labctl_fstab": str(fstab),
        "labctl_sysctl_file": str(base / "sysctl.d-60-labctl.conf")}}}}))

    def restore() -> None:
        if os.path.ismount(mount):
            run(["umount", str(mount)], check=False)
        added = _added_pages(base / "fleet")
        if added and _pool() >= added:  # give back exactly what the playbook added
            POOL.write_text(f"{_pool() - added}\n")
        for pid in _daemons() - before_daemons:  # only daemons this test started
            psutil.Process(pid).terminate()

    request.addfinalizer(restore)
    return {"base": base, "inventory": inventory, "mount": mount, "fstab": fstab}


def _added_pages(data_dir: Path) -> int:
    """The pages the first lab-host run added to the pool, from its recorded events (its
    labctl_hugepage_pool fact): known even when the test failed after that run."""
    runs = sorted(data_dir.glob("*-prepare-*"))  # named by their start time
    if not runs:
        return 0
    log = EventLog()
    events = [json.loads(path.read_text()) for path in runs[0].glob("artifacts/*/job_events/*.json")]
    for event in sorted(events, key=lambda e: e.get("counter", 0)):
        log(event)
    pool = log.facts.get("local", {}).get("labctl_hugepage_pool") or {}
    return max(int(pool.get("after", 0)) - int(pool.get("before", 0)), 0)


def test_lab_host_twice_second_run_changes_nothing(local_host):
    base = local_host["base"]
    steps: list[HostEvent] = []
    first = prepare(local_host["inventory"], data_dir=base / "fleet", on_event=steps.append)
    (host,) = first.hosts
    pool = host.facts["labctl_hugepage_pool"]
    assert host.status == "ok", host.reason
    assert host.stats.changed > 0
    assert {s.state for s in steps if s.task == "pip install the wheel"} == {"started", "changed"}

    second = prepare(local_host["inventory"], data_dir=base / "fleet")
    (again,) = second.hosts
    assert again.status == "ok", again.reason
    assert again.stats.changed == 0, f"second run changed {again.stats.changed} (see {second.data_dir})"

    # what the first run did is in place
    assert pool["wanted"] == 2 and pool["after"] >= 2
    assert again.facts["labctl_hugepage_pool"]["before"] >= 2  # so the second run raised nothing
    assert os.path.ismount(local_host["mount"])
    assert f"nodev {local_host['mount']} hugetlbfs pagesize=2M 0 0" in local_host["fstab"].read_text()
    assert "vm.nr_hugepages = 2" in (base / "sysctl.d-60-labctl.conf").read_text()
    labctl = base / "home" / "venv" / "bin" / "labctl"
    built = json.loads(run([str(labctl), "image", "build", "--json"]).stdout)  # installed, appliance cached
    # installed from the package built on the controller: no tree on the host, labgen inside the package,
    # the commit recorded at build time
    wheels = list((base / "home").glob("labctl-*.whl"))
    assert len(wheels) == 1 and not (base / "home" / "src").exists()
    python = base / "home" / "venv" / "bin" / "python"
    found = run([str(python), "-I", "-c", "from labctl import native; print(native.labgen_path())"]).stdout.strip()
    assert found.startswith(str(base / "home" / "venv" / "lib")) and found.endswith("/labctl/_shipped/bin/labgen")
    commit = run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--tags"]).stdout.strip()
    assert run([str(labctl), "--version"]).stdout.strip() == f"labctl 0.1.0 (commit {commit}, package)"
    assert Path(built["kernel"]).exists() and not built["built"]
    # the kernel arguments are a plan, not applied
    plan = again.facts["labctl_kernel_plan"]
    assert plan["applied"] is False
    assert "hugepagesz=2M" in plan["wanted"] and set(plan["missing"]) <= set(plan["wanted"])
    assert "hugepages=2" not in Path("/proc/cmdline").read_text().split()


# --- sweep.yml across network namespaces ------------------------------------------------------------


class NetnsHosts:
    """Test hosts: network namespaces with their own sshd, reachable only from a controller namespace.

    Every name carries a random tag (other people's namespaces and labs on this machine are never
    touched). Host i is 10.251.i.2/30 on its ``eth0``; the controller namespace holds the other end
    of each veth pair, ``c<i>``, at 10.251.i.1/30. The veth pairs are created directly inside the
    namespaces (``ip link add ... netns A type veth peer ... netns B``): no interface ever appears in
    this machine's own namespace, and deleting a namespace deletes its veths.
    """

    def __init__(self, base: Path):
        self.base = base
        self.tag = secrets.token_hex(3)
        self.ctl = f"labctl-fleet-{self.tag}-ctl"
        self.namespaces: list[str] = []
        self.sshd: list[subprocess.Popen] = []
        self.hosts: dict[str, str] = {}  # name -> address
        self.control = Path(tempfile.mkdtemp(prefix="lfl-cp-"))  # short: ssh control sockets live here
        self.made_privsep = False
        self.key = base / "client_key"
        self.known_hosts = base / "known_hosts"
        self.authorized = base / "authorized_keys"

    def start(self) -> None:
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"labctl-fleet-{self.tag}", "-f", str(self.key)])
        self.authorized.write_text(Path(f"{self.key}.pub").read_text())
        self.known_hosts.write_text("")
        if not Path("/run/sshd").exists():  # sshd's privilege separation directory
            Path("/run/sshd").mkdir(mode=0o755)
            self.made_privsep = True
        self._netns(self.ctl)

    def _netns(self, name: str) -> None:
        run(["ip", "netns", "add", name])
        self.namespaces.append(name)
        run(["ip", "-n", name, "link", "set", "lo", "up"])

    def add(self, name: str, sshd: bool = True) -> str:
        index = len(self.hosts) + 1
        ns, address = f"labctl-fleet-{self.tag}-{name}", f"10.251.{index}.2"
        self._netns(ns)
        run(["ip", "link", "add", "name", f"c{index}", "netns", self.ctl, "type", "veth",
             "peer", "name", "eth0", "netns", ns])
        run(["ip", "-n", self.ctl, "addr", "add", f"10.251.{index}.1/30", "dev", f"c{index}"])
        run(["ip", "-n", self.ctl, "link", "set", f"c{index}", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{address}/30", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        here = self.base / name
        here.mkdir()
        key = here / "host_key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{name}-{self.tag}", "-f", str(key)])
        with open(self.known_hosts, "a") as handle:
            handle.write(f"{address} {Path(f'{key}.pub').read_text()}")
        config = here / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {address}:22", f"HostKey {key}", "PidFile none",
            f"AuthorizedKeysFile {self.authorized}", "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "UsePAM no", "StrictModes no",  # the key files sit in a temporary directory under /tmp
            "Subsystem sftp internal-sftp", "PrintMotd no", ""]))
        if sshd:
            self.sshd.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "/usr/sbin/sshd", "-D", "-f", str(config), "-E", str(here / "sshd.log")],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.hosts[name] = address
        return address

    def ssh_args(self) -> str:
        return (f"-o ProxyCommand='ip netns exec {self.ctl} busybox nc %h %p' -o UserKnownHostsFile={self.known_hosts} "
                "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o ConnectTimeout=10")

    def wait_ready(self, name: str, timeout_s: float = 15.0) -> None:
        argv = ["ssh", "-F", "/dev/null", "-i", str(self.key), "-o", "BatchMode=yes",
                "-o", f"ProxyCommand=ip netns exec {self.ctl} busybox nc %h %p",
                "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes",
                f"root@{self.hosts[name]}", "true"]
        deadline = time.monotonic() + timeout_s
        while True:
            probe = run(argv, check=False)
            if probe.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"sshd of {name} did not answer: {probe.stderr.strip()}")
            time.sleep(0.2)

    def close(self) -> None:
        for sock in self.control.iterdir() if self.control.exists() else []:  # ansible's ControlPersist masters
            run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "labctl-fleet-test"], check=False)
        for proc in self.sshd:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "delete", ns], check=False)
        if self.made_privsep:
            try:
                Path("/run/sshd").rmdir()
            except OSError:
                pass
        shutil.rmtree(self.control, ignore_errors=True)


@pytest.fixture(scope="module")
def netns_hosts(request):
    base = private_dir("labctl-fleet-netns-", request)
    hosts = NetnsHosts(base)
    request.addfinalizer(hosts.close)
    hosts.start()
    for name in ("h1", "h2", "h3"):
        hosts.add(name)
    hosts.add("h4", sshd=False)  # unreachable: nothing listens there
    for name in ("h1", "h2", "h3"):
        hosts.wait_ready(name)
    return hosts


def fleet_inventory(hosts: NetnsHosts, base: Path) -> tuple[Path, Path]:
    """(inventory, the default profile): h1 sweeps the default profile, h2 its own, h3 a bad one."""
    default = tiny_profile(base / "fleet-a.yaml", f"fleet-{hosts.tag}-a")
    other = tiny_profile(base / "fleet-b.yaml", f"fleet-{hosts.tag}-b")
    bad = tiny_profile(base / "fleet-bad.yaml", f"fleet-{hosts.tag}-bad", rx_ring=300)

    def dirs(name: str) -> dict:
        return {f"LABCTL_{kind}_DIR": str(base / name / kind.lower()) for kind in ("STATE", "RUN", "LOG")}

    host_vars = {name: {"ansible_host": address, "labctl_env": dirs(name)} for name, address in hosts.hosts.items()}
    host_vars["h2"]["labctl_profile"] = str(other)
    host_vars["h3"]["labctl_profile"] = str(bad)
    inventory = base / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": host_vars, "vars": {
        "ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_ssh_private_key_file": str(hosts.key), "ansible_ssh_common_args": hosts.ssh_args(),
        "ansible_control_path_dir": str(hosts.control), "ansible_remote_tmp": str(base / "ansible-tmp"),
        "labctl_exe": LABCTL, "labctl_chdir": str(ROOT), "labctl_work": str(base / "work")}}}))
    return inventory, default


def _sweep_window(data_dir: Path, host: str) -> tuple[float, float]:
    """When the ``labctl sweep`` task ran on ``host``, from the runner's job events."""
    from datetime import datetime

    for path in data_dir.glob("artifacts/*/job_events/*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_ok" and data.get("host") == host and data.get("task") == "labctl sweep":
            return datetime.fromisoformat(data["start"]).timestamp(), datetime.fromisoformat(data["end"]).timestamp()
    raise AssertionError(f"no labctl sweep on {host} in {data_dir}")


@needs_sshd
def test_sweep_across_namespaces_merges_good_hosts_and_reports_the_others(netns_hosts, request):
    base = private_dir("labctl-fleet-sweep-", request)
    inventory, profile = fleet_inventory(netns_hosts, base)
    db = base / "fleet.db"
    steps: list[HostEvent] = []
    run = sweep(profile, inventory, db, data_dir=base / "fleet", on_event=steps.append)
    by = {h.host: h for h in run.hosts}
    assert set(by) == {"h1", "h2", "h3", "h4"}

    # the good hosts: ok, their JSONL fetched, their trials merged with their inventory names
    for name in ("h1", "h2"):
        assert by[name].status == "ok", by[name].reason
        assert by[name].stats.failures == 0 and by[name].stats.unreachable == 0
        assert by[name].jsonl is not None and by[name].jsonl.is_file()
    assert {m.host: (m.trials, m.renamed_from) for m in run.merged} == {"h1": (2, ()), "h2": (2, ())}
    with Store(db) as store:
        trials = store.trials(None, status=None)
        hosts = {run_["id"]: run_["host"] for run_ in store.runs()}
    assert sorted(t.env.host for t in trials) == ["h1", "h1", "h2", "h2"]
    assert all(t.status == "ok" for t in trials)
    assert {t.config["name"] for t in trials} == {f"fleet-{netns_hosts.tag}-a", f"fleet-{netns_hosts.tag}-b"}
    assert sorted(hosts.values()) == ["h1", "h2"]

    # the failed host: its reason is the failed task and labctl's own message
    assert by["h3"].status == "failed"
    assert by["h3"].reason.startswith("labctl sweep: ") and "300 is not allowed" in by["h3"].reason
    assert "(exit 2)" in by["h3"].reason
    assert "300 is not allowed" in (by["h3"].artifacts / "labctl.log").read_text()
    # the unreachable one
    assert by["h4"].status == "unreachable" and by["h4"].stats.unreachable == 1
    assert by["h4"].reason.startswith("unreachable at ") and "ssh" in by["h4"].reason

    # progress came per host from the runner's events; the two sweeps overlapped in time
    assert {(s.host, s.state) for s in steps if s.task == "labctl sweep"} >= {
        ("h1", "started"), ("h1", "changed"), ("h2", "started"), ("h2", "changed"), ("h3", "failed")}
    assert any(s.host == "h4" and s.state == "unreachable" for s in steps)
    (a0, a1), (b0, b1) = _sweep_window(run.data_dir, "h1"), _sweep_window(run.data_dir, "h2")
    assert a0 < b1 and b0 < a1, "the hosts swept one after the other"
    # nothing of the test labs is left running
    assert not [p for p in psutil.process_iter(["cmdline"]) if "dpdk-testpmd" in " ".join((p.info["cmdline"] or [])[:4])
                and any(f"fleet-{netns_hosts.tag}-" in part for part in p.info["cmdline"])]


@needs_sshd
def test_fleet_cli_sweep_json_and_exit_1(netns_hosts, request):
    from typer.testing import CliRunner

    from labctl.cli.fleet import fleet_app

    base = private_dir("labctl-fleet-cli-", request)
    inventory, profile = fleet_inventory(netns_hosts, base)
    result = CliRunner().invoke(fleet_app, ["sweep", str(profile), "-i", str(inventory), "--db", str(base / "f.db"),
                                            "--data-dir", str(base / "fleet"), "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    status = {h["host"]: h["status"] for h in doc["hosts"]}
    assert status == {"h1": "ok", "h2": "ok", "h3": "failed", "h4": "unreachable"}
    assert {h["host"]: set(h["stats"]) for h in doc["hosts"]}["h1"] >= {"ok", "changed", "unreachable",
                                                                        "failures", "skipped"}
    assert sorted(m["host"] for m in doc["merged"]) == ["h1", "h2"]


# --- the runner job itself: cancel, and a playbook that cannot run -------------------------------------


def _local_inventory(base: Path) -> Path:
    inventory = base / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"here": local_connection(base)}}}))
    return inventory


#: a command that never ends by itself (GNU sleep adds its arguments: infinity); the odd second argument
#: is no one else's, so the test finds these processes by their command line
ENDLESS = ["sleep", "infinity", "67.25"]


def _endless_pids() -> list[int]:
    return [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ENDLESS]


@pytest.mark.timeout(300)  # a job that ran its endless command instead of stopping fails here, not in CI's limit
def test_a_cancel_stops_the_job_and_a_failing_callback_is_raised(request):
    """The cancel comes while the task's command runs (its pid seen first); that command never ends by
    itself, so the job returning and the command gone are the cancel's doing."""
    import threading

    from labctl import signals
    from labctl.errors import Cancelled

    base = private_dir("labctl-fleet-cancel-", request)
    playbook = base / "slow.yml"
    playbook.write_text(yaml.safe_dump([{"name": "slow", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "wait", "ansible.builtin.command": {"argv": ENDLESS}}]}]))
    inventory = _local_inventory(base)

    scope = signals.CancelScope()
    running: list[int] = []

    def cancel_once_running() -> None:
        for _ in range(1200):  # the command shows within seconds; without it the cancel comes anyway
            running.extend(_endless_pids())
            if running:
                break
            time.sleep(0.1)
        scope.cancel()

    def cancel_when_waiting(step: HostEvent) -> None:
        if step.task == "wait" and step.state == "started":
            threading.Thread(target=cancel_once_running, daemon=True).start()

    with pytest.raises(Cancelled), signals.stoppable(scope):
        run_playbook("test", playbook, inventory, {}, data_dir=base / "fleet", on_event=cancel_when_waiting)
    assert len(running) == 1  # the cancel came while the command ran
    # ansible-core 2.19's task workers run in sessions of their own: the job's cancel alone leaves them
    # (and the command) running; run_playbook stops them
    assert not psutil.pid_exists(running[0]) or psutil.Process(running[0]).status() == psutil.STATUS_ZOMBIE

    def broken(step: HostEvent) -> None:
        raise ValueError("the face broke")

    with pytest.raises(ValueError, match="the face broke"):
        run_playbook("test", playbook, inventory, {}, data_dir=base / "fleet", on_event=broken)
    assert _endless_pids() == []


def test_a_playbook_that_cannot_run_is_a_lab_fault(request):
    from labctl.errors import LabFault

    base = private_dir("labctl-fleet-broken-", request)
    playbook = base / "broken.yml"
    playbook.write_text("- hosts: all\n  tasks:\n    - ansible.builtin.no_such_module: {}\n")
    with pytest.raises(LabFault, match=r"^broken.yml did not run \(ansible-playbook exit 4"):
        run_playbook("test", playbook, _local_inventory(base), {}, data_dir=base / "fleet")
