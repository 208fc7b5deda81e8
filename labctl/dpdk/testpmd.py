"""Driving one dpdk-testpmd process: its command line, its interactive prompt and its statistics."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from labctl import signals
from labctl.dpdk.eal import EalOptions
from labctl.errors import WorkloadError
from labctl.safefs import make_dir, open_new

PROMPT = "testpmd> "
_FWD_PORT = re.compile(
    r"Forward statistics for port (\d+)\s+-+\s+"
    r"RX-packets:\s+(\d+)\s+RX-dropped:\s+(\d+)\s+RX-total:\s+(\d+)\s+"
    r"TX-packets:\s+(\d+)\s+TX-dropped:\s+(\d+)\s+TX-total:\s+(\d+)")


@dataclass(frozen=True)
class FwdStats:
    """testpmd's forward statistics of one port: the only place ring-full drops (TX-dropped) show."""

    rx_packets: int
    rx_dropped: int
    tx_packets: int
    tx_dropped: int

    def minus(self, other: "FwdStats") -> "FwdStats":
        return FwdStats(self.rx_packets - other.rx_packets, self.rx_dropped - other.rx_dropped,
                        self.tx_packets - other.tx_packets, self.tx_dropped - other.tx_dropped)


def parse_fwd_stats(text: str) -> dict[int, FwdStats]:
    stats = {}
    for match in _FWD_PORT.finditer(text):
        port, rx, rx_drop, _rx_total, tx, tx_drop, _tx_total = map(int, match.groups())
        stats[port] = FwdStats(rx, rx_drop, tx, tx_drop)
    return stats


@dataclass
class TestpmdOptions:
    """The application half of a testpmd command line."""

    forward_mode: str
    nb_cores: int
    rxq: int = 1
    txq: int = 1
    rxd: int | None = None
    txd: int | None = None
    burst: int = 32
    total_mbufs: int = 65536
    extra: list[str] = field(default_factory=list)
    stats_period_s: int | None = None  # non-interactive: forward at once, print stats, run until signalled

    def argv(self) -> list[str]:
        mode = ["-i"] if self.stats_period_s is None else [f"--stats-period={self.stats_period_s}"]
        args = [*mode, f"--forward-mode={self.forward_mode}", f"--nb-cores={self.nb_cores}",
                f"--rxq={self.rxq}", f"--txq={self.txq}", f"--burst={self.burst}",
                f"--total-num-mbufs={self.total_mbufs}", "--no-lsc-interrupt", "--disable-link-check"]
        if self.rxd:
            args.append(f"--rxd={self.rxd}")
        if self.txd:
            args.append(f"--txd={self.txd}")
        return args + self.extra


def testpmd_binary() -> str:
    """The host's dpdk-testpmd on PATH: what a Testpmd runs when it is given no binary (the labs pass the one
    :mod:`labctl.lab.builds` resolved)."""
    path = shutil.which("dpdk-testpmd")
    if not path:
        raise WorkloadError("dpdk-testpmd is not installed (make setup installs Debian's dpdk-dev)")
    return path


