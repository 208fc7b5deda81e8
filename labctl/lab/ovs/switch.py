"""One private OVS-DPDK instance: its own DB, ovsdb-server, ovs-vswitchd-dpdk, netdev bridge and ports.

Every file, process and directory is recorded in the lab's state *before* it is created, so
``labctl.lab.ledger.teardown(state)`` removes all of it on any exit path, including after a kill -9
of labctl (the next teardown of the same state). ovs-vswitchd runs in a network namespace of its own,
so its taps never appear on the host and go with it. :meth:`OvsSwitch.stop` is the graceful half (the
daemons exit); teardown removes the rest, as after testpmd's ``quit()``.

There is no ``dpdk`` resource (the ledger's scan for processes started with ``--file-prefix P``): OVS
reads its prefix from the DB, so no command line carries it and the scan could not find ovs-vswitchd.
The window between starting a daemon and recording its pid is closed by a gate instead (``_GATE``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.dpdk.telemetry import RUNTIME_ROOT
from labctl.errors import KnobError, PlanError, WorkloadError
from labctl.host.cpuset import online_cpus, parse_cpuset
from labctl.owner import process_started
from labctl.host.sockets import unix_listening
from labctl.lab.builds import resolve
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import LabState
from labctl.lab.ovs import commands as cmd
from labctl.lab.ovs import stats
from labctl.profile.schema import Profile

DAEMONS = ("ovsdb-server", "ovs-vswitchd")
START_TIMEOUT_S = 60.0
PROGRAMS = (cmd.OVSDB_TOOL, cmd.OVSDB_SERVER, cmd.UNSHARE, cmd.VSWITCHD, cmd.VSCTL, cmd.APPCTL, cmd.OFCTL)

# Starts a daemon only once labctl has recorded its pid: the gate process is the daemon's pid (exec
# keeps pid and start time). If labctl dies before saying "g", stdin reaches EOF and the gate exits
# instead, so no daemon ever runs unrecorded.
_GATE = ("import os,sys\n"
         "if os.read(0,1)!=b'g':os._exit(1)\n"
         "n=os.open(os.devnull,os.O_RDONLY);os.dup2(n,0);os.close(n)\n"
         "os.execv(sys.argv[1],sys.argv[1:])\n")

_KNOB_CHECKS: dict[str, Callable[[Any], bool]] = {
    "tx_flush_interval": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 1_000_000,
    "emc_insert_inv_prob": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**32,
    "smc_enable": lambda v: isinstance(v, bool),
    "pmd_rxq_assign": lambda v: v in ("cycles", "group", "roundrobin"),
}


def default_lcores(pmd_cpus: frozenset[int] | None) -> frozenset[int]:
    """DPDK's non-PMD lcore: the lowest online CPU that no PMD polls (else the lowest online CPU)."""
    online = online_cpus()
    free = online - (pmd_cpus or frozenset())
    return frozenset({min(free or online)})


def pmd_cpus_of(profile: Profile) -> frozenset[int] | None:
    """The profile's vhost pinning: one OVS PMD thread per CPU of ``guest.pinning.vhost``."""
    vhost = profile.guest.pinning.vhost
    return parse_cpuset(vhost) if vhost is not None else None


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise WorkloadError(f"{name} is not installed (make setup installs Debian's openvswitch-switch-dpdk)")
    return path


