"""The command lines of labctl's private OVS-DPDK: every one an argument list naming its private socket.

Nothing here runs anything; :mod:`labctl.lab.ovs.switch` runs these lists. Every OVS client command
addresses the private instance explicitly (``ovs-vsctl --db=unix:...``, ``ovs-appctl -t <ctl>``,
``ovs-ofctl ... unix:<bridge>.mgmt``) so that none of them can fall back to the host's system
instance in ``/var/run/openvswitch``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from labctl.lab.builds import OVS_VSWITCHD

OVSDB_TOOL = "ovsdb-tool"
OVSDB_SERVER = "ovsdb-server"
VSWITCHD = OVS_VSWITCHD  # Debian's DPDK build (not the alternative): the host's vswitch of kind ovs-dpdk
VSCTL = "ovs-vsctl"
APPCTL = "ovs-appctl"
OFCTL = "ovs-ofctl"
UNSHARE = "unshare"  # util-linux
SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")
DATAPATH = "netdev@ovs-netdev"  # every datapath_type=netdev bridge of one vswitchd shares this datapath

VSCTL_TIMEOUT_S = 15  # ovs-vsctl without --no-wait waits for ovs-vswitchd to apply; never forever
DEFAULT_SOCKET_MEM_MB = 256
UNIX_PATH_MAX = 107  # sun_path is 108 bytes with its NUL

# the other_config knobs OvsSwitch.configure() takes, by their Python names
GLOBAL_KNOBS = {"tx_flush_interval": "tx-flush-interval", "emc_insert_inv_prob": "emc-insert-inv-prob",
                "smc_enable": "smc-enable", "pmd_rxq_assign": "pmd-rxq-assign"}
PORT_KNOBS = {"pmd_rxq_affinity": "pmd-rxq-affinity"}


def cpu_mask(cpus: frozenset[int] | set[int]) -> str:
    """A CPU set as OVS's hex mask ('taskset' style, lowest bit CPU 0): {0, 2} -> '0x5'."""
    if not cpus:
        raise ValueError("an empty CPU set has no mask")
    return hex(sum(1 << cpu for cpu in cpus))


def ovsdb_value(value: object) -> str:
    """A value in ovs-vsctl's syntax: booleans and integers bare, strings quoted unless plain."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if re.fullmatch(r"[A-Za-z0-9_.]+", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def affinity_value(pins: Mapping[int, int]) -> str:
    """pmd-rxq-affinity's ``<queue-id>:<core-id>`` list, e.g. {0: 1, 1: 0} -> '0:1,1:0'."""
    return ",".join(f"{queue}:{core}" for queue, core in sorted(pins.items()))


@dataclass(frozen=True)
class OvsPaths:
    """Where one private OVS instance keeps its files: all below ``root`` except the logs."""

    root: Path
    log_dir: Path

    @classmethod
    def of(cls, run_root: Path, name: str, log_dir: Path) -> "OvsPaths":
        """The instance of lab ``name``: its own directory beside the lab's run directory."""
        return cls(run_root / f"ovs-{name}", log_dir)

    @property
    def db(self) -> Path:
        return self.root / "conf.db"

    @property
    def db_lock(self) -> Path:
        return self.root / ".conf.db.~lock~"  # ovsdb-tool and ovsdb-server lock the DB through this file

    @property
    def db_socket(self) -> Path:
        return self.root / "db.sock"

    def ctl(self, daemon: str) -> Path:
        return self.root / f"{daemon}.ctl"

    def pidfile(self, daemon: str) -> Path:
        return self.root / f"{daemon}.pid"

    def log(self, daemon: str) -> Path:
        return self.log_dir / f"{daemon}.log"

    def console(self, daemon: str) -> Path:
        """The daemon's stdout/stderr: what it says before its log file is open."""
        return self.log_dir / f"{daemon}.out"

    def mgmt(self, bridge: str) -> Path:
        return self.root / f"{bridge}.mgmt"  # ovs-vswitchd makes <bridge>.mgmt/.snoop in OVS_RUNDIR

    def snoop(self, bridge: str) -> Path:
        return self.root / f"{bridge}.snoop"

    @property
    def db_remote(self) -> str:
        return f"unix:{self.db_socket}"


