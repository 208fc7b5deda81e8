"""The testpmd command lines of the embedded lab: vhost-user roles, memory sizing, noisy memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from labctl.forwarder import embedded_forwarder, noisy_memory_mb
from labctl.profiles import load_profile
from labctl.testpmd import EAL_HEADROOM_MB, mbuf_budget
from labctl.vswitch import vswitch_config, vswitch_testpmd
from tests.conftest import DOMAINS

CPUS = frozenset({0, 1})
SOCKETS = [Path("/run/x/vhost-0.sock"), Path("/run/x/vhost-1.sock")]


def _profile(**overrides):
    return load_profile(DOMAINS / "quick.yaml", overrides=overrides or None, cpus=CPUS).profile


def _vdevs(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--vdev"]


def test_embedded_vswitch_is_the_client_and_starts_ports_on_command(tmp_path):
    profile = _profile()
    vswitch = vswitch_testpmd(vswitch_config(profile, SOCKETS, "p-vs", None, client=True), tmp_path / "vs.log")
    argv = vswitch.eal.argv() + vswitch.app.argv()
    assert _vdevs(argv) == ["net_vhost0,iface=/run/x/vhost-0.sock,queues=1,client=1",
                            "net_vhost1,iface=/run/x/vhost-1.sock,queues=1,client=1"]
    # ports connect when started (connect_ports), and nothing prints from other threads meanwhile
    assert "--disable-device-start" in argv and "--log-level=lib.vhost.config:warning" in argv
    assert {"--mask-event=intr_lsc", "--mask-event=queue_state"} <= set(argv)


def test_libvirt_vswitch_stays_the_server(tmp_path):
    vswitch = vswitch_testpmd(vswitch_config(_profile(), SOCKETS, "p-vs", None), tmp_path / "vs.log",
                              forward_mode="rxonly", stats_period_s=10)
    argv = vswitch.eal.argv() + vswitch.app.argv()
    assert all("client" not in vdev for vdev in _vdevs(argv))
    assert "--disable-device-start" not in argv and not any(a.startswith("--log-level") for a in argv)


def test_embedded_guest_listens(tmp_path):
    guest = embedded_forwarder(_profile(**{"guest.nics.*.queues": 2, "guest.nics.*.rx_queue_size": 1024}),
                               SOCKETS, "p-g", None, tmp_path / "g.log", server=True)
    assert _vdevs(guest.eal.argv()) == [
        "net_virtio_user0,path=/run/x/vhost-0.sock,queues=2,queue_size=1024,server=1",
        "net_virtio_user1,path=/run/x/vhost-1.sock,queues=2,queue_size=1024,server=1"]


@pytest.mark.parametrize("ports,queues,rxd,txd", [(2, 1, 256, 256), (2, 4, 1024, 1024), (2, 8, 4096, 4096)])
def test_mbuf_budget_fits_the_pool_in_whole_pages(ports, queues, rxd, txd):
    for hugepages, per_mbuf in ((True, 2383), (False, 4096)):  # bytes per mbuf measured with DPDK 22.11
        mbufs, memory_mb = mbuf_budget(ports, queues, rxd, txd, hugepages)
        assert mbufs >= 2 * ports * queues * (rxd + txd)
        assert memory_mb % 2 == 0
        assert memory_mb * (1 << 20) >= mbufs * per_mbuf + 12 * (1 << 20)  # ~12 MB besides the pool
        assert memory_mb <= -(-mbufs * per_mbuf // (1 << 20)) + EAL_HEADROOM_MB + 80  # no blanket floor


def test_hugepages_need_less_memory_than_4k_pages():
    assert mbuf_budget(2, 1, 256, 256, True)[1] < mbuf_budget(2, 1, 256, 256, False)[1]


def test_noisy_memory_is_per_stream():
    io = _profile()
    assert noisy_memory_mb(io) == 0
    one = _profile(**{"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 9})
    two = _profile(**{"workload.mode": "noisy", "workload.noisy.lkup_memory_mib": 9, "guest.nics.*.queues": 2})
    # one lookup area per port and queue, and whole 2 MiB pages
    assert noisy_memory_mb(one) >= 2 * 9 and noisy_memory_mb(two) >= 4 * 9
    assert noisy_memory_mb(one) % 2 == 0 and noisy_memory_mb(two) % 2 == 0
