"""The image guest's in-guest steps against a scripted agent, its forwarder command lines, and its counters."""

from __future__ import annotations

import subprocess

import pytest

from labctl.errors import AgentError, GuestForwarderError, UserError
from labctl.lab.libvirt import image_setup
from labctl.lab.libvirt.image_guest import check_image, host_side_counters
from labctl.lab.libvirt.negotiation import compare_nics
from labctl.lab.plan import derive
from labctl.profile.schema import Profile

NICS_OUT = ("enp1s0 52:54:aa:bb:cc:00 0000:00:03.0 virtio-pci\n"
            "enp2s0 52:54:aa:bb:cc:01 0000:00:04.0 virtio-pci\n")
RINGS = """Ring parameters for enp1s0:
Pre-set maximums:
RX:             512
RX Mini:        n/a
TX:             512
Current hardware settings:
RX:             512
RX Mini:        n/a
TX:             256
"""
CHANNELS = """Channel parameters for enp1s0:
Pre-set maximums:
RX:             n/a
TX:             n/a
Other:          n/a
Combined:       1
Current hardware settings:
Combined:       1
"""


@pytest.fixture(autouse=True)
def _qemu_reads_anything(monkeypatch):
    """pytest's tmp_path (under a 0700 directory) is not one QEMU's user could enter; no QEMU starts here
    (the readability check has its own test in tests/unit/profile/test_guest_image.py)."""
    from labctl.lab.libvirt import image_guest

    monkeypatch.setattr(image_guest, "check_qemu_reads", lambda info: None)


def _plan(tmp_path, **workload):
    image = tmp_path / "g.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "16M"], check=True)
    nics = [{"rx_queue_size": 512, "tx_queue_size": 256}] * 2
    return derive(Profile.model_validate({"name": "img", "guest": {"image": str(image), "vcpus": 2, "nics": nics},
                                          "workload": {"forwarder": "testpmd", "rxd": 1024, **workload}}))


class Scripted:
    """A GuestAgent stand-in: argv -> (exit code, output); files in a dict."""

    name = "labctl-img"

    def __init__(self, replies):
        self.replies = replies
        self.ran: list[list[str]] = []
        self.files: dict[str, bytes] = {"/proc/sys/vm/nr_hugepages": b"0\n", "/proc/mounts": b"proc /proc proc rw 0 0\n"}
        self.writes: list[tuple[str, bytes]] = []

    def run(self, argv, timeout_s=60.0):
        from labctl.lab.libvirt.agent import ExecResult

        self.ran.append(list(argv))
        code, out = self.replies.get(tuple(argv[:2]), (0, ""))
        return ExecResult(tuple(argv), code, out, "")

    def check(self, argv, timeout_s=60.0):
        result = self.run(argv, timeout_s)
        if not result.ok:
            raise AgentError(f"{argv[0]} failed")
        return result.out

    def write_file(self, path, data, mode="w"):
        self.writes.append((path, data))
        if path == "/proc/sys/vm/nr_hugepages":
            self.files[path] = data

    def read_file(self, path, limit=0):
        return self.files.get(path, b"")


def _macs(plan):
    return NICS_OUT.replace("52:54:aa:bb:cc:00", plan.nics[0].mac).replace("52:54:aa:bb:cc:01", plan.nics[1].mac)


def test_nics_found_by_mac_with_rings_read_before_binding(tmp_path):
    plan = _plan(tmp_path)
    agent = Scripted({("/bin/sh", "-c"): (0, _macs(plan)), ("ethtool", "-g"): (0, RINGS),
                      ("ethtool", "-l"): (0, CHANNELS), ("readlink", "-f"): (0, "/sys/bus/pci/drivers/uio_pci_generic\n")})
    nics = image_setup.read_nics(agent, plan)
    assert [n["pci"] for n in nics] == ["0000:00:03.0", "0000:00:04.0"]
    assert nics[0]["rx_ring"] == 512 and nics[0]["tx_ring"] == 256 and nics[0]["combined"] == 1
    assert all(n["differences"] == [] for n in compare_nics(plan, nics))
    assert image_setup.load_driver(agent) == "uio_pci_generic"
    image_setup.bind(agent, [n["pci"] for n in nics], "uio_pci_generic")
    writes = [w for w in agent.writes if "0000:00:03.0" in w[0] or w[0].endswith("drivers_probe")]
    assert writes[0] == ("/sys/bus/pci/devices/0000:00:03.0/driver_override", b"uio_pci_generic\n")
    assert ("/sys/bus/pci/drivers_probe", b"0000:00:03.0") in writes
    ethtool_at = max(i for i, a in enumerate(agent.ran) if a[0] == "ethtool")
    modprobe_at = min(i for i, a in enumerate(agent.ran) if a[0] == "modprobe")
    assert ethtool_at < modprobe_at  # negotiated rings read before the kernel driver lets go


