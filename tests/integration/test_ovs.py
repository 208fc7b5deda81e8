"""labctl's private OVS-DPDK on the real daemons: two dpdkvhostuserclient ports, port-to-port flows, and
a testpmd whose two net_virtio_user ports (server=1) loop a --tx-first burst through the bridge.

Checks statistics shapes and cleanup (also after SIGTERM and kill -9); never a throughput threshold.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from labctl import signals
from labctl.dpdk import eal as eal_mod
from labctl.dpdk import testpmd as tpmd
from labctl.errors import Terminated
from labctl.paths import log_dir, run_dir
from labctl.dpdk.eal import lcores_argument
from labctl.dpdk.runtime import start_recorded
from labctl.lab.hugepages import reserve
from labctl.lab.ledger import load_state, state_path, teardown
from labctl.lab.ovs import OvsSwitch
from labctl.lab.ovs import commands as cmd
from tests.conftest import ROOT
from tests.integration.conftest import needs_dpdk

pytestmark = [needs_dpdk, pytest.mark.skipif(not Path(cmd.VSWITCHD).exists(),
                                             reason="openvswitch-switch-dpdk not installed")]
LAB = "ovs-it"
FORWARDING = "forwarding"


def ovs_trial(duration_s: float, announce: bool = False) -> dict[str, Any]:
    """One trial: OVS PMD on CPU 0, the testpmd loop on CPU 1; teardown on every exit path."""
    state = load_state(LAB)
    guest: tpmd.Testpmd | None = None
    switch: OvsSwitch | None = None
    with signals.stoppable():
        try:
            run, logs = run_dir() / LAB, log_dir() / LAB
            state.record("dir", str(run))
            run.mkdir(parents=True, exist_ok=True)
            mount = run / "hugetlbfs"
            switch = OvsSwitch(LAB, state, run_dir(), logs, frozenset({0}), mount, lcore_cpus=frozenset({1}))
            switch.start()
            sockets = [run / f"vm{i}.sock" for i in range(2)]
            for index, sock in enumerate(sockets):
                switch.add_vhostuser_client(f"vm{index}", sock, n_rxq=1)
            switch.connect("vm0", "vm1")  # before traffic: a burst that meets no flow is lost for good
            mbufs, memory_mb = eal_mod.mbuf_budget(2, 1, 1024, 1024, hugepages=True)
            vdevs = [f"net_virtio_user{i},path={s},queues=1,queue_size=1024,server=1" for i, s in enumerate(sockets)]
            eal = eal_mod.EalOptions(file_prefix=f"labctl-{LAB}-guest", lcores=lcores_argument([frozenset({1})]),
                                  vdevs=vdevs, memory_mb=memory_mb, hugepages_dir=mount)
            app = tpmd.TestpmdOptions(forward_mode="io", nb_cores=1, total_mbufs=mbufs)
            guest = tpmd.Testpmd("guest", eal, app, logs / "guest.log")
            assert reserve(state, mount, memory_mb) is not None
            start_recorded(state, guest)
            guest.wait_ready()  # each listening port waits in accept() until OVS connects
            queues = switch.wait_connected()
            guest.command("start tx_first")
            signals.sleep(0.5)
            switch.clear_stats()
            if announce:
                print(FORWARDING, flush=True)
            signals.sleep(duration_s)
            return {"queues": queues, "pmd": switch.pmd_stats(), "ports": switch.port_stats(),
                    "fwd": guest.fwd_stats(), "bridge": switch.bridge, "host_netdevs": os.listdir("/sys/class/net")}
        finally:
            try:
                if guest is not None:
                    guest.quit()
                if switch is not None:
                    switch.stop()
            finally:
                teardown(state)


def _ours(tmp_path: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(str(tmp_path) in part for part in cmdline) and proc.pid != os.getpid():
            found.append(proc)
    return found


def _assert_nothing_left(tmp_path: Path, bridge: str) -> None:
    assert _ours(tmp_path) == []  # no ovsdb-server, ovs-vswitchd or testpmd of this test
    assert not Path(f"/sys/class/net/{bridge}").exists()
    assert not list(Path("/var/run/dpdk").glob(f"labctl-{LAB}-*"))
    run = tmp_path / "run"
    assert not run.exists() or not any(run.rglob("*")), list(run.rglob("*"))  # DB, sockets, hugepage files
    assert str(tmp_path) not in Path("/proc/mounts").read_text()
    assert not state_path(LAB).exists()


def _bridge(tmp_path: Path) -> str:
    return cmd.OvsConfig(LAB, cmd.OvsPaths(tmp_path / "run" / f"ovs-{LAB}", tmp_path), tmp_path, None,
                         frozenset({0})).bridge


def test_ovs_forwards_port_to_port_and_leaves_nothing(no_leftovers, tmp_path):
    result = ovs_trial(3.0)
    assert result["queues"] == {"vm0": [0], "vm1": [0]}
    pmd = result["pmd"]["pmds"]["0"]
    assert pmd["packets_received"] > 0 and pmd["avg_processing_cycles_per_packet"] > 0
    assert pmd["avg_cycles_per_packet"] >= pmd["avg_processing_cycles_per_packet"] and 0 <= pmd["idle_share"] < 1
    assert sorted((q["port"], q["queue"]) for q in pmd["rxqs"]) == [("vm0", 0), ("vm1", 0)]
    ports = result["ports"]
    for port in ("vm0", "vm1"):
        assert ports[port]["rx_packets"] > 0 and ports[port]["tx_packets"] > 0
        # read while traffic flows: the counters of one port are not one snapshot
        assert ports[port]["rx_q0_good_packets"] == pytest.approx(ports[port]["rx_packets"], rel=0.01)
    # what OVS received on both ports in the window is what its PMD processed (within the edges)
    received = ports["vm0"]["rx_packets"] + ports["vm1"]["rx_packets"]
    assert received == pytest.approx(pmd["packets_received"], rel=0.2)
    assert all(s.rx_packets > 0 and s.tx_packets > 0 for s in result["fwd"].values())
    # the datapath's and the bridge's taps are in ovs-vswitchd's own network namespace, not the host's
    assert result["bridge"] not in result["host_netdevs"] and "ovs-netdev" not in result["host_netdevs"]
    _assert_nothing_left(tmp_path, result["bridge"])


def _trial_process() -> subprocess.Popen:
    code = ("import sys\n"
            "from labctl.errors import Interrupted\n"
            "from tests.integration.test_ovs import ovs_trial\n"
            "try:\n    ovs_trial(60.0, announce=True)\n"
            "except Interrupted as exc:\n    print(exc, file=sys.stderr); sys.exit(exc.exit_code)\n")
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_forwarding(proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == FORWARDING:
            return
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"the trial never forwarded: {proc.stderr.read() if proc.stderr else ''}")


def test_sigterm_mid_trial_cleans_up(no_leftovers, tmp_path):
    proc = _trial_process()
    _wait_forwarding(proc)
    assert len(_ours(tmp_path)) >= 3  # ovsdb-server, ovs-vswitchd, testpmd
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == Terminated.message
    _assert_nothing_left(tmp_path, _bridge(tmp_path))


def test_kill_9_mid_trial_then_teardown_removes_everything(no_leftovers, tmp_path):
    proc = _trial_process()
    _wait_forwarding(proc)
    proc.kill()
    proc.wait(10)
    assert len(_ours(tmp_path)) >= 2  # the daemons outlive labctl: they run in their own sessions
    assert teardown(load_state(LAB)) == []
    _assert_nothing_left(tmp_path, _bridge(tmp_path))


def test_dpdk_that_cannot_start_is_one_line_quoting_ovs_and_leaves_nothing(no_leftovers, tmp_path):
    import dataclasses

    from labctl.errors import WorkloadError

    state = load_state(LAB)
    switch = OvsSwitch(LAB, state, run_dir(), log_dir() / LAB, frozenset({0}), run_dir() / "hugetlbfs")
    switch.config = dataclasses.replace(switch.config, extra_eal=["--no-such-eal-option"])
    try:
        with pytest.raises(WorkloadError) as failure:
            switch.start(timeout_s=30)
    finally:
        switch.stop()
        assert teardown(state) == []
    message = str(failure.value)
    assert "\n" not in message and message.startswith("ovs-vswitchd exited with code")
    assert "Unable to initialize DPDK" in message and "ovs-vswitchd.log" in message
    _assert_nothing_left(tmp_path, switch.bridge)