@dataclass(frozen=True)
class OvsConfig:
    """Everything the private instance is started with; derived once, then only read."""

    name: str
    paths: OvsPaths
    hugepages_dir: Path
    pmd_cpus: frozenset[int] | None  # None: OVS's default (one PMD per NUMA node)
    lcore_cpus: frozenset[int]
    socket_mem_mb: int = DEFAULT_SOCKET_MEM_MB
    extra_eal: list[str] = field(default_factory=list)

    @property
    def token(self) -> str:
        """Short and stable per run directory: two labs of the same name on one host never share a
        bridge (a host-wide tap name) or a DPDK file prefix."""
        return hashlib.sha1(str(self.paths.root).encode()).hexdigest()[:8]

    @property
    def bridge(self) -> str:
        return f"lcovs{self.token}"  # 13 characters: its internal tap's name (kernel limit 15)

    @property
    def file_prefix(self) -> str:
        return f"labctl-{self.name}-ovs-{self.token[:6]}"

    def env(self) -> dict[str, str]:
        """OVS_* variables for the daemons and clients: any default path they fall back to is private."""
        root = str(self.paths.root)
        return {"OVS_RUNDIR": root, "OVS_DBDIR": root, "OVS_SYSCONFDIR": root, "OVS_LOGDIR": str(self.paths.log_dir)}

    def dpdk_extra(self) -> str:
        # --no-pci: without it EAL probes the host's own PCI NICs (here the VM's virtio NIC 0000:00:03.0)
        return " ".join(["--no-pci", "--file-prefix", self.file_prefix, *self.extra_eal])

    def other_config(self) -> dict[str, str]:
        config = {"dpdk-init": "true", "dpdk-socket-mem": str(self.socket_mem_mb),
                  "dpdk-socket-limit": str(self.socket_mem_mb), "dpdk-lcore-mask": cpu_mask(self.lcore_cpus),
                  "dpdk-hugepage-dir": str(self.hugepages_dir), "dpdk-extra": self.dpdk_extra()}
        if self.pmd_cpus is not None:
            config["pmd-cpu-mask"] = cpu_mask(self.pmd_cpus)
        return config


def ovsdb_create(paths: OvsPaths) -> list[str]:
    return [OVSDB_TOOL, "create", str(paths.db), str(SCHEMA)]


def _daemon_options(paths: OvsPaths, daemon: str) -> list[str]:
    return [f"--unixctl={paths.ctl(daemon)}", f"--pidfile={paths.pidfile(daemon)}",
            f"--log-file={paths.log(daemon)}", "-vconsole:off", "--no-chdir"]


def ovsdb_server(paths: OvsPaths) -> list[str]:
    """In the foreground (no --detach): its pid is the one labctl started and recorded."""
    return [OVSDB_SERVER, str(paths.db), f"--remote=punix:{paths.db_socket}", *_daemon_options(paths, "ovsdb-server")]


def vswitchd(paths: OvsPaths, binary: str = VSWITCHD) -> list[str]:
    """In a network namespace of its own (``unshare --net`` execs it: same pid). The netdev datapath makes
    persistent taps named after its datapath (``ovs-netdev``, one name per host) and each bridge; in the
    host's namespace a second instance fails ("creating tap device failed: Device or resource busy") and
    a killed one leaves them. In its own namespace they die with the process. Its sockets are files:
    vhost-user, DB and unixctl connections cross namespaces. ``binary``: a build's ovs-vswitchd."""
    return [UNSHARE, "--net", "--", binary, paths.db_remote, *_daemon_options(paths, "ovs-vswitchd")]


def vsctl(paths: OvsPaths, *args: str, wait: bool = True) -> list[str]:
    """``wait``: return once ovs-vswitchd applied the change (with a timeout); else only the DB changes."""
    head = [VSCTL, f"--db={paths.db_remote}", f"--timeout={VSCTL_TIMEOUT_S}"]
    return head + ([] if wait else ["--no-wait"]) + list(args)


def appctl(paths: OvsPaths, daemon: str, *args: str) -> list[str]:
    return [APPCTL, "-t", str(paths.ctl(daemon)), f"--timeout={VSCTL_TIMEOUT_S}", *args]


def ofctl(paths: OvsPaths, bridge: str, command: str, *args: str, options: tuple[str, ...] = ()) -> list[str]:
    return [OFCTL, *options, command, f"unix:{paths.mgmt(bridge)}", *args]