def test_vfio_when_uio_is_missing_and_neither_is_one_line(tmp_path):
    agent = Scripted({("modprobe", "uio_pci_generic"): (1, "")})
    assert image_setup.load_driver(agent) == "vfio-pci"
    assert ["modprobe", "vfio", "enable_unsafe_noiommu_mode=1"] in agent.ran
    agent = Scripted({("modprobe", "uio_pci_generic"): (1, ""), ("modprobe", "vfio"): (1, "")})
    with pytest.raises(AgentError, match="neither uio_pci_generic nor vfio-pci"):
        image_setup.load_driver(agent)


def test_hugepages_reserved_and_mounted():
    agent = Scripted({})
    assert image_setup.reserve_hugepages(agent, 1536) == 384
    assert ["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"] in agent.ran


def test_testpmd_argv_has_the_plans_arguments_and_the_nics(tmp_path):
    plan = _plan(tmp_path, burst=64)
    fwd = image_setup.forwarder_argv(plan, ["0000:00:03.0", "0000:00:04.0"])
    argv = list(fwd.argv)
    assert argv[0] == "dpdk-testpmd" and fwd.kind == "testpmd"
    assert argv[argv.index("--lcores") + 1] == "0@(0-1),1@0,2@1"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-a"] == ["0000:00:03.0", "0000:00:04.0"]
    app = argv[argv.index("--") + 1:]
    assert "--rxd=512" in app and "--txd=256" in app and "--burst=64" in app and "--nb-cores=2" in app
    assert "-i" not in app and "--stats-period=5" in app  # non-interactive


def test_command_template_filled_per_argument(tmp_path):
    plan = _plan(tmp_path, forwarder="command",
                 command="dpdk-l2fwd -l {cores} -a {pci0} -a {pci1} -- -p 0x3 --rx={rxd} -q {queues}")
    fwd = image_setup.forwarder_argv(plan, ["0000:00:03.0", "0000:00:04.0"])
    assert list(fwd.argv) == ["dpdk-l2fwd", "-l", "0-1", "-a", "0000:00:03.0", "-a", "0000:00:04.0", "--", "-p",
                              "0x3", "--rx=512", "-q", "1"]
    with pytest.raises(GuestForwarderError, match="pci1"):
        image_setup.forwarder_argv(plan, ["0000:00:03.0"])


def test_host_side_counters_stand_for_the_guest():
    fwd, ports = host_side_counters({0: {"ipackets": 90, "opackets": 100}, 1: {"ipackets": 95, "opackets": 100}})
    assert fwd[0].rx_packets == 100 and fwd[0].tx_packets == 90
    assert ports[1]["q_opackets"] == [95]


def test_check_image_names_the_field(tmp_path):
    plan = _plan(tmp_path)
    assert check_image(plan, "qemu:///system").format == "qcow2"
    (tmp_path / "g.qcow2").write_text("gone bad")
    with pytest.raises(UserError, match=r"^guest\.image: "):
        check_image(plan, "qemu:///system")
    with pytest.raises(UserError, match="test driver"):
        check_image(plan, "test:///default")