def _tail(*logs: Path, lines: int = 2) -> str:
    """The last error lines of OVS's logs, as one line (vlog's time and sequence fields dropped)."""
    found: list[str] = []
    for log in logs:
        with contextlib.suppress(OSError):
            found += [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    for levels in (("|EMER|", "|ERR|"), ("|WARN|",), ("",)):
        picked = [ln for ln in found if any(level in ln for level in levels)]
        if picked:
            return " / ".join(ln.split("|", 2)[-1].strip() for ln in picked[-lines:])
    return "no log output"


class OvsSwitch:
    """labctl's own OVS-DPDK, never the host's system instance and never a host PCI device."""

    def __init__(self, name: str, state: LabState, run_dir: Path, log_dir: Path,
                 pmd_cpus: frozenset[int] | None, hugepages_mount: Path,
                 socket_mem_mb: int = cmd.DEFAULT_SOCKET_MEM_MB, lcore_cpus: frozenset[int] | None = None,
                 vswitchd: str = cmd.VSWITCHD, vswitchd_env: dict[str, str] | None = None):
        """``vswitchd``/``vswitchd_env``: the ovs-vswitchd to run and the variables only its process gets (a
        build's, :func:`labctl.lab.builds.resolve`; by default Debian's DPDK build)."""
        online = online_cpus()
        for cpus, what in ((pmd_cpus, "PMD"), (lcore_cpus, "lcore")):
            if cpus is not None and not cpus <= online:
                raise PlanError(f"OVS {what} CPUs {sorted(cpus)} are not all online (online: {sorted(online)})")
        self.state = state
        self.config = cmd.OvsConfig(name=name, paths=cmd.OvsPaths.of(run_dir, name, log_dir),
                                    hugepages_dir=hugepages_mount, pmd_cpus=pmd_cpus,
                                    lcore_cpus=lcore_cpus or default_lcores(pmd_cpus), socket_mem_mb=socket_mem_mb)
        self.ports: dict[str, int] = {}  # port -> rx queues its guest side was given
        self._procs: dict[str, subprocess.Popen] = {}
        self._baseline: dict[str, dict[str, int]] | None = None
        self._env = {**os.environ, **self.config.env()}
        self.vswitchd = vswitchd
        self._vswitchd_env = {**self._env, **(vswitchd_env or {})}

    @property
    def paths(self) -> cmd.OvsPaths:
        return self.config.paths

    @property
    def bridge(self) -> str:
        return self.config.bridge

    @property
    def memory_mb(self) -> int:
        """Hugepage memory it takes: dpdk-socket-mem, capped at the same by dpdk-socket-limit."""
        return self.config.socket_mem_mb

    def pid(self, daemon: str) -> int | None:
        proc = self._procs.get(daemon)
        return proc.pid if proc else None

    # ---- running commands -------------------------------------------------------------------

    def _logs(self) -> tuple[Path, ...]:
        return tuple(p for d in DAEMONS for p in (self.paths.log(d), self.paths.console(d)))

    def _run(self, argv: list[str], timeout_s: float = cmd.VSCTL_TIMEOUT_S + 5, stoppable: bool = True) -> str:
        """Run one OVS client command; ``stoppable=False`` for clean-up, which a stop must not cut short."""
        if stoppable:
            signals.checkpoint()
        what = " ".join(argv[:1] + [a for a in argv[1:] if not a.startswith("-")][:2])
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=self._env,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            _binary(argv[0])
            raise
        except subprocess.TimeoutExpired:
            raise WorkloadError(f"{what} did not answer within {timeout_s:.0f} s: {_tail(*self._logs())}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise WorkloadError(f"{what} failed: {said[-1] if said else f'exit code {done.returncode}'} "
                                f"(OVS log: {_tail(*self._logs())})")
        return done.stdout

    def _launch(self, daemon: str, argv: list[str]) -> None:
        binary = _binary(argv[0])
        self.paths.log(daemon).write_text("", encoding="utf-8")  # OVS appends: keep only this run's lines
        with open(self.paths.console(daemon), "w", encoding="utf-8") as console:
            proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _GATE, binary, *argv[1:]],
                                    stdin=subprocess.PIPE, stdout=console, stderr=subprocess.STDOUT,
                                    env=self._vswitchd_env if daemon == "ovs-vswitchd" else self._env, cwd=self.paths.root, start_new_session=True)
        self._procs[daemon] = proc
        try:
            self.state.record("process", str(proc.pid), role=daemon, started=process_started(proc.pid))
        except BaseException:
            proc.kill()  # still the gate: the daemon never ran
            raise
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(b"g")
            proc.stdin.close()

    def _wait(self, daemon: str, what: str, ready: Callable[[], bool], timeout_s: float) -> None:
        """Poll ``ready`` until true; a daemon that exits or a timeout is one WorkloadError with its log's tail."""
        deadline = time.monotonic() + timeout_s
        log = self.paths.log(daemon)
        while not ready():
            proc = self._procs[daemon]
            if proc.poll() is None and time.monotonic() <= deadline:
                signals.sleep(0.05)
                continue
            how = (f"exited with code {proc.returncode} before" if proc.returncode is not None
                   else f"gave no sign within {timeout_s:.0f} s that")
            raise WorkloadError(f"{daemon} {how} {what}: {_tail(log, self.paths.console(daemon))} (log {log})")

    def _dpdk_initialized(self) -> bool:
        out = self._run(cmd.vsctl(self.paths, "get", "Open_vSwitch", ".", "dpdk_initialized", wait=False))
        return out.strip() == "true"

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self, timeout_s: float = START_TIMEOUT_S) -> "OvsSwitch":
        """Private DB, ovsdb-server, ovs-vswitchd-dpdk (DPDK initialised), and the netdev bridge."""
        paths, record = self.paths, self.state.record
        for program in PROGRAMS:
            _binary(program)
        record("dir", str(paths.root))
        paths.root.mkdir(parents=True, exist_ok=True)
        paths.log_dir.mkdir(parents=True, exist_ok=True)
        if reserve(self.state, self.config.hugepages_dir, self.memory_mb) is None:
            raise WorkloadError(f"OVS-DPDK needs {self.memory_mb} MB of 2 MiB hugepages and they could not be "
                                "reserved (it cannot run with --no-huge: OVS adds --in-memory)")
        for path in (paths.db, paths.db_lock, paths.db_socket, paths.ctl("ovsdb-server"), paths.pidfile("ovsdb-server")):
            record("path", str(path))
            path.unlink(missing_ok=True)
        self._run(cmd.ovsdb_create(paths))
        self._launch("ovsdb-server", cmd.ovsdb_server(paths))
        self._wait("ovsdb-server", f"it listened on {paths.db_socket.name}",
                   lambda: unix_listening(paths.db_socket), timeout_s)
        self._run(cmd.init_dpdk(self.config))
        record("dir", str(RUNTIME_ROOT / self.config.file_prefix))
        for path in (paths.ctl("ovs-vswitchd"), paths.pidfile("ovs-vswitchd"), paths.mgmt(self.bridge),
                     paths.snoop(self.bridge)):
            record("path", str(path))
        self._launch("ovs-vswitchd", cmd.vswitchd(paths, self.vswitchd))
        self._wait("ovs-vswitchd", "DPDK was initialised", self._dpdk_initialized, timeout_s)
        self._run(cmd.add_bridge(self.config))
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        """Ask ovs-vswitchd, then ovsdb-server, to exit; kill what does not. Never cut short by a stop
        request (it is what runs after one). Files and directories are left to ``teardown(state)``."""
        for daemon in reversed(DAEMONS):
            proc = self._procs.get(daemon)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(WorkloadError):
                self._run(cmd.exit_daemon(self.paths, daemon), timeout_s, stoppable=False)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    # ---- ports and flows --------------------------------------------------------------------

    def add_vhostuser_client(self, port: str, socket_path: Path, n_rxq: int = 1) -> None:
        """A ``dpdkvhostuserclient`` port connecting to ``socket_path`` (the guest side listens there).

        OVS takes the port's queue count from the virtio device when it connects (vhost-user ports do
        not support ``options:n_rxq``): ``n_rxq`` is the count the guest side was given, which
        :meth:`wait_connected` then checks OVS polls, and which bounds pmd-rxq-affinity's queue ids."""
        if not port or any(c in port for c in "/\\ ") or port == self.bridge:
            raise WorkloadError(f"bad OVS port name {port!r}")
        if len(str(socket_path)) > cmd.UNIX_PATH_MAX:
            raise WorkloadError(f"vhost-user socket path too long for a unix socket ({len(str(socket_path))} > "
                                f"{cmd.UNIX_PATH_MAX}): {socket_path}")
        if n_rxq < 1:
            raise WorkloadError(f"port {port}: n_rxq must be at least 1 (got {n_rxq})")
        self.state.record("path", str(socket_path))  # the guest side makes it; a guest killed -9 leaves it
        self._run(cmd.add_vhostuser_client(self.paths, self.bridge, port, socket_path))
        self.ports[port] = n_rxq

    def _known(self, *ports: str) -> None:
        for port in ports:
            if port not in self.ports:
                raise WorkloadError(f"OVS bridge {self.bridge} has no port {port!r} (ports: {sorted(self.ports)})")

    def flow(self, in_port: str, out_port: str) -> None:
        """One direction: everything received on ``in_port`` is sent out of ``out_port``."""
        self._known(in_port, out_port)
        self._run(cmd.add_flow(self.paths, self.bridge, in_port, out_port))

    def connect(self, a: str, b: str) -> None:
        """Port-to-port flows both ways (install them before traffic starts: a looped --tx-first burst
        that meets a bridge without flows is dropped and never comes back)."""
        self.flow(a, b)
        self.flow(b, a)

    def wait_connected(self, timeout_s: float = 30.0, ports: list[str] | None = None) -> dict[str, list[int]]:
        """Wait until every port's (``ports``: these ports') vhost-user connection is up and OVS polls the
        ``n_rxq`` rx queues each port was given (a guest's queues are enabled once its driver set them
        up); returns the enabled queue ids per port."""
        enabled: dict[str, list[int]] = {}
        wanted = {p: n for p, n in self.ports.items() if ports is None or p in ports}

        def ready() -> bool:
            interfaces = stats.parse_interfaces(self._run(cmd.interfaces_json(self.paths)))
            if any(interfaces.get(p, {}).get("status", {}).get("status") != "connected" for p in wanted):
                return False
            placement = stats.parse_pmd_rxq(self._run(cmd.pmd_rxq_show(self.paths)))
            enabled.clear()
            for pmd in placement["pmds"].values():
                for rxq in pmd["rxqs"]:
                    if rxq["enabled"]:
                        enabled.setdefault(rxq["port"], []).append(rxq["queue"])
            return all(len(enabled.get(p, [])) == n for p, n in wanted.items())

        self._wait("ovs-vswitchd", f"ports {', '.join(wanted)} were connected", ready, timeout_s)
        return {p: sorted(q) for p, q in enabled.items()}

    # ---- knobs ------------------------------------------------------------------------------

    def configure(self, **knobs: Any) -> None:
        """Set OVS knobs in one transaction; a value of None restores OVS's default.

        ``tx_flush_interval`` (µs, 0..1000000), ``emc_insert_inv_prob`` (0 disables the EMC),
        ``smc_enable`` (bool), ``pmd_rxq_assign`` (cycles | group | roundrobin), and
        ``pmd_rxq_affinity``: ``{port: {queue: cpu}}`` (a port given None or {} is unpinned)."""
        global_values: dict[str, object | None] = {}
        port_values: dict[str, dict[str, object | None]] = {}
        for knob, value in knobs.items():
            if knob == "pmd_rxq_affinity":
                for port, pins in dict(value or {}).items():
                    port_values[port] = {cmd.PORT_KNOBS[knob]: self._affinity(port, pins)}
            elif knob in cmd.GLOBAL_KNOBS:
                if value is not None and not _KNOB_CHECKS[knob](value):
                    raise KnobError(f"OVS knob {knob}: {value!r} is not allowed")
                global_values[cmd.GLOBAL_KNOBS[knob]] = value
            else:
                raise KnobError(f"unknown OVS knob {knob!r} (known: {sorted([*cmd.GLOBAL_KNOBS, *cmd.PORT_KNOBS])})")
        if global_values or port_values:
            self._run(cmd.configure(self.paths, global_values, port_values))

    def _affinity(self, port: str, pins: dict[int, int] | None) -> str | None:
        self._known(port)
        if not pins:
            return None
        for queue, cpu in pins.items():
            if not 0 <= queue < self.ports[port]:
                raise KnobError(f"pmd_rxq_affinity: port {port} has rx queues 0..{self.ports[port] - 1}, not {queue}")
            if self.config.pmd_cpus is not None and cpu not in self.config.pmd_cpus:
                # OVS would quietly give the queue to some non-isolated PMD instead
                raise KnobError(f"pmd_rxq_affinity: CPU {cpu} runs no PMD (PMD CPUs: {sorted(self.config.pmd_cpus)})")
        return cmd.affinity_value(pins)

    # ---- live changes (labctl reconf: labctl.measure.live_changes) ---------------------------------

    def move_pmds(self, cpus: frozenset[int], timeout_s: float = 30.0) -> dict[str, Any]:
        """``other_config:pmd-cpu-mask`` set on the running switch: OVS starts PMD threads on the new cores,
        ends the others and assigns every rx queue again (OVS "PMD Threads" documentation). Returns once the
        PMDs polling are exactly ``cpus`` and every port's queues are polled again: the placement then."""
        online = online_cpus()
        if not cpus or not cpus <= online:
            raise KnobError(f"pmd-cpu-mask: CPUs {sorted(cpus)} are not all online (online: {sorted(online)})")
        self._run(cmd.vsctl(self.paths, *cmd.set_record("Open_vSwitch", ".", "other_config",
                                                        {"pmd-cpu-mask": cmd.cpu_mask(cpus)})))
        self.config = replace(self.config, pmd_cpus=frozenset(cpus))
        wanted = {str(cpu) for cpu in cpus}
        placement: dict[str, Any] = {}

        def moved() -> bool:
            placement.update(self.pmd_placement())
            polled = {(q["port"], q["queue"]) for pmd in placement["pmds"].values() for q in pmd["rxqs"]}
            return set(placement["pmds"]) == wanted and all((p, q) in polled for p, n in self.ports.items()
                                                                for q in range(n))

        self._wait("ovs-vswitchd", f"PMDs on CPUs {sorted(cpus)} polling every port", moved, timeout_s)
        return placement

    def rebalance(self) -> dict[str, Any]:
        """``dpif-netdev/pmd-rxq-rebalance``: OVS assigns the rx queues to its PMDs again now, by their
        measured load (pmd-rxq-assign); returns the placement after it."""
        self._run(cmd.appctl(self.paths, "ovs-vswitchd", "dpif-netdev/pmd-rxq-rebalance"))
        return self.pmd_placement()

    def pmd_placement(self) -> dict[str, Any]:
        """Which PMD (by core id) polls which rx queue now (``dpif-netdev/pmd-rxq-show``)."""
        return stats.parse_pmd_rxq(self._run(cmd.pmd_rxq_show(self.paths)))

    # ---- statistics -------------------------------------------------------------------------

    def _live_counters(self) -> dict[str, dict[str, int]]:
        counters = stats.parse_dump_ports(self._run(cmd.dump_ports(self.paths, self.bridge)))
        return {p: counters.get(p, {}) for p in self.ports}

    def clear_stats(self) -> None:
        """Start a measurement window: zero the PMD counters and take the port counters' baseline."""
        self._run(cmd.pmd_stats_clear(self.paths))
        self._baseline = self._live_counters()

    def pmd_stats(self, rxq_secs: int | None = None) -> dict[str, Any]:
        """Per PMD (by core id): packets, idle/processing cycles and share, cycles per packet, and the
        rx queues it polls with their usage % over the last ``rxq_secs`` (5..60 s; OVS default 60; None
        until OVS has a full interval of history)."""
        if rxq_secs is not None and (rxq_secs % 5 or not 5 <= rxq_secs <= 60):
            raise WorkloadError(f"pmd-rxq-show -secs takes 5..60 in steps of 5, not {rxq_secs}")
        show = stats.parse_pmd_stats(self._run(cmd.pmd_stats_show(self.paths)))
        rxq = stats.parse_pmd_rxq(self._run(cmd.pmd_rxq_show(self.paths, rxq_secs)))
        return stats.merge_pmd(show, rxq)

    def window(self) -> tuple[dict[str, Any], dict[str, float]]:
        """A measurement window's end: (details ``{"ovs": {"pmd", "ports"}}``, the headline metrics
        ``vswitch_cycles_per_packet`` and ``vswitch_idle_share``) since :meth:`clear_stats`."""
        pmd, ports = self.pmd_stats(), self.port_stats()
        return {"ovs": {"pmd": pmd, "ports": ports}}, stats.ovs_metrics(pmd)

    def port_stats(self) -> dict[str, dict[str, int]]:
        """Each port's counters now (OVS's and the vhost library's: packets, bytes, drops, size bins,
        per-queue counters), since :meth:`clear_stats` when it was called. Read live through OpenFlow
        1.4 port stats: the Interface table's statistics column is only refreshed every
        ``stats-update-interval`` (5 s)."""
        counters = self._live_counters()
        base = self._baseline or {}
        return {p: stats.counter_delta(c, base.get(p)) for p, c in counters.items()}