def set_record(table: str, record: str, column: str, values: Mapping[str, object]) -> list[str]:
    """``set TABLE RECORD column:key=value ...`` for one ovs-vsctl transaction (empty when nothing)."""
    if not values:
        return []
    return ["set", table, record, *(f"{column}:{key}={ovsdb_value(v)}" for key, v in values.items())]


def remove_keys(table: str, record: str, column: str, keys: list[str]) -> list[str]:
    return ["remove", table, record, column, *keys] if keys else []


def init_dpdk(config: OvsConfig) -> list[str]:
    """Before ovs-vswitchd runs: initialise the DB and write the DPDK settings (read once, at start)."""
    return vsctl(config.paths, "init", "--", *set_record("Open_vSwitch", ".", "other_config", config.other_config()),
                 wait=False)


def add_bridge(config: OvsConfig) -> list[str]:
    """A userspace (netdev) bridge; fail_mode=secure: with no controller OVS installs no flow of its own
    (standalone would add a NORMAL, MAC-learning flow), so only connect()'s flows forward. OpenFlow 1.4
    is enabled for its port statistics (they carry OVS's custom counters, see dump_ports)."""
    br = config.bridge
    return vsctl(config.paths, "add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev", "fail_mode=secure",
                 "protocols=OpenFlow10,OpenFlow14")


def add_vhostuser_client(paths: OvsPaths, bridge: str, port: str, socket: Path) -> list[str]:
    return vsctl(paths, "add-port", bridge, port, "--", "set", "Interface", port, "type=dpdkvhostuserclient",
                 f"options:vhost-server-path={ovsdb_value(str(socket))}")


def flow(in_port: str, out_port: str) -> str:
    return f"in_port={in_port},actions=output:{out_port}"


def add_flow(paths: OvsPaths, bridge: str, in_port: str, out_port: str) -> list[str]:
    return ofctl(paths, bridge, "add-flow", flow(in_port, out_port))


def configure(paths: OvsPaths, global_values: Mapping[str, object | None],
              port_values: Mapping[str, Mapping[str, object | None]]) -> list[str]:
    """One ovs-vsctl transaction: set the knobs given a value, remove the ones given None (OVS default)."""
    ops: list[list[str]] = []

    def add(table: str, record: str, values: Mapping[str, object | None]) -> None:
        ops.append(set_record(table, record, "other_config", {k: v for k, v in values.items() if v is not None}))
        ops.append(remove_keys(table, record, "other_config", [k for k, v in values.items() if v is None]))

    add("Open_vSwitch", ".", global_values)
    for port, values in port_values.items():
        add("Interface", port, values)
    args: list[str] = []
    for op in (o for o in ops if o):
        args += (["--"] if args else []) + op
    return vsctl(paths, *args)


def dump_ports(paths: OvsPaths, bridge: str) -> list[str]:
    """Live port counters (the Interface table's statistics lag by up to stats-update-interval, 5 s)."""
    return ofctl(paths, bridge, "dump-ports", options=("--names", "-O", "OpenFlow14"))


def interfaces_json(paths: OvsPaths) -> list[str]:
    return vsctl(paths, "--format=json", "--columns=name,statistics,status,link_state", "list", "Interface",
                 wait=False)


def pmd_stats_show(paths: OvsPaths) -> list[str]:
    return appctl(paths, "ovs-vswitchd", "dpif-netdev/pmd-stats-show")


def pmd_rxq_show(paths: OvsPaths, secs: int | None = None) -> list[str]:
    """``secs``: the usage window, 5..60 in steps of 5 (OVS 3.1 added -secs; default 60)."""
    return appctl(paths, "ovs-vswitchd", "dpif-netdev/pmd-rxq-show", *(["-secs", str(secs)] if secs else []))


def pmd_stats_clear(paths: OvsPaths) -> list[str]:
    return appctl(paths, "ovs-vswitchd", "dpif-netdev/pmd-stats-clear")


def exit_daemon(paths: OvsPaths, daemon: str) -> list[str]:
    """``exit --cleanup`` for ovs-vswitchd also releases the datapath's internal ports (persistent taps)."""
    return appctl(paths, daemon, "exit", *(["--cleanup"] if daemon == "ovs-vswitchd" else []))
