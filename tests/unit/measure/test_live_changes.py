"""What a running lab can change live (labctl.measure.live_changes): every refusal names the knob and the reason
(exit 2, before anything starts); the forwarder's changes are the testpmd commands of its running ports; what
a change became is read from the lab, not from the request."""

from __future__ import annotations

import sys
import types

import pytest

from labctl.api import load
from labctl.errors import NotLiveError, UserError, WorkloadError
from labctl.measure import live_changes as lc
from labctl.lab.plan import derive

QUICK = "domains/quick.yaml"  # embedded, testpmd vswitch (labgen host side)
OVS = "domains/ovs-pvp.yaml"
GUEST = "domains/guest-vhostuser.yaml"
TCP = "domains/tcp-multiqueue.yaml"


def actions(profile: str, *changes: str, **overrides):
    loaded = load(profile, overrides or None)
    return lc.plan_changes(loaded, derive(loaded.profile), lc.parse_changes(list(changes)))


@pytest.mark.parametrize(("profile", "change", "reason"), [
    (QUICK, "guest.memory_mib=2048", "memory, vCPUs, hugepages and disk are set when it starts"),
    (QUICK, "guest.nics.*.rx_queue_size=1024", "a NIC's backend, queues and rings are the device's"),
    (QUICK, "workload.packet_size=128", "the traffic itself"),
    (QUICK, "build=patched", "another binary"),
    (QUICK, "vswitch.kind=ovs-dpdk", "start-up configuration"),
    (QUICK, "workload.rxd=2048", "the NICs' rings hold 256 descriptors"),
    (QUICK, "guest.pinning.vhost=1", "labgen is the host side: its lcores are the measuring instrument"),
    (QUICK, "vswitch.pmd_rxq_rebalance=now", "only OVS-DPDK"),
    (QUICK, "guest.pinning.vcpus.0=0", "the embedded guest's lcores are fixed"),
    (GUEST, "workload.rxd=256", "live only on the embedded lab's pvp guest"),
    (QUICK, "workload.sessions=2", "not a setting of the running lab"),
    (QUICK, "guest.pinning.nothing=1", "no live path"),
])
def test_a_change_that_is_not_live_here_is_refused_with_the_knob_and_reason(profile, change, reason):
    with pytest.raises(NotLiveError) as err:
        actions(profile, change)
    text = str(err.value)
    assert text.startswith(f"--change {change}: cannot be made live here: ") and reason in text
    assert "\n" not in text and err.value.exit_code == 2


def test_a_kernel_guests_queue_count_and_pins_are_live():
    queues, pins = actions(TCP, "workload.guest_queues=1", "guest.pinning.vcpus.0=0")
    assert queues.knobs == ["workload.guest_queues=1"] and pins.knobs == ["guest.pinning.vcpus.0=0"]
    with pytest.raises(NotLiveError, match="workload.guest_queues=2: cannot be made live here: the queue count of the "
                                           "guest's kernel driver: a kernel guest's"):
        actions(QUICK, "workload.guest_queues=2")
    with pytest.raises(UserError, match=r"--change workload.guest_queues=9: "):
        actions(TCP, "workload.guest_queues=9")  # more than the NIC's queue pairs: the rules say so


class FakeChannel:
    def __init__(self, rc: int = 0):
        self.sent: list[str] = []
        self.rc = rc

    def mark(self) -> int:
        return 0

    def send(self, line: str) -> None:
        self.sent.append(line)

    def wait(self, tag, after, timeout_s, what, match=None):
        n = int(self.sent[-1].rsplit(" ", 1)[1])
        return 1, {"rc": self.rc, "message": "" if not self.rc else "Invalid argument",
                   "nic": {"ifname": "eth0", "combined": n if not self.rc else 1, "max_combined": 2}}


def test_the_queue_count_is_set_over_the_channel_and_read_back():
    (action,) = actions(TCP, "workload.guest_queues=2")
    lab = types.SimpleNamespace(channel=FakeChannel())
    assert action.apply(lab) == ["ethtool -L combined 2: rc 0"]
    assert lab.channel.sent == [f"QUEUES {derive(load(TCP).profile).nics[0].mac} 2"]
    assert action.read_back(lab) == {"ifname": "eth0", "combined": 2, "max_combined": 2}
    (failing,) = actions(TCP, "workload.guest_queues=2")
    with pytest.raises(WorkloadError, match="ethtool -L combined 2 in the guest: Invalid argument"):
        failing.apply(types.SimpleNamespace(channel=FakeChannel(rc=1)))


@pytest.mark.parametrize(("change", "message"), [
    ("workload.rxd=100", r"--change workload.rxd=100: workload.rxd: 100 is not allowed \(allowed: powers of two"),
    ("guest.pinning.vcpus.5=1", r"no such vCPU \(allowed: guest.pinning.vcpus.0..0\)"),
    ("guest.pinning.emulator=99", r"CPUs not online"),
    ("guest.pinning.vcpus.0=x", r"not a CPU set"),
])
def test_bad_values_are_the_rules_own_one_line_errors(change, message):
    profile = GUEST if "pinning" in change else QUICK
    overrides = {} if "pinning" in change else {"guest.nics.*.rx_queue_size": 1024}
    with pytest.raises(UserError, match=message):
        actions(profile, change, **overrides)


def test_each_knob_once():
    with pytest.raises(UserError, match="--change workload.rxd: given twice"):
        lc.parse_changes(["workload.rxd=512", "workload.rxd=1024"])


