"""The guest agent client against recorded qemu-guest-agent replies (a fake qemuAgentCommand)."""

from __future__ import annotations

import base64
import json

import pytest

from labctl.errors import AgentError, LabFault
from labctl.lab.libvirt import agent as agent_mod
from labctl.lab.libvirt.agent import CHANNEL, SPAWN_SCRIPT, GuestAgent


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class FakeAgent:
    """Replies recorded from qemu-guest-agent 7.2 (Debian 12), keyed by command."""

    def __init__(self, replies: dict | None = None):
        self.requests: list[dict] = []
        self.replies = replies or {}
        self.files: dict[str, bytes] = {}
        self.status_calls = 0

    def __call__(self, dom, cmd: str, timeout: int, flags: int) -> str:
        request = json.loads(cmd)
        self.requests.append(request)
        name = request["execute"]
        reply = self.replies.get(name)
        if callable(reply):
            reply = reply(request)
        if isinstance(reply, Exception):
            raise reply
        if reply is None:
            reply = {"return": {}}
        return json.dumps(reply)


def test_run_decodes_output_and_exit_code():
    statuses = iter([{"return": {"exited": False}},
                     {"return": {"exited": True, "exitcode": 0, "out-data": b64("6.1.0-28-amd64\n")}}])
    fake = FakeAgent({"guest-exec": {"return": {"pid": 812}}, "guest-exec-status": lambda r: next(statuses)})
    result = GuestAgent(None, "g", fake).run(["uname", "-r"], timeout_s=5, poll_s=0)
    assert result.ok and result.out == "6.1.0-28-amd64\n"
    first = fake.requests[0]
    assert first == {"execute": "guest-exec", "arguments": {"path": "uname", "arg": ["-r"], "capture-output": True}}
    assert fake.requests[1] == {"execute": "guest-exec-status", "arguments": {"pid": 812}}


def test_run_failure_and_signal():
    fake = FakeAgent({"guest-exec": {"return": {"pid": 5}},
                      "guest-exec-status": {"return": {"exited": True, "signal": 9}}})
    assert GuestAgent(None, "g", fake).run(["x"], poll_s=0).exitcode == 137
    fake = FakeAgent({"guest-exec": {"return": {"pid": 5}},
                      "guest-exec-status": {"return": {"exited": True, "exitcode": 2, "err-data": b64("no such\n")}}})
    with pytest.raises(AgentError, match="exited 2: no such"):
        GuestAgent(None, "g", fake).check(["modprobe", "vfio-pci"])


def test_spawn_never_interpolates_the_argv():
    fake = FakeAgent({"guest-exec": {"return": {"pid": 9}}})
    argv = ["dpdk-testpmd", "-a", "0000:00:03.0", "--", "$(reboot)", "; rm -rf /"]
    assert GuestAgent(None, "g", fake).spawn(argv, "/run/labctl-fwd.log") == 9
    args = fake.requests[0]["arguments"]
    assert args["path"] == "/bin/sh" and args["arg"][:2] == ["-c", SPAWN_SCRIPT]
    assert args["arg"][2:] == argv  # positional parameters, untouched
    assert "LABCTL_LOG=/run/labctl-fwd.log" in args["env"] and args["capture-output"] is False
    assert "$(" not in SPAWN_SCRIPT.replace('"$0" "$@"', "")


def test_wait_ready_names_the_channel_and_what_to_check(monkeypatch):
    class Error(Exception):
        pass

    fake = FakeAgent({"guest-ping": Error("Guest agent is not responding: QEMU guest agent is not connected")})
    clock = iter(range(0, 1000, 1))
    monkeypatch.setattr(agent_mod.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(agent_mod.signals, "sleep", lambda s: None)
    with pytest.raises(AgentError) as info:
        GuestAgent(None, "labctl-img", fake).wait_ready(10, poll_s=1)
    message = str(info.value)
    assert isinstance(info.value, LabFault) and "\n" not in message
    assert CHANNEL in message and "qemu-guest-agent" in message and "within 10 s" in message


def test_wait_ready_returns_once_the_agent_answers(monkeypatch):
    answers = iter([RuntimeError("not connected"), {"return": {}}])
    fake = FakeAgent({"guest-ping": lambda r: next(answers)})
    monkeypatch.setattr(agent_mod.signals, "sleep", lambda s: None)
    assert GuestAgent(None, "g", fake).wait_ready(60, poll_s=0) >= 0
    assert [r["execute"] for r in fake.requests] == ["guest-ping", "guest-ping"]


def test_files_read_and_write():
    chunks = iter([{"return": {"count": 3, "buf-b64": b64("abc"), "eof": False}},
                   {"return": {"count": 2, "buf-b64": b64("de"), "eof": True}}])
    fake = FakeAgent({"guest-file-open": {"return": 1000}, "guest-file-read": lambda r: next(chunks)})
    agent = GuestAgent(None, "g", fake)
    assert agent.read_file("/sys/x") == b"abcde"
    assert fake.requests[-1] == {"execute": "guest-file-close", "arguments": {"handle": 1000}}
    agent.write_file("/sys/bus/pci/drivers/vfio-pci/bind", b"0000:00:03.0")
    write = [r for r in fake.requests if r["execute"] == "guest-file-write"][0]
    assert base64.b64decode(write["arguments"]["buf-b64"]) == b"0000:00:03.0"


def test_agent_error_reply_is_one_line():
    fake = FakeAgent({"guest-file-open": {"error": {"class": "GenericError", "desc": "No such file or directory"}}})
    with pytest.raises(AgentError, match="guest-file-open: No such file"):
        GuestAgent(None, "g", fake).read_file("/nope")


def test_argv_must_be_a_list_of_strings():
    with pytest.raises(ValueError):
        GuestAgent(None, "g", FakeAgent()).start([])