class OvsWindow:
    """A lab's measurement window when its vswitch may be labctl's OVS (``self.switch``; None when the
    lab has none): OVS's counters cleared as the window opens, its statistics read as it closes."""

    switch: OvsSwitch | None

    def window_started(self) -> None:
        if self.switch is not None:
            self.switch.clear_stats()

    def window_details(self) -> tuple[dict[str, Any], dict[str, float]]:
        """(details, scalar metrics) of the window: OVS's per-PMD and per-port statistics."""
        return self.switch.window() if self.switch is not None else ({}, {})


class OvsPvpHostSide(OvsWindow):
    """The host side both pvp labs behind OVS-DPDK build (the embedded lab and a libvirt guest): labctl's
    OVS with a ``vm{i}`` and a ``gen{i}`` vhost-user client port per guest NIC, flows gen{i} <-> vm{i},
    and the profile's OVS knobs; labgen then serves the ``gen-{i}.sock`` sockets."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.switch: OvsSwitch | None = None

    def gen_socket(self, index: int) -> Path:
        return self.plan.dirs.run / f"gen-{index}.sock"

    def start_switch(self, mount: Path) -> list[Path]:
        """Start the switch (it reserves its own hugepages on ``mount``), record and clear every socket
        path, add the ports, connect them (before traffic: a burst meeting no flow is lost) and apply
        the knobs; returns the generator's socket paths."""
        from labctl.safefs import remove_stale

        plan, state = self.plan, self.state
        pmds = frozenset().union(*(p for p in plan.vswitch.pmds if p)) or None
        program = self.programs.add(resolve(plan.build, "vswitch", "ovs-dpdk"))
        self.switch = switch = OvsSwitch(plan.name, state, plan.dirs.run.parent, plan.dirs.log, pmds, mount,
                                         socket_mem_mb=plan.vswitch.socket_mem_mb, vswitchd=program.path,
                                         vswitchd_env=dict(program.env))
        switch.start()
        gen_sockets = [self.gen_socket(nic.index) for nic in plan.nics]
        for sock in [nic.socket for nic in plan.nics] + gen_sockets:
            state.record("path", str(sock))
            remove_stale(sock)
        for nic, gen in zip(plan.nics, gen_sockets):
            switch.add_vhostuser_client(f"vm{nic.index}", nic.socket, n_rxq=nic.queues)
            switch.add_vhostuser_client(f"gen{nic.index}", gen, n_rxq=plan.generator.queues)
            switch.connect(f"gen{nic.index}", f"vm{nic.index}")
        knobs = dict(plan.vswitch.ovs)
        if plan.vswitch.rxq_affinity:
            knobs["pmd_rxq_affinity"] = {f"vm{i}": pins for i, pins in plan.vswitch.rxq_affinity.items()}
        if knobs:
            switch.configure(**knobs)
        return gen_sockets
