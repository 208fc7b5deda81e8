"""The QEMU guest agent of a user's image, driven through libvirt (``libvirt_qemu.qemuAgentCommand``).

The agent speaks QMP-style JSON over the virtio-serial port ``org.qemu.guest_agent.0`` (QEMU's "QEMU Guest
Agent Protocol Reference"): ``guest-ping``, ``guest-exec`` (``path``, ``arg``, ``capture-output``) with
``guest-exec-status`` polled for ``exited``, ``exitcode`` and base64 ``out-data``/``err-data``, and
``guest-file-open``/``-read``/``-write``/``-close`` (base64 ``buf-b64``). Every command is an argument
list: nothing is ever handed to a shell as a string. A long-running process (:meth:`GuestAgent.spawn`)
runs under ``/bin/sh -c`` with a fixed script and the argv as positional parameters, so its output goes
to a log in the guest that :meth:`GuestAgent.read_file` reads while it runs.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from labctl import signals
from labctl.errors import AgentError

CHANNEL = "org.qemu.guest_agent.0"  # the name qemu-guest-agent opens (QEMU's guest agent documentation)
PING_TIMEOUT_S = 5  # one guest-ping's own bound (libvirt's timeout argument, seconds)
COMMAND_TIMEOUT_S = 30
#: The spawn script: the argv arrives as "$0" "$@" (never interpolated), the log path in $LABCTL_LOG.
SPAWN_SCRIPT = 'exec "$0" "$@" >>"$LABCTL_LOG" 2>&1 </dev/null'
READ_CHUNK = 1 << 20


def _default_command(dom: Any, cmd: str, timeout_s: int, flags: int) -> str:
    import libvirt_qemu

    return libvirt_qemu.qemuAgentCommand(dom, cmd, timeout_s, flags)


@dataclass(frozen=True)
class ExecResult:
    """A finished guest command: exit code, standard output and error (decoded, replaced where not UTF-8)."""

    argv: tuple[str, ...]
    exitcode: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.exitcode == 0

    def tail(self, lines: int = 5) -> str:
        text = (self.err or self.out).strip().splitlines()
        return " | ".join(text[-lines:])


class GuestAgent:
    """The agent of domain ``dom`` (a libvirt ``virDomain``). ``command`` is libvirt's
    ``qemuAgentCommand(dom, json, timeout, flags)``; tests hand in recorded replies."""

    def __init__(self, dom: Any, name: str = "", command: Callable[[Any, str, int, int], str] | None = None):
        self.dom = dom
        self.name = name or "the guest"
        self._command = command or _default_command

    def call(self, execute: str, arguments: dict[str, Any] | None = None, timeout_s: int = COMMAND_TIMEOUT_S) -> Any:
        """One agent command; its ``return`` value. A libvirt error becomes an :class:`AgentError`."""
        request: dict[str, Any] = {"execute": execute}
        if arguments is not None:
            request["arguments"] = arguments
        try:
            reply = self._command(self.dom, json.dumps(request), int(timeout_s), 0)
        except Exception as exc:  # noqa: BLE001 - libvirt.libvirtError and friends, one line
            raise AgentError(f"{self.name}: guest agent {execute}: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                             ) from None
        try:
            data = json.loads(reply)
        except (TypeError, ValueError):
            raise AgentError(f"{self.name}: guest agent {execute}: not JSON: {str(reply)[:80]!r}") from None
        if isinstance(data, dict) and "error" in data:
            raise AgentError(f"{self.name}: guest agent {execute}: {data['error'].get('desc', data['error'])}")
        return data.get("return") if isinstance(data, dict) else data

    def wait_ready(self, bound_s: float, poll_s: float = 2.0) -> float:
        """``guest-ping`` until it answers; seconds waited. Past ``bound_s`` one line says what did not
        answer and what to check."""
        t0 = time.monotonic()
        deadline = t0 + bound_s
        while True:
            try:
                self.call("guest-ping", timeout_s=PING_TIMEOUT_S)
                return time.monotonic() - t0
            except AgentError:
                pass
            if time.monotonic() + poll_s > deadline:
                raise AgentError(f"{self.name}: the guest agent on channel {CHANNEL} did not answer within "
                                 f"{bound_s:.0f} s (check: the image boots and has the qemu-guest-agent package "
                                 f"with its service enabled, and the domain XML has the {CHANNEL} channel)")
            signals.sleep(poll_s)

    # -- processes -------------------------------------------------------------------------------

    def start(self, argv: list[str], env: list[str] | None = None, capture: bool = True) -> int:
        """``guest-exec`` of an argument list; the guest's pid."""
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("an argv is a non-empty list of strings")
        args: dict[str, Any] = {"path": argv[0], "arg": list(argv[1:]), "capture-output": capture}
        if env:
            args["env"] = list(env)
        return int(self.call("guest-exec", args)["pid"])

    def status(self, pid: int) -> dict[str, Any]:
        return self.call("guest-exec-status", {"pid": pid})

    def run(self, argv: list[str], timeout_s: float = 60.0, poll_s: float = 0.2) -> ExecResult:
        """Run ``argv`` in the guest to its end (at most ``timeout_s``); its exit code and output."""
        pid = self.start(argv)
        deadline = time.monotonic() + timeout_s
        while True:
            st = self.status(pid)
            if st.get("exited"):
                code = st.get("exitcode")
                if code is None:  # killed by a signal
                    code = 128 + int(st.get("signal", 0))
                return ExecResult(tuple(argv), int(code), _b64(st.get("out-data")), _b64(st.get("err-data")))
            if time.monotonic() > deadline:
                raise AgentError(f"{self.name}: {' '.join(argv)[:80]} did not end within {timeout_s:.0f} s")
            signals.sleep(poll_s)

    def check(self, argv: list[str], timeout_s: float = 60.0) -> str:
        """:meth:`run` that must succeed; its standard output."""
        result = self.run(argv, timeout_s)
        if not result.ok:
            raise AgentError(f"{self.name}: {' '.join(argv)[:80]} exited {result.exitcode}: {result.tail(3)}")
        return result.out

    def spawn(self, argv: list[str], log_path: str) -> int:
        """Start a long-running ``argv`` whose output goes to ``log_path`` in the guest (readable while it
        runs); its pid. The script is fixed: the argv is passed as ``$0 $@``, the log path in the environment."""
        if not argv:
            raise ValueError("an argv is a non-empty list of strings")
        return self.start(["/bin/sh", "-c", SPAWN_SCRIPT, *argv], env=[f"LABCTL_LOG={log_path}",
                          "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], capture=False)

    def exited(self, pid: int) -> int | None:
        """The exit code of a spawned process once it ended (128+signal when killed), else None."""
        st = self.status(pid)
        if not st.get("exited"):
            return None
        code = st.get("exitcode")
        return int(code) if code is not None else 128 + int(st.get("signal", 0))

    # -- files -----------------------------------------------------------------------------------

    def read_file(self, path: str, limit: int = 4 * READ_CHUNK) -> bytes:
        handle = self.call("guest-file-open", {"path": path, "mode": "r"})
        data = b""
        try:
            while len(data) < limit:
                chunk = self.call("guest-file-read", {"handle": handle, "count": min(READ_CHUNK, limit - len(data))})
                data += base64.b64decode(chunk.get("buf-b64", ""))
                if chunk.get("eof") or not chunk.get("count"):
                    break
        finally:
            self.call("guest-file-close", {"handle": handle})
        return data

    def write_file(self, path: str, data: bytes, mode: str = "w") -> None:
        """Write ``data`` to ``path`` in the guest (sysfs files too: one write)."""
        handle = self.call("guest-file-open", {"path": path, "mode": mode})
        try:
            self.call("guest-file-write", {"handle": handle, "buf-b64": base64.b64encode(data).decode()})
        finally:
            self.call("guest-file-close", {"handle": handle})

    def tail(self, path: str, lines: int = 8) -> str:
        """The last lines of a guest file (a spawned process's log), '' when unreadable."""
        try:
            text = self.read_file(path).decode(errors="replace")
        except AgentError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])


def _b64(value: str | None) -> str:
    return base64.b64decode(value).decode(errors="replace") if value else ""