def test_agent_that_never_answers_leaves_nothing(tmp_path, monkeypatch):
    """The agent's bound passes: one line naming the channel; the ledger then removes domain and overlay."""
    from labctl.errors import AgentError as Fault
    from labctl.lab.ledger import load_state, teardown
    from labctl.lab.libvirt import hypervisor, image_guest
    from labctl.lab.libvirt.agent import GuestAgent

    plan = _plan(tmp_path)
    removed = []
    from labctl.lab.libvirt.domxml import RenderContext

    monkeypatch.setattr(image_guest, "render_context", lambda uri: RenderContext(domain_type="qemu"))
    monkeypatch.setattr(hypervisor, "define_and_start", lambda uri, xml: object())
    monkeypatch.setattr(hypervisor, "remove_domain", lambda uri, name: removed.append(name))
    monkeypatch.setattr(image_guest, "qemu_pid", lambda name: 0)

    def never(self, bound_s, poll_s=2.0):
        raise Fault(f"{self.name}: the guest agent on channel org.qemu.guest_agent.0 did not answer within "
                    f"{bound_s:.0f} s (check: ... qemu-guest-agent ...)")

    monkeypatch.setattr(GuestAgent, "wait_ready", never)
    state = load_state("img")
    domain = image_guest.ImageDomain(plan, state, "qemu:///system")
    with pytest.raises(Fault, match="org.qemu.guest_agent.0"):
        domain.boot()
    overlay_path = plan.image.overlay(plan.dirs)
    assert overlay_path.exists()
    assert [r.kind for r in state.resources] == ["dir", "overlay", "domain"]
    domain.close()
    assert teardown(state) == []
    assert removed == [plan.domain_name] and not overlay_path.exists() and not plan.dirs.run.exists()


class FakeGen:
    def __init__(self, received):
        self.received = list(received)
        self.probes = 0

    def ports(self):
        return {0: {"started": 1, "link": 1}, 1: {"started": 1, "link": 1}}

    def run_trial(self, spec):
        from types import SimpleNamespace

        self.probes += 1
        return SimpleNamespace(received=self.received.pop(0) if self.received else 0)


class SpawnAgent(Scripted):
    def __init__(self, exit_after=None):
        super().__init__({})
        self.files[image_setup.FORWARDER_LOG] = b"EAL: Detected 2 lcore(s)\nPort 0: link state change\nBye...\n"
        self.polls = 0
        self.exit_after = exit_after

    def exited(self, pid):
        self.polls += 1
        return 1 if self.exit_after is not None and self.polls > self.exit_after else None

    def tail(self, path, lines=8):
        return "\n".join(self.files[path].decode().splitlines()[-lines:])


def _lab(tmp_path, agent, gen):
    from labctl.lab.ledger import load_state
    from labctl.lab.libvirt.image_guest import ImageGuestLab

    lab = ImageGuestLab(_plan(tmp_path), load_state("img"), "qemu:///system", [])
    lab.generator = gen
    lab.image_domain.agent = agent
    lab.image_domain.fwd_pid = 42
    lab.image_domain.fwd_argv = ("dpdk-l2fwd",)
    return lab


def test_forwarder_waited_for_until_frames_come_back(tmp_path, monkeypatch):
    from labctl.lab.libvirt import image_guest

    monkeypatch.setattr(image_guest.signals, "sleep", lambda s: None)
    gen = FakeGen([0, 0, 5000])
    _lab(tmp_path, SpawnAgent(), gen)._wait_forwarding(60)
    assert gen.probes == 3


def test_forwarder_that_exits_is_reported_with_its_last_lines(tmp_path, monkeypatch):
    from labctl.lab.libvirt import image_guest

    monkeypatch.setattr(image_guest.signals, "sleep", lambda s: None)
    with pytest.raises(GuestForwarderError, match=r"dpdk-l2fwd\) exited with code 1: .*Bye\.\.\.") as info:
        _lab(tmp_path, SpawnAgent(exit_after=1), FakeGen([0, 0]))._wait_forwarding(60)
    assert "\n" not in str(info.value)


def test_forwarder_that_never_forwards_is_reported(tmp_path, monkeypatch):
    from labctl.lab.libvirt import image_guest

    clock = iter(range(0, 10000, 10))
    monkeypatch.setattr(image_guest.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(image_guest.signals, "sleep", lambda s: None)
    with pytest.raises(GuestForwarderError, match="did not forward the probe frames within 60 s .*link state change"):
        _lab(tmp_path, SpawnAgent(), FakeGen([]))._wait_forwarding(60)
