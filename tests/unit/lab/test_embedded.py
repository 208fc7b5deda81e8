"""The embedded lab's testpmd command lines (vhost-user roles, noisy memory) and port connection."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from labctl.errors import WorkloadError
from labctl.lab.embedded.forwarder import guest_forwarder
from labctl.host.sockets import unix_listening
from labctl.lab.embedded.vswitch import connect_ports, vswitch_testpmd
from labctl.lab.plan import LabDirs, derive, noisy_memory_mb
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})


SOCKETS = [Path("/run/x/vhost-0.sock"), Path("/run/x/vhost-1.sock")]


def _profile(**overrides):
    return load_profile(DOMAINS / "quick.yaml", overrides=overrides or None, cpus=CPUS).profile


def _plan(profile, log: Path):
    return derive(profile, LabDirs(Path("/run/x"), log))


def _vdevs(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--vdev"]


def test_embedded_vswitch_is_the_client_and_starts_ports_on_command(tmp_path):
    profile = _profile()
    vswitch = vswitch_testpmd(_plan(profile, tmp_path), None, client=True)
    argv = vswitch.eal.argv() + vswitch.app.argv()
    assert _vdevs(argv) == ["net_vhost0,iface=/run/x/vhost-0.sock,queues=1,client=1",
                            "net_vhost1,iface=/run/x/vhost-1.sock,queues=1,client=1"]
    # ports connect when started (connect_ports), and nothing prints from other threads meanwhile
    assert "--disable-device-start" in argv and "--log-level=lib.vhost.config:warning" in argv
    assert {"--mask-event=intr_lsc", "--mask-event=queue_state"} <= set(argv)


def test_libvirt_vswitch_stays_the_server(tmp_path):
    vswitch = vswitch_testpmd(_plan(_profile(), tmp_path), None, forward_mode="rxonly", stats_period_s=10)
    argv = vswitch.eal.argv() + vswitch.app.argv()
    assert all("client" not in vdev for vdev in _vdevs(argv))
    assert "--disable-device-start" not in argv and not any(a.startswith("--log-level") for a in argv)


def test_embedded_guest_listens(tmp_path):
    guest = guest_forwarder(_plan(_profile(**{"guest.nics.*.queues": 2, "guest.nics.*.rx_queue_size": 1024}),
                                  tmp_path), None, server=True)
    assert _vdevs(guest.eal.argv()) == [
        "net_virtio_user0,path=/run/x/vhost-0.sock,queues=2,queue_size=1024,server=1",
        "net_virtio_user1,path=/run/x/vhost-1.sock,queues=2,queue_size=1024,server=1"]


def test_noisy_memory_is_per_port():
    io = _profile()
    assert noisy_memory_mb(io) == 0
    one = _profile(**{"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 9})
    two = _profile(**{"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 9, "guest.nics.*.queues": 2})
    # one lookup area and software ring per port (testpmd's noisy_fwd_begin), in whole 2 MiB pages
    assert noisy_memory_mb(one) == noisy_memory_mb(two) >= 2 * 9
    assert noisy_memory_mb(one) % 2 == 0


class FakeTestpmd:
    def __init__(self, outputs=None, exists=True):
        self.commands: list[str] = []
        self.outputs = outputs or {}
        self.log_path = Path("/nonexistent/vs.log")
        self.waited: list[Path] = []
        self.ready_checks = []

    def command(self, text, timeout_s=15.0):
        self.commands.append(text)
        return self.outputs.get(text, "Configuring Port\nDone\n")

    def wait_paths(self, paths, timeout_s=60.0, ready=Path.exists):
        self.waited.extend(paths)
        self.ready_checks.append(ready)


def test_connect_ports_starts_each_port_once_its_socket_listens():
    vswitch, guest = FakeTestpmd(), FakeTestpmd()
    connect_ports(vswitch, guest, SOCKETS)
    assert vswitch.commands == ["port start 0", "port start 1"] and guest.waited == SOCKETS
    assert all(check is unix_listening for check in guest.ready_checks)


def test_connect_ports_names_a_port_that_did_not_start():
    vswitch = FakeTestpmd({"port start 1": "Configuring Port 1\nFail to configure port 1\n"})
    with pytest.raises(WorkloadError, match="vswitch port 1 did not start: Fail to configure port 1"):
        connect_ports(vswitch, FakeTestpmd(), SOCKETS)


def test_unix_listening_sees_listen_not_bind(tmp_path):
    path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        assert path.exists() and not unix_listening(path)  # the file is there before listen()
        sock.listen(1)
        assert unix_listening(path)
    finally:
        sock.close()
    assert not unix_listening(tmp_path / "other.sock")
