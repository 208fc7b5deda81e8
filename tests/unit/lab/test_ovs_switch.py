"""OvsSwitch without OVS: what it records (before creating), which commands it runs, knob checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labctl.errors import KnobError, PlanError, WorkloadError
from labctl.lab.hugepages import HugepageGrant
from labctl.lab.ledger import LabState
from labctl.lab.ovs import OvsSwitch, default_lcores, pmd_cpus_of, switch as switch_module
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """An OvsSwitch whose commands and daemons are recorded, not run."""
    events: list[tuple] = []
    state = LabState("t", tmp_path / "state.json")
    original_record = state.record

    def record(kind, ident, **data):
        events.append(("record", kind, ident))
        return original_record(kind, ident, **data)

    def run(self, argv, timeout_s=0):
        events.append(("run", argv))
        if "dpdk_initialized" in argv:
            return "true\n"
        return ""

    def launch(self, daemon, argv):
        events.append(("launch", daemon, argv))
        state.record("process", "1", role=daemon, started=None)

    monkeypatch.setattr(state, "record", record)
    monkeypatch.setattr(OvsSwitch, "_run", run)
    monkeypatch.setattr(OvsSwitch, "_launch", launch)
    monkeypatch.setattr(OvsSwitch, "_wait", lambda self, daemon, what, ready, timeout_s: ready())
    monkeypatch.setattr(switch_module, "reserve",
                        lambda st, mount, mb: (st.record("mount", str(mount)), HugepageGrant(mount, mb // 2))[1])
    monkeypatch.setattr(switch_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    sw = OvsSwitch("t", state, tmp_path / "run", tmp_path / "log", frozenset({0}), tmp_path / "run" / "huge",
                   lcore_cpus=frozenset({1}))
    return sw, events


def _recorded(events, ident):
    return next(i for i, e in enumerate(events) if e[0] == "record" and e[2] == ident)


def _step(events, name):
    return next(i for i, e in enumerate(events) if (e[0] == "launch" and e[1] == name) or (e[0] == "run" and name in e[1]))


def test_start_records_everything_before_creating_it(fake):
    sw, events = fake
    sw.start()
    paths = sw.paths
    for ident, step in [(str(paths.root), "create"), (str(paths.db), "create"), (str(paths.db_lock), "create"),
                        (str(paths.db_socket), "ovsdb-server"), (str(paths.ctl("ovsdb-server")), "ovsdb-server"),
                        (f"/var/run/dpdk/{sw.config.file_prefix}", "ovs-vswitchd"),
                        (str(paths.ctl("ovs-vswitchd")), "ovs-vswitchd"), (str(paths.mgmt(sw.bridge)), "add-br")]:
        assert _recorded(events, ident) < _step(events, step), ident
    assert [r.ident for r in sw.state.resources][0] == str(paths.root)  # removed last, when all in it stopped
    # DB, server, DPDK settings (before vswitchd reads them), vswitchd, then the bridge
    steps = ["create", "ovsdb-server", "init", "ovs-vswitchd", "dpdk_initialized", "add-br"]
    assert [_step(events, s) for s in steps] == sorted(_step(events, s) for s in steps)
    kinds = {r.kind for r in sw.state.resources}
    assert kinds == {"dir", "path", "mount", "process"}  # no tap: vswitchd's are in its own netns


def test_every_client_command_names_the_private_instance(fake):
    sw, events = fake
    sw.start()
    sw.add_vhostuser_client("gen0", sw.paths.root.parent / "g0.sock", 2)
    sw.add_vhostuser_client("vm0", sw.paths.root.parent / "v0.sock", 2)
    sw.connect("gen0", "vm0")
    sw.configure(tx_flush_interval=50, smc_enable=True, pmd_rxq_affinity={"vm0": {0: 0, 1: 0}})
    sw.clear_stats()
    for _, argv in (e for e in events if e[0] == "run"):
        private = str(sw.paths.root)
        if argv[0] == "ovs-vsctl":
            assert argv[1] == f"--db=unix:{private}/db.sock"
        elif argv[0] == "ovs-appctl":
            assert argv[1] == "-t" and argv[2].startswith(private)
        elif argv[0] == "ovs-ofctl":
            assert any(a == f"unix:{private}/{sw.bridge}.mgmt" for a in argv)
    flows = [e[1][-1] for e in events if e[0] == "run" and "add-flow" in e[1]]
    assert flows == ["in_port=gen0,actions=output:vm0", "in_port=vm0,actions=output:gen0"]
    assert sw.ports == {"gen0": 2, "vm0": 2}


def test_knobs_are_checked(fake):
    sw, events = fake
    sw.add_vhostuser_client("p0", Path("/run/x/p0.sock"), 2)
    with pytest.raises(KnobError, match="unknown OVS knob"):
        sw.configure(emc_enable=False)
    with pytest.raises(KnobError, match="tx_flush_interval"):
        sw.configure(tx_flush_interval=2_000_000)
    with pytest.raises(KnobError, match="smc_enable"):
        sw.configure(smc_enable="yes")
    with pytest.raises(KnobError, match="rx queues 0..1, not 2"):
        sw.configure(pmd_rxq_affinity={"p0": {2: 0}})
    with pytest.raises(KnobError, match="CPU 1 runs no PMD"):
        sw.configure(pmd_rxq_affinity={"p0": {0: 1}})
    with pytest.raises(WorkloadError, match="no port 'nope'"):
        sw.configure(pmd_rxq_affinity={"nope": {0: 0}})
    sw.configure(pmd_rxq_affinity={"p0": None}, emc_insert_inv_prob=None)  # back to OVS's defaults
    assert events[-1][1][3:] == ["remove", "Open_vSwitch", ".", "other_config", "emc-insert-inv-prob",
                                 "--", "remove", "Interface", "p0", "other_config", "pmd-rxq-affinity"]


def test_port_and_socket_checks(fake):
    sw, _ = fake
    with pytest.raises(WorkloadError, match="too long"):
        sw.add_vhostuser_client("p0", Path("/" + "x" * 120), 1)
    with pytest.raises(WorkloadError, match="bad OVS port name"):
        sw.add_vhostuser_client("a/b", Path("/run/x.sock"), 1)
    with pytest.raises(WorkloadError, match="no port"):
        sw.connect("p0", "p1")
    with pytest.raises(WorkloadError, match="-secs"):
        sw.pmd_stats(rxq_secs=7)


def test_cpus(tmp_path):
    assert default_lcores(frozenset({0})) == frozenset({1}) and default_lcores(frozenset({0, 1})) == frozenset({0})
    with pytest.raises(PlanError, match="not all online"):
        OvsSwitch("t", LabState("t", tmp_path / "s.json"), tmp_path, tmp_path, frozenset({4096}), tmp_path)
    profile = load_profile(DOMAINS / "quick.yaml", cpus=frozenset({0, 1})).profile
    assert pmd_cpus_of(profile) == frozenset({0})  # quick.yaml pins vhost to CPU 0


def test_gate_runs_the_daemon_only_once_told(tmp_path):
    """The daemon's pid is recorded before it exists: it runs only after the gate reads 'g'."""
    marker = tmp_path / "ran"
    argv = [sys.executable, "-I", "-S", "-c", switch_module._GATE, "/usr/bin/touch", str(marker)]
    told = subprocess.Popen(argv, stdin=subprocess.PIPE)
    told.communicate(b"g", timeout=10)
    assert told.returncode == 0 and marker.exists()
    marker.unlink()
    abandoned = subprocess.Popen(argv, stdin=subprocess.PIPE)  # labctl died before saying "g"
    abandoned.communicate(b"", timeout=10)
    assert abandoned.returncode == 1 and not marker.exists()


def test_tail_quotes_errors_first(tmp_path):
    log = tmp_path / "ovs-vswitchd.log"
    log.write_text("2026-01-01T00:00:00.000Z|00001|vlog|INFO|opened log file\n"
                   "2026-01-01T00:00:00.001Z|00002|dpdk|WARN|EAL: No free 1048576 kB hugepages reported on node 0\n"
                   "2026-01-01T00:00:00.002Z|00003|dpdk|ERR|EAL: Cannot get hugepage information.\n"
                   "2026-01-01T00:00:00.003Z|00004|dpdk|EMER|Unable to initialize DPDK: Permission denied\n")
    assert switch_module._tail(log) == ("dpdk|ERR|EAL: Cannot get hugepage information. / "
                                        "dpdk|EMER|Unable to initialize DPDK: Permission denied")
    assert switch_module._tail(tmp_path / "missing.log") == "no log output"