def test_the_live_changes_of_each_lab_and_their_knobs():
    rings = actions(QUICK, "workload.rxd=1024", "workload.burst=64", **{"guest.nics.*.rx_queue_size": 1024})
    assert [a.knobs for a in rings] == [["workload.rxd=1024"], ["workload.burst=64"]]
    ovs = actions(OVS, "guest.pinning.vhost=1", "vswitch.pmd_rxq_rebalance=now")
    assert [a.knobs for a in ovs] == [["guest.pinning.vhost=1"], ["vswitch.pmd_rxq_rebalance=now"]]
    pins = actions(GUEST, "guest.pinning.vcpus.0=0", "guest.pinning.emulator=0-1")
    assert len(pins) == 1 and pins[0].knobs == ["guest.pinning.vcpus.0=0", "guest.pinning.emulator=0-1"]
    assert pins[0].label == "live pins: vCPU 0 -> CPUs 0, emulator -> CPUs 0-1"


class FakeTestpmd:
    """The guest testpmd's prompt: what labctl typed, and what it prints for the queries."""

    def __init__(self, rxd: int = 256, fail: str | None = None):
        self.typed: list[str] = []
        self.rxd, self.burst, self.fail = rxd, 32, fail

    def command(self, text: str, timeout_s: float = 15.0) -> str:
        self.typed.append(text)
        if self.fail and text.startswith(self.fail):
            return "Port 0 can not be set into stopped\nFail to stop port 0\n"
        if text.startswith("port config all rxd "):
            self.rxd = int(text.rsplit(" ", 1)[1])
        if text.startswith("set burst "):
            self.burst = int(text.rsplit(" ", 1)[1])
        if text == "show config rxtx":  # testpmd 22.11's layout (virtio_user: the size it set the queues up with)
            ports = "".join(f"  port {p}: RX queue number: 1 Tx queue number: 1\n    Rx offloads=0x0 Tx offloads=0x0\n"
                            f"    RX queue: 0\n      RX desc={self.rxd} - RX free threshold=0\n"
                            f"      RX threshold registers: pthresh=0 hthresh=0  wthresh=0\n      RX Offloads=0x0\n"
                            f"    TX queue: 0\n      TX desc=1024 - TX free threshold=0\n" for p in (0, 1))
            return f"  io packet forwarding packets/burst={self.burst}\n  nb forwarding cores=1 - nb forwarding " \
                   f"ports=2\n{ports}"
        return ""


class FakeLab:
    def __init__(self, guest):
        self.guest = guest


def test_rings_are_changed_on_the_running_ports_and_read_back():
    (action,) = actions(QUICK, "workload.rxd=1024", **{"guest.nics.*.rx_queue_size": 1024})
    lab = FakeLab(FakeTestpmd())
    done = action.apply(lab)
    assert lab.guest.typed == ["stop", "port stop all", "port config all rxd 1024", "port start all", "start"]
    assert done[-1] == "guest testpmd: start"
    assert action.read_back(lab) == {"port0.rxd": 1024, "port1.rxd": 1024}
    assert lab.guest.typed[-1] == "show config rxtx"


def test_burst_and_a_refusing_testpmd():
    (burst,) = actions(QUICK, "workload.burst=64")
    lab = FakeLab(FakeTestpmd())
    burst.apply(lab)
    assert lab.guest.typed == ["stop", "set burst 64", "start"] and burst.read_back(lab) == {"burst": 64}
    (rings,) = actions(QUICK, "workload.rxd=512", **{"guest.nics.*.rx_queue_size": 1024})
    with pytest.raises(WorkloadError, match="guest testpmd: port stop all: Fail to stop port 0"):
        rings.apply(FakeLab(FakeTestpmd(fail="port stop")))


def test_exec_runs_an_argv_never_a_shell(tmp_path):
    injected = tmp_path / "injected"
    word = f"x; touch {injected}"
    argv = lc.check_exec([sys.executable, "-c", "import sys; print(sys.argv[1])", word])
    action = lc.ExecCommand(argv)
    (line,) = action.apply(None)
    back = action.read_back(None)
    assert "exit code 0" in line and back["exit_code"] == 0 and back["output"] == [word]  # one word, as given
    assert not injected.exists()
    failing = lc.ExecCommand(lc.check_exec([sys.executable, "-c", "raise SystemExit(3)"]))
    failing.apply(None)
    assert failing.read_back(None)["exit_code"] == 3
    assert lc.check_exec(["true"])[0].endswith("/true")
    with pytest.raises(UserError, match=r"--exec /nonexistent: not an executable file"):
        lc.check_exec(["/nonexistent"])
    with pytest.raises(UserError, match="--exec: an empty command"):
        lc.check_exec([])


def test_advice_applied_live_must_need_no_restart():
    """labctl apply of a run's advice to the lab's running domain: pins go live; NIC queues or rings (a new
    device) and vhost pins (labctl's qemu hook, host-wide) are refused before anything starts."""
    from labctl import api
    from labctl.domain_edit.changes import changes_from_settings

    xml = api.render(load(GUEST))
    lc.check_domain_changes(changes_from_settings([("guest.pinning.vcpus.0", "0")]), xml, "the advice of run 4")
    for setting, reason in ((("guest.nics.*.queues", 2), "the domain must be restarted for it"),
                            (("guest.pinning.vhost", "0"), "vhost threads are pinned by labctl's qemu hook")):
        with pytest.raises(NotLiveError, match=f"^the advice of run 4: .*cannot be made live here: {reason}"):
            lc.check_domain_changes(changes_from_settings([setting]), xml, "the advice of run 4")
    action = lc.DomainChanges(changes_from_settings([("guest.pinning.emulator", "0-1")]), "qemu:///system",
                              "the advice of run 4")
    assert action.knobs == ["guest.pinning.emulator=0-1"] and action.label.startswith("labctl apply of the advice")
