"""The lab plan: derived once, read by the embedded lab, the appliance and the domain XML alike."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest

from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.lab.embedded.vm2vm import vm2vm_guest, vm2vm_vswitch
from labctl.lab.embedded.vswitch import vswitch_testpmd
from labctl.lab.ovs import commands as ovs_cmd
from labctl.lab.ovs.switch import default_lcores
from labctl.lab.libvirt.appliance.console import kernel_cmdline
from labctl.lab.libvirt.lifecycle import appliance_cmdline
from labctl.lab.plan import LabDirs, derive
from labctl.profile.load import load_profile
from labctl.workload.paced import trial_spec
from tests.conftest import DOMAINS, ROOT, shipped_profiles

CPUS = frozenset({0, 1})
GOLDEN = ROOT / "tests" / "golden" / "argv"
FAKE_APPLIANCE = types.SimpleNamespace(cmdline=kernel_cmdline)


def _guest_testpmd_args(cmdline: str) -> list[str]:
    """The testpmd application arguments a guest's kernel command line carries (labctl.testpmd=...)."""
    value = next(word.split("=", 1)[1] for word in cmdline.split() if word.startswith("labctl.testpmd="))
    return value.split(",")


@pytest.mark.parametrize("overrides", [{}, {"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 8},
                                       {"guest.nics.*.rx_queue_size": 256, "workload.rxd": 2048, "workload.burst": 64}])
def test_embedded_and_libvirt_guests_run_the_same_forwarder(overrides):
    """One profile, two labs: the embedded lab's guest testpmd and the one the libvirt guest's appliance
    starts get the same application arguments, because both read the plan (rxd clamped to the ring,
    noisy stays noisy)."""
    libvirt = load_profile(DOMAINS / "l2fwd-vhostuser.yaml", overrides or None, cpus=CPUS).profile
    embedded = libvirt.model_copy(update={"backend": "embedded", "uri": None})
    embedded_argv = guest_forwarder(derive(embedded), None).app.argv()
    libvirt_argv = _guest_testpmd_args(appliance_cmdline(derive(libvirt), FAKE_APPLIANCE, "workload"))
    assert embedded_argv == libvirt_argv
    rxd = next(a for a in libvirt_argv if a.startswith("--rxd="))
    assert int(rxd.split("=")[1]) <= min(n.rx_queue_size for n in libvirt.guest.nics)
    assert ("--forward-mode=noisy" in libvirt_argv) == (libvirt.workload.mode == "noisy")


def test_a_trial_derives_its_plan_once_and_its_processes_read_it(monkeypatch):
    """run_trial derives the plan once; the lab's processes and its hugepage budget read that object."""
    from labctl.lab.embedded.lab import EmbeddedLab
    from labctl.measure import trial as trial_module

    derived, started = [], []
    original = trial_module.derive
    monkeypatch.setattr(trial_module, "derive", lambda profile: derived.append(original(profile)) or derived[-1])

    def start(lab):
        started.append(lab.plan)
        raise trial_module.WorkloadError("stopped here by the test")

    monkeypatch.setattr(EmbeddedLab, "start", start)
    record = trial_module.run_trial(load_profile(DOMAINS / "quick.yaml", cpus=CPUS))
    assert record.status == "failed" and "stopped here" in record.error
    assert len(derived) == 1 and started == derived


def _testpmd_argv(testpmd) -> list[str]:
    return testpmd.eal.argv() + ["--"] + testpmd.app.argv()


def _ovs_lines(plan) -> list[str]:
    """What the private OVS is started with and the knob transaction the profile's vswitch section sets."""
    pmds = frozenset().union(*(p for p in plan.vswitch.pmds if p)) or None
    config = ovs_cmd.OvsConfig(name=plan.name, paths=ovs_cmd.OvsPaths(plan.dirs.run.parent / f"ovs-{plan.name}",
                                                                      plan.dirs.log),
                               hugepages_dir=plan.dirs.hugetlbfs, pmd_cpus=pmds, lcore_cpus=default_lcores(pmds),
                               socket_mem_mb=plan.vswitch.socket_mem_mb)
    lines = [f"other_config:{key}={value}" for key, value in sorted(config.other_config().items())]
    knobs = {ovs_cmd.GLOBAL_KNOBS[k]: v for k, v in plan.vswitch.ovs.items() if k in ovs_cmd.GLOBAL_KNOBS}
    if knobs:
        lines += ovs_cmd.configure(config.paths, knobs, {})
    return lines


def _argv_text(argv: list[str]) -> str:
    return "\n".join(argv) + "\n"


@pytest.mark.parametrize("path", shipped_profiles(), ids=lambda p: p.stem)
def test_golden_testpmd_command_lines(path, monkeypatch):
    """Golden files of the command lines each shipped profile gives: the guest forwarder (vm2vm: guests A
    and B), the testpmd vswitch or the private OVS's configuration, labgen's trial parameters, and for a
    libvirt profile the guest's kernel command line. LABCTL_UPDATE_GOLDEN=1 rewrites them."""
    monkeypatch.setattr("labctl.dpdk.eal.online_cpus", lambda: CPUS)
    for role, argv in _command_lines(path).items():
        _check_golden(path, role, argv)


def test_the_command_lines_carry_what_the_profiles_ask(monkeypatch):
    """What the golden files above are the only other check of, written out (each profile's YAML says it):
    the rings reach testpmd's --rxd/--txd and the vdevs' queue_size, the queues its --rxq/--txq, noisy
    mode its reads and table, on the embedded guest and on the libvirt guest's kernel command line alike."""
    monkeypatch.setattr("labctl.dpdk.eal.online_cpus", lambda: CPUS)
    vnf = _command_lines(DOMAINS / "vnf.yaml")  # rings 1024/1024, noisy: 128 reads in 64 MiB
    assert {"--rxd=1024", "--txd=1024", "--forward-mode=noisy", "--noisy-lkup-num-reads=128",
            "--noisy-lkup-memory=64"} <= set(vnf["guest"])
    vdevs = [a for a in vnf["guest"] if a.startswith("net_virtio_user")]
    assert len(vdevs) == 2 and all(",queues=1,queue_size=1024," in v for v in vdevs)
    l2fwd = _command_lines(DOMAINS / "l2fwd-vhostuser.yaml")  # 4 queues, rings 1024/1024, 4 vCPUs
    guest_app = _guest_testpmd_args(" ".join(l2fwd["kernel-cmdline"]))
    assert {"--rxq=4", "--txq=4", "--nb-cores=4", "--rxd=1024", "--txd=1024"} <= set(guest_app)
    assert {"--rxq=4", "--txq=4", "--rxd=1024", "--txd=1024"} <= set(l2fwd["guest"])
    assert [a.split(",")[2] for a in l2fwd["vswitch"] if a.startswith("net_vhost")] == ["queues=4", "queues=4"]
    tap = _command_lines(DOMAINS / "tap-kernel.yaml")  # tap: rx ring 1024, tx ring 256 (QEMU's cap)
    assert {"--rxq=2", "--txq=2", "--rxd=1024", "--txd=256"} <= set(_guest_testpmd_args(" ".join(tap["kernel-cmdline"])))


def _command_lines(path: Path) -> dict[str, list[str]]:
    """The command lines of a shipped profile, by golden file role (see the test above)."""
    profile = load_profile(path, cpus=CPUS).profile
    if profile.workload.kind != "forward":  # tcp kinds: session 0's server and client, both directions
        return {"tcp": _tcp_argv(profile)}
    if profile.backend == "libvirt":
        embedded = profile.model_copy(update={"backend": "embedded", "uri": None})
    else:
        embedded = profile
    plan = derive(embedded, LabDirs.of(profile.name, Path("/run/labctl"), Path("/var/log/labctl")))
    files: dict[str, list[str]] = {}
    if plan.topology == "vm2vm":
        for role, name in (("guest", "guest-a"), ("guestb", "guest-b")):
            files[name] = _testpmd_argv(vm2vm_guest(plan, role, None))
        if plan.vswitch.kind == "testpmd":
            files["vswitch"] = _testpmd_argv(vm2vm_vswitch(plan, None))
    else:
        files["guest"] = _testpmd_argv(guest_forwarder(plan, None))
        if plan.vhostuser_nics and plan.vswitch.kind == "testpmd":
            files["vswitch"] = _testpmd_argv(vswitch_testpmd(plan, None, client=True))
    if plan.vswitch.kind == "ovs-dpdk":
        files["ovs"] = _ovs_lines(plan)
    if plan.generator.kind == "labgen" and plan.topology != "vm2vm":  # /labgen/start: 1 Mpps per port, the profile's window
        files["labgen"] = trial_spec(plan.generator, 1e6, plan.duration_s, plan.warmup_s).params().split(",")
    if profile.backend == "libvirt":
        lplan = derive(profile, LabDirs.of(profile.name, Path("/run/labctl"), Path("/var/log/labctl")))
        files["kernel-cmdline"] = appliance_cmdline(lplan, FAKE_APPLIANCE, "workload").split()
    return files


def _check_golden(path: Path, role: str, argv: list[str]) -> None:
    golden = GOLDEN / f"{path.stem}.{role}.txt"
    if os.environ.get("LABCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(_argv_text(argv), encoding="utf-8")
    assert golden.exists(), f"no golden file {golden}; run with LABCTL_UPDATE_GOLDEN=1"
    assert _argv_text(argv) == golden.read_text(encoding="utf-8"), role


def _tcp_argv(profile) -> list[str]:
    """Session 0's server and client argument lists as the plan gives them, then the guest's serve mode."""
    from labctl.workload.tcp import client_argv, server_argv, session_seconds

    plan = derive(profile, LabDirs.of(profile.name, Path("/run/labctl"), Path("/var/log/labctl")))
    tcp = plan.tcp
    warmup, seconds = session_seconds(plan)
    server = tcp.host_addr if tcp.clients_in_guest else tcp.guest_addr
    cmdline = kernel_cmdline("serve", macs=plan.nics[0].mac, channel="org.labctl.ctl", stack="kernel")
    return (server_argv(tcp.kind, server, tcp.port_base) + ["--"] +
            client_argv(tcp.kind, server, tcp.port_base, warmup, seconds) + ["--"] + cmdline.split())


def _tcp_profile(name: str = "tcp-a", backend: str = "tap", **workload):
    from labctl.profile.schema import Profile

    return Profile.model_validate({"name": name, "guest": {"nics": [{"backend": backend, "queues": 2}]},
                                   "workload": {"kind": "tcp_stream", "sessions": 4, **workload}})


def test_tcp_plan_addresses_ports_and_tag():
    import ipaddress

    from labctl.lab.plan import TCP_NET, TCP_PORTS

    plan = derive(_tcp_profile(direction="host_to_guest", guest_queues=1))
    tcp = plan.tcp
    assert plan.workload_kind == "tcp_stream" and plan.stack == "kernel"
    assert (tcp.sessions, tcp.direction, tcp.guest_queues, tcp.clients_in_guest) == (4, "host_to_guest", 1, False)
    host, guest = ipaddress.ip_address(tcp.host_addr), ipaddress.ip_address(tcp.guest_addr)
    assert host in TCP_NET and guest in TCP_NET and int(guest) == int(host) + 1 and tcp.prefix == 30
    assert ipaddress.ip_network(f"{tcp.host_addr}/30", strict=False) == ipaddress.ip_network(f"{tcp.guest_addr}/30",
                                                                                             strict=False)
    assert TCP_PORTS[0] <= tcp.port_base and tcp.port_base + 128 <= TCP_PORTS[1]
    assert tcp.ports == tuple(range(tcp.port_base, tcp.port_base + 4)) and tcp.tag == "labctl-tcp-a-tcp"
    other = derive(_tcp_profile("tcp-b")).tcp
    assert (other.host_addr, other.port_base) != (tcp.host_addr, tcp.port_base)  # per lab
    assert derive(_tcp_profile()).tcp == derive(_tcp_profile()).tcp  # stable
    assert derive(_tcp_profile(backend="network")).tcp.host_addr is None  # learnt at boot (DHCP)
    forward = derive(load_profile(DOMAINS / "guest-tap.yaml", cpus=CPUS).profile)
    assert forward.tcp is None and forward.stack == "dpdk" and forward.workload_kind == "forward"


def test_tcp_workload_knobs_are_applied_live():
    from labctl.lab.plan import is_domain_knob

    for knob in ("workload.sessions", "workload.direction", "workload.guest_queues", "workload.kind"):
        assert not is_domain_knob(knob)
    base = _tcp_profile()
    live = [base.model_copy(update={"workload": base.workload.model_copy(update=change)})
            for change in ({"sessions": 1}, {"guest_queues": 1}, {"kind": "tcp_rr"}, {"direction": "host_to_guest"})]
    assert {derive(p).domain_key() for p in live} == {derive(base).domain_key()}
    forward = base.model_copy(update={"workload": base.workload.model_copy(update={"kind": "forward"})})
    assert derive(forward).domain_key() != derive(base).domain_key()  # another stack: another boot


def test_pacing_reaches_labgens_trial():
    """workload.pacing: shift (the default) asks labgen to shift its schedule past pauses longer than
    PAUSE_SHIFT_S; absolute leaves the shift key out (labgen's default: catch up in a burst)."""
    from labctl.lab.plan import PAUSE_SHIFT_S

    shift = derive(load_profile(DOMAINS / "vnf.yaml", cpus=CPUS).profile)
    absolute = derive(load_profile(DOMAINS / "vnf.yaml", {"workload.pacing": "absolute"}, cpus=CPUS).profile)
    assert shift.generator.shift_s == PAUSE_SHIFT_S and absolute.generator.shift_s == 0
    assert "shift=0.0001" in trial_spec(shift.generator, 1e6, 5, 1).params().split(",")
    assert not any(p.startswith("shift=") for p in trial_spec(absolute.generator, 1e6, 5, 1).params().split(","))


def test_vm2vm_guest_b_plan_is_derived_from_the_plan():
    """LabPlan.peer: guest B's NICs, domain and logs; the rest of A's plan; only a vm2vm plan has one."""
    vm2vm = derive(load_profile(DOMAINS / "guest-vm2vm.yaml", cpus=CPUS).profile)
    b = vm2vm.peer()
    assert (b.name, b.domain_name) == (f"{vm2vm.name}-b", f"{vm2vm.domain_name}-b")
    assert b.nics == vm2vm.peer_nics and b.peer_nics == () and b.topology == "pvp"
    assert b.dirs.run == vm2vm.dirs.run and b.dirs.log == vm2vm.dirs.log / "guest-b"
    assert (b.pins, b.forwarder, b.duration_s) == (vm2vm.pins, vm2vm.forwarder, vm2vm.duration_s)
    with pytest.raises(ValueError, match="only a vm2vm plan"):
        derive(load_profile(DOMAINS / "guest-vhostuser.yaml", cpus=CPUS).profile).peer()


def test_memory_restarts_a_libvirt_guest_but_not_the_embedded_lab():
    """guest.memory_mib sizes a libvirt guest (a boot); the embedded lab has no guest memory to size, so a
    sweep over it (the A/A knob of the until-decided test) restarts nothing there."""
    for stem, same in (("quick", True), ("guest-vhostuser", False)):
        profile = load_profile(ROOT / "domains" / f"{stem}.yaml", cpus=CPUS).profile
        bigger = profile.model_copy(update={"guest": profile.guest.model_copy(
            update={"memory_mib": profile.guest.memory_mib * 2})})
        assert (derive(profile).domain_key() == derive(bigger).domain_key()) is same, stem