class Testpmd:
    """A running interactive testpmd; output is line-buffered (stdbuf) and kept in a log."""

    def __init__(self, role: str, eal: EalOptions, app: TestpmdOptions, log_path: Path, binary: str | None = None,
                 env: dict[str, str] | None = None):
        """``binary``: the testpmd to run (None: the host's); ``env``: variables added to its environment
        only (a build's LD_LIBRARY_PATH), never to labctl's."""
        self.role = role
        self.eal = eal
        self.app = app
        self.log_path = log_path
        self.binary = binary
        self.env = dict(env or {})
        self.proc: subprocess.Popen | None = None
        self._lines: list[str] = []
        self._partial = ""
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None

    @property
    def argv(self) -> list[str]:
        return ["stdbuf", "-oL", "-eL", self.binary or testpmd_binary(), *self.eal.argv(), "--", *self.app.argv()]

    def _environ(self) -> dict[str, str] | None:
        return {**os.environ, **self.env} if self.env else None

    def start(self) -> int:
        make_dir(self.log_path.parent)
        self._log = open_new(self.log_path)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, bufsize=0, start_new_session=True, env=self._environ())
        self._reader = threading.Thread(target=self._read, name=f"testpmd-{self.role}", daemon=True)
        self._reader.start()
        return self.proc.pid

    def start_daemon(self) -> int:
        """Start non-interactively (needs ``app.stats_period_s``): it outlives labctl, logging to a file,
        and stops on SIGTERM (``labctl down``)."""
        if self.app.stats_period_s is None:
            raise ValueError("a daemon testpmd needs stats_period_s")
        make_dir(self.log_path.parent)
        with open_new(self.log_path) as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, env=self._environ())
        return self.proc.pid

    def wait_paths(self, paths: list[Path], timeout_s: float = 60.0,
                   ready: Callable[[Path], bool] = Path.exists) -> None:
        """Wait until every path is ``ready`` (by default: exists): vhost-user sockets it creates."""
        deadline = time.monotonic() + timeout_s
        while not all(ready(p) for p in paths):
            if self.proc and self.proc.poll() is not None:
                if self._reader:
                    self._reader.join(1)
                text = self.output() if self._reader else self.log_path.read_text(errors="replace")
                tail = text.strip().splitlines()[-3:]
                raise WorkloadError(f"{self.role} testpmd exited with code {self.proc.returncode}: "
                                    f"{' / '.join(tail)} (log {self.log_path})")
            if time.monotonic() > deadline:
                raise WorkloadError(f"{self.role} testpmd made no {paths[0].name} within {timeout_s:.0f} s "
                                    f"(log {self.log_path})")
            signals.sleep(0.005)

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            text = chunk.decode(errors="replace")
            self._log.write(text)
            with self._cond:
                self._partial += text
                self._cond.notify_all()
        self._log.flush()
        with self._cond:
            self._cond.notify_all()

    def output(self) -> str:
        with self._cond:
            return self._partial

    def wait_for(self, needle: str | re.Pattern, timeout_s: float, start: int = 0) -> tuple[int, str]:
        """Wait until ``needle`` appears in the output after offset ``start``; return (end offset, text)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                text = self._partial[start:]
                match = needle.search(text) if isinstance(needle, re.Pattern) else None
                index = match.end() if match else (text.find(needle) + len(needle) if isinstance(needle, str) and needle in text else -1)
                if index >= 0:
                    return start + index, text[:index]
                if self.proc and self.proc.poll() is not None:
                    raise WorkloadError(f"{self.role} testpmd exited with code {self.proc.returncode}: "
                                        f"{self.last_error()} (log {self.log_path})")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WorkloadError(f"{self.role} testpmd: no {getattr(needle, 'pattern', needle)!r} "
                                        f"within {timeout_s:.0f} s (log {self.log_path})")
                self._cond.wait(min(remaining, 0.2))
                signals.checkpoint()

    def last_error(self) -> str:
        lines = [line for line in self.output().splitlines() if re.search(r"(?i)error|fail|cannot|invalid", line)]
        return lines[-1].strip() if lines else "no error message"

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        self.wait_for(PROMPT, timeout_s)

    def command(self, text: str, timeout_s: float = 15.0) -> str:
        """Send one command; return what testpmd printed before its next prompt."""
        if not self.proc or not self.proc.stdin or self.proc.poll() is not None:
            raise WorkloadError(f"{self.role} testpmd is not running (log {self.log_path})")
        with self._cond:
            start = len(self._partial)
        try:
            self.proc.stdin.write(text.encode() + b"\n")
        except BrokenPipeError:
            raise WorkloadError(f"{self.role} testpmd closed its input (log {self.log_path})") from None
        _end, out = self.wait_for(PROMPT, timeout_s, start)
        return out

    def fwd_stats(self) -> dict[int, FwdStats]:
        return parse_fwd_stats(self.command("show fwd stats all"))

    def request_quit(self) -> None:
        """Ask it to stop forwarding and exit, without waiting (quit() waits)."""
        if not self.proc or self.proc.poll() is not None or not self.proc.stdin or self.proc.stdin.closed:
            return
        try:
            self.proc.stdin.write(b"stop\nquit\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def quit(self, timeout_s: float = 15.0) -> None:
        """Stop forwarding and exit; kill when it does not exit in time."""
        if not self.proc:
            return
        if self.proc.poll() is None:
            if self._reader is not None and PROMPT not in self.output():
                # never at its prompt (e.g. a listening virtio_user port waiting in accept() for a
                # vswitch that failed): it cannot read "quit", and it survives SIGTERM there (accept
                # is retried for the next port). Its memory is --in-memory or --no-huge: nothing to flush.
                self.proc.kill()
            else:
                self.request_quit()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
        if self._reader:
            self._reader.join(5)
        self._log.close()
