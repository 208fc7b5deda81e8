"""The private OVS-DPDK's command lines (golden lists): every one addresses labctl's own sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from labctl.lab.ovs import commands as cmd

ROOT = Path("/run/labctl/ovs-quick")
PATHS = cmd.OvsPaths(ROOT, Path("/var/log/labctl/quick"))
DB = "--db=unix:/run/labctl/ovs-quick/db.sock"
CTL = "/run/labctl/ovs-quick/ovs-vswitchd.ctl"


def config(**kw) -> cmd.OvsConfig:
    values = {"name": "quick", "paths": PATHS, "hugepages_dir": ROOT / "hugetlbfs", "pmd_cpus": frozenset({0}),
              "lcore_cpus": frozenset({1})}
    return cmd.OvsConfig(**{**values, **kw})


def test_masks_and_values():
    assert cmd.cpu_mask(frozenset({0})) == "0x1" and cmd.cpu_mask({0, 2}) == "0x5" and cmd.cpu_mask({1, 3}) == "0xa"
    with pytest.raises(ValueError):
        cmd.cpu_mask(set())
    assert cmd.ovsdb_value(True) == "true" and cmd.ovsdb_value(50) == "50" and cmd.ovsdb_value("cycles") == "cycles"
    assert cmd.ovsdb_value("0:1,1:0") == '"0:1,1:0"' and cmd.ovsdb_value('a "b"') == '"a \\"b\\""'
    assert cmd.affinity_value({1: 0, 0: 1}) == "0:1,1:0"


def test_names_are_short_unique_per_run_dir_and_labctl_prefixed():
    a, b = config(), config(paths=cmd.OvsPaths(Path("/tmp/other/ovs-quick"), PATHS.log_dir))
    assert a.bridge != b.bridge and a.file_prefix != b.file_prefix
    assert len(a.bridge) <= 15 and a.bridge == config().bridge  # stable: the next run finds the same names
    assert a.file_prefix.startswith("labctl-quick-ovs-")


def test_db_and_daemons():
    assert cmd.ovsdb_create(PATHS) == ["ovsdb-tool", "create", "/run/labctl/ovs-quick/conf.db",
                                       "/usr/share/openvswitch/vswitch.ovsschema"]
    assert cmd.ovsdb_server(PATHS) == [
        "ovsdb-server", "/run/labctl/ovs-quick/conf.db", "--remote=punix:/run/labctl/ovs-quick/db.sock",
        "--unixctl=/run/labctl/ovs-quick/ovsdb-server.ctl", "--pidfile=/run/labctl/ovs-quick/ovsdb-server.pid",
        "--log-file=/var/log/labctl/quick/ovsdb-server.log", "-vconsole:off", "--no-chdir"]
    assert cmd.vswitchd(PATHS) == [
        "unshare", "--net", "--", "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk", "unix:/run/labctl/ovs-quick/db.sock",
        f"--unixctl={CTL}", "--pidfile=/run/labctl/ovs-quick/ovs-vswitchd.pid",
        "--log-file=/var/log/labctl/quick/ovs-vswitchd.log", "-vconsole:off", "--no-chdir"]


def test_dpdk_settings_written_before_vswitchd_starts():
    c = config()
    assert cmd.init_dpdk(c) == [
        "ovs-vsctl", DB, "--timeout=15", "--no-wait", "init", "--", "set", "Open_vSwitch", ".",
        "other_config:dpdk-init=true", "other_config:dpdk-socket-mem=256", "other_config:dpdk-socket-limit=256",
        "other_config:dpdk-lcore-mask=0x2", 'other_config:dpdk-hugepage-dir="/run/labctl/ovs-quick/hugetlbfs"',
        f'other_config:dpdk-extra="--no-pci --file-prefix {c.file_prefix}"', "other_config:pmd-cpu-mask=0x1"]
    unpinned = config(pmd_cpus=None, socket_mem_mb=512).other_config()
    assert "pmd-cpu-mask" not in unpinned and unpinned["dpdk-socket-mem"] == unpinned["dpdk-socket-limit"] == "512"


def test_env_points_every_default_at_the_private_dir():
    assert config().env() == {"OVS_RUNDIR": str(ROOT), "OVS_DBDIR": str(ROOT), "OVS_SYSCONFDIR": str(ROOT),
                              "OVS_LOGDIR": "/var/log/labctl/quick"}


def test_bridge_ports_and_flows():
    c = config()
    br = c.bridge
    assert cmd.add_bridge(c) == ["ovs-vsctl", DB, "--timeout=15", "add-br", br, "--", "set", "Bridge", br,
                                 "datapath_type=netdev", "fail_mode=secure", "protocols=OpenFlow10,OpenFlow14"]
    assert cmd.add_vhostuser_client(PATHS, br, "gen0", Path("/run/labctl/quick/vhost-0.sock")) == [
        "ovs-vsctl", DB, "--timeout=15", "add-port", br, "gen0", "--", "set", "Interface", "gen0",
        "type=dpdkvhostuserclient", 'options:vhost-server-path="/run/labctl/quick/vhost-0.sock"']
    assert cmd.add_flow(PATHS, br, "gen0", "guest0") == [
        "ovs-ofctl", "add-flow", f"unix:/run/labctl/ovs-quick/{br}.mgmt", "in_port=gen0,actions=output:guest0"]


def test_knobs_in_one_transaction():
    argv = cmd.configure(PATHS, {"tx-flush-interval": 50, "emc-insert-inv-prob": None, "smc-enable": True},
                         {"p0": {"pmd-rxq-affinity": "0:1,1:0"}, "p1": {"pmd-rxq-affinity": None}})
    assert argv == ["ovs-vsctl", DB, "--timeout=15",
                    "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50", "other_config:smc-enable=true",
                    "--", "remove", "Open_vSwitch", ".", "other_config", "emc-insert-inv-prob",
                    "--", "set", "Interface", "p0", 'other_config:pmd-rxq-affinity="0:1,1:0"',
                    "--", "remove", "Interface", "p1", "other_config", "pmd-rxq-affinity"]


def test_statistics_and_control():
    assert cmd.pmd_stats_show(PATHS) == ["ovs-appctl", "-t", CTL, "--timeout=15", "dpif-netdev/pmd-stats-show"]
    assert cmd.pmd_rxq_show(PATHS) == ["ovs-appctl", "-t", CTL, "--timeout=15", "dpif-netdev/pmd-rxq-show"]
    assert cmd.pmd_rxq_show(PATHS, 5)[-2:] == ["-secs", "5"]
    assert cmd.pmd_stats_clear(PATHS) == ["ovs-appctl", "-t", CTL, "--timeout=15", "dpif-netdev/pmd-stats-clear"]
    assert cmd.dump_ports(PATHS, "br") == ["ovs-ofctl", "--names", "-O", "OpenFlow14", "dump-ports",
                                           "unix:/run/labctl/ovs-quick/br.mgmt"]
    assert cmd.interfaces_json(PATHS) == ["ovs-vsctl", DB, "--timeout=15", "--no-wait", "--format=json",
                                          "--columns=name,statistics,status,link_state", "list", "Interface"]
    assert cmd.exit_daemon(PATHS, "ovs-vswitchd")[-2:] == ["exit", "--cleanup"]
    assert cmd.exit_daemon(PATHS, "ovsdb-server") == ["ovs-appctl", "-t", "/run/labctl/ovs-quick/ovsdb-server.ctl",
                                                      "--timeout=15", "exit"]
