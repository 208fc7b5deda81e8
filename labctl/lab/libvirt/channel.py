"""The host end of the appliance's control channel: a virtio-serial port, QEMU's unix socket here.

A guest booted in the appliance's ``serve`` mode reads one command a line from the port named
:data:`CHANNEL_NAME` and answers with ``LABCTL-*`` lines (the protocol is documented at the top of
``appliance/files/init.sh``). libvirt makes the socket itself (``<channel type='unix'><source
mode='bind'/>``: QEMU listens, the path is read back from the live domain XML). A virtio-serial port
drops what the host sends before the guest opens it, so :meth:`GuestChannel.hello` repeats HELLO until
the guest answers.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Callable

from labctl import signals
from labctl.errors import WorkloadError
from labctl.safefs import open_new

CHANNEL_NAME = "org.labctl.ctl"


class GuestChannel:
    """A connection to one guest's control port; a reader thread collects its ``LABCTL-*`` lines."""

    def __init__(self, path: Path, log: Path | None = None, connect_timeout_s: float = 30.0):
        self.path = path
        self.lines: list[tuple[str, Any]] = []  # (tag, data) in arrival order
        self._cond = threading.Condition()
        self._closed = False
        self._log = open_new(log, "a") if log is not None else None
        deadline = time.monotonic() + connect_timeout_s
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(str(path))
                break
            except OSError as exc:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise WorkloadError(f"guest channel {path}: {exc.strerror or exc}") from None
                signals.sleep(0.1)
        self._reader = threading.Thread(target=self._read, name="labctl-guest-channel", daemon=True)
        self._reader.start()

    # -- reading ---------------------------------------------------------------------------------

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                self._line(raw.decode(errors="replace").strip("\r"))
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _line(self, line: str) -> None:
        if self._log is not None:
            self._log.write(line + "\n")
            self._log.flush()
        index = line.find("LABCTL-")
        if index < 0:
            return
        tag, _, payload = line[index:].partition(" ")
        try:
            data = json.loads(payload) if payload else None
        except ValueError:
            data = payload
        with self._cond:
            self.lines.append((tag, data))
            self._cond.notify_all()

    def mark(self) -> int:
        """A position in the stream: :meth:`wait` looks only at lines after it."""
        with self._cond:
            return len(self.lines)

    def wait(self, tag: str, after: int, timeout_s: float, what: str,
             match: Callable[[Any], bool] = lambda data: True) -> tuple[int, Any]:
        """The first ``tag`` line after position ``after`` that ``match``es; a LABCTL-ERROR line, the end of
        the connection or ``timeout_s`` raise WorkloadError naming ``what`` was awaited."""
        deadline = time.monotonic() + timeout_s
        seen = after
        with self._cond:
            while True:
                for index in range(seen, len(self.lines)):
                    got_tag, data = self.lines[index]
                    if got_tag == tag and match(data):
                        return index + 1, data
                    if got_tag == "LABCTL-ERROR":
                        message = data.get("message") if isinstance(data, dict) else data
                        raise WorkloadError(f"guest: {what}: {message}")
                seen = len(self.lines)
                if self._closed:
                    raise WorkloadError(f"guest channel closed while waiting for {what} ({self.path})")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkloadError(f"guest: no answer ({what}) within {timeout_s:.0f} s ({self.path})")
                self._cond.wait(min(remaining, 0.2))
                signals.checkpoint()

    # -- commands --------------------------------------------------------------------------------

    def send(self, line: str) -> None:
        if "\n" in line:
            raise ValueError("one command a line")
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError as exc:
            raise WorkloadError(f"guest channel {self.path}: {exc.strerror or exc}") from None

    def hello(self, timeout_s: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(NICs as the guest's kernel saw them, the READY report), asking until the guest answers."""
        deadline = time.monotonic() + timeout_s
        while True:
            start = self.mark()
            self.send("HELLO")
            try:
                end, ready = self.wait("LABCTL-READY", start, min(1.0, max(deadline - time.monotonic(), 0.1)),
                                       "its READY report")
            except WorkloadError:
                if time.monotonic() > deadline or self._closed or self._errors_after(start):
                    raise
                continue
            nics = [data for tag, data in self.lines[start:end] if tag == "LABCTL-NIC"]
            return nics, ready

    def reprobe(self, timeout_s: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """After a NIC swap: (the NICs as the guest's kernel now negotiated them, the READY report), once the
        guest found every NIC again and bound them (REPROBE; init.sh waits up to 60 s for the devices)."""
        start = self.mark()
        self.send("REPROBE")
        end, ready = self.wait("LABCTL-READY", start, timeout_s, "the swapped NICs (REPROBE)")
        with self._cond:
            nics = [data for tag, data in self.lines[start:end] if tag == "LABCTL-NIC"]
        return nics, ready

    def _errors_after(self, start: int) -> bool:
        with self._cond:
            return any(tag == "LABCTL-ERROR" for tag, _ in self.lines[start:])

    def start_forwarder(self, argv: list[str], timeout_s: float = 300.0) -> None:
        """Start the guest's testpmd with these application arguments; returns once it is at its prompt."""
        start = self.mark()
        self.send("FWD " + ",".join(argv))
        self.wait("LABCTL-INFO", start, timeout_s, "testpmd ready",
                  match=lambda data: isinstance(data, dict) and data.get("testpmd") == "ready")

    def testpmd(self, command: str) -> None:
        self.send(f"TP {command}")

    def stats(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """The guest forwarder's counters now (testpmd's forward statistics, per port and per stream)."""
        start = self.mark()
        self.testpmd("show fwd stats all")
        _end, data = self.wait("LABCTL-STATS", start, timeout_s, "forward statistics")
        return data

    def end_forwarder(self, timeout_s: float = 60.0) -> dict[str, Any]:
        start = self.mark()
        self.send("END")
        _end, data = self.wait("LABCTL-FWD-END", start, timeout_s, "the forwarder's end")
        return data

    def poweroff(self) -> None:
        try:
            self.send("POWEROFF")
        except WorkloadError:
            pass

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._reader.join(2)
        if self._log is not None:
            self._log.close()
