"""A client for DPDK's telemetry socket (v2: SOCK_SEQPACKET, one JSON reply per command)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from labctl import platform
from labctl import signals
from labctl.errors import WorkloadError

RUNTIME_ROOT = platform.DPDK_RUNTIME_ROOT


def socket_path(file_prefix: str) -> Path:
    return RUNTIME_ROOT / file_prefix / "dpdk_telemetry.v2"


class Telemetry:
    """One connection to a DPDK process's telemetry socket."""

    def __init__(self, path: Path, timeout_s: float = 5.0):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout_s)
        try:
            self.sock.connect(str(path))
            self.info = json.loads(self.sock.recv(16384))
        except (OSError, ValueError) as exc:
            self.sock.close()
            raise WorkloadError(f"telemetry {path}: {exc}") from None
        self.max_len = int(self.info.get("max_output_len", 16384))

    @classmethod
    def connect(cls, file_prefix: str, wait_s: float = 20.0) -> "Telemetry":
        path = socket_path(file_prefix)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return cls(path)
            except WorkloadError:
                if time.monotonic() > deadline:
                    raise
                signals.sleep(0.05)

    def command(self, cmd: str) -> Any:
        try:
            self.sock.send(cmd.encode())
            reply = json.loads(self.sock.recv(max(self.max_len, 16384) * 4))
        except (OSError, ValueError) as exc:
            raise WorkloadError(f"telemetry {cmd}: {exc}") from None
        key = cmd.split(",", 1)[0]
        return reply.get(key) if isinstance(reply, dict) else reply

    def ports(self) -> list[int]:
        return list(self.command("/ethdev/list") or [])

    def port_stats(self, port: int) -> dict[str, Any]:
        return self.command(f"/ethdev/stats,{port}") or {}

    def snapshot(self) -> dict[int, dict[str, Any]]:
        """Stats of every port, taken as close together as the socket allows."""
        return {port: self.port_stats(port) for port in self.ports()}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Telemetry":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
