"""Numbered datagrams through a kernel guest: iperf3's UDP test, for ``labctl reconf`` on a kernel-stack lab.

A kernel guest's NIC belongs to virtio_net, so labgen's frames (which a DPDK forwarder turns round) never come
back from it. iperf3's UDP test numbers its datagrams instead, and its server counts the numbers that never
arrived, per reporting interval (iperf3 3.12: ``lost_packets`` of each interval of the server's JSON; the
client's ``--get-server-output`` brings that JSON back). The host's iperf3 is the client, paced at the asked
rate (``-b``: bits of UDP payload a second, so ``-l`` bytes a datagram times 8 times the rate), the guest's
the server, so what is lost is lost on the way into the guest: its tap, QEMU's virtio backend and its driver's
queues, what ``ethtool -L`` changes.

Resolution: the server's intervals are iperf3's shortest, 0.1 s, so an outage is located to 0.1 s (labgen
places one to a frame interval); and the test's start is known only within the client's connection set-up:
between the client's launch and its exit less the test's length (both on labctl's clock). ``align_s`` in a
result says how wide that is. Latency is not measured (iperf3 reports jitter).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from labctl import platform
from labctl.errors import WorkloadError

INTERVAL_S = 0.1  # iperf3's shortest reporting interval
DATAGRAM = 64  # bytes of UDP payload a datagram


def server_argv(bind: str, port: int) -> list[str]:
    """The guest's server: one test, intervals of 0.1 s, JSON (handed to the client at the end)."""
    return [platform.IPERF3, "-s", "-1", "-B", bind, "-p", str(port), "-i", str(INTERVAL_S), "-J"]


def client_argv(server: str, port: int, rate_pps: float, seconds: int) -> list[str]:
    """The host's client: ``rate_pps`` datagrams a second of :data:`DATAGRAM` bytes for ``seconds``."""
    bits = max(int(round(rate_pps * DATAGRAM * 8)), 1)
    return [platform.IPERF3, "-c", server, "-p", str(port), "-u", "-b", str(bits), "-l", str(DATAGRAM), "-t",
            str(seconds), "-i", str(INTERVAL_S), "-J", "--get-server-output", "--udp-counters-64bit"]


@dataclass(frozen=True)
class Interval:
    """One of the server's intervals: seconds from the test's start, datagrams received and lost in it."""

    start_s: float
    end_s: float
    packets: int
    lost: int
    jitter_ms: float


@dataclass(frozen=True)
class UdpTest:
    """A finished test: how long the client sent (``seconds``), what it sent, and the server's intervals."""

    seconds: float
    sent: int
    intervals: list[Interval]

    @property
    def lost(self) -> int:
        return sum(i.lost for i in self.intervals)


def parse(text: str) -> UdpTest:
    """The client's JSON (``-J --get-server-output``); WorkloadError saying what is missing."""
    try:
        data = json.loads(text)
    except ValueError:
        raise WorkloadError(f"iperf3 UDP: not JSON: {text.strip()[-200:] or 'no output'}") from None
    if data.get("error"):
        raise WorkloadError(f"iperf3 UDP: {data['error']}")
    server = data.get("server_output_json") or {}
    if not server.get("intervals"):
        raise WorkloadError("iperf3 UDP: no server intervals (the guest's server reported nothing)")
    total = (data.get("end") or {}).get("sum") or {}
    intervals = [Interval(float(s["start"]), float(s["end"]), int(s.get("packets", 0)), int(s.get("lost_packets", 0)),
                          float(s.get("jitter_ms", 0.0)))
                 for s in (i["sum"] for i in server["intervals"])]
    return UdpTest(float(total.get("seconds", 0.0)), int(total.get("packets", 0)), intervals)
