"""labctl.dpdk.runtime.start_recorded: the runtime recorded before the start, the pid with its start
time after it, into whatever ledger it is given (labgen's own start_recorded goes through it)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from labctl.dpdk.labgen import ring_labgen
from labctl.dpdk.runtime import start_recorded
from labctl.dpdk.telemetry import RUNTIME_ROOT
from labctl.owner import process_started


class Ledger:
    def __init__(self) -> None:
        self.entries: list[tuple[str, str, dict[str, Any]]] = []

    def record(self, kind: str, ident: str, **data: Any) -> None:
        self.entries.append((kind, ident, data))


class Sleeper:
    """A stand-in DPDK process: ``sleep`` started as start() or start_daemon() says."""

    def __init__(self, ledger: Ledger, prefix: str) -> None:
        from labctl.dpdk.eal import EalOptions

        self.role, self.eal, self.ledger, self.how = "vswitch", EalOptions(prefix, "0@0", []), ledger, ""
        self.proc: subprocess.Popen | None = None

    def _sleep(self, how: str) -> int:
        assert [kind for kind, _, _ in self.ledger.entries] == ["dpdk", "dir"]  # recorded before the start
        self.how, self.proc = how, subprocess.Popen(["sleep", "30"])
        return self.proc.pid

    def start(self) -> int:
        return self._sleep("start")

    def start_daemon(self) -> int:
        return self._sleep("daemon")


def test_the_runtime_is_recorded_before_the_start_and_the_pid_after():
    for daemon in (False, True):
        ledger = Ledger()
        proc = Sleeper(ledger, "labctl-unit-rt")
        try:
            pid = start_recorded(ledger, proc, daemon=daemon)
            assert proc.how == ("daemon" if daemon else "start")
            assert ledger.entries == [("dpdk", "labctl-unit-rt", {}),
                                      ("dir", str(RUNTIME_ROOT / "labctl-unit-rt"), {}),
                                      ("process", str(pid), {"role": "vswitch", "started": process_started(pid)})]
        finally:
            assert proc.proc is not None
            proc.proc.kill()
            proc.proc.wait()


def test_labgen_start_recorded_records_into_the_ledger_it_is_given(tmp_path, monkeypatch):
    gen = ring_labgen(1, 1, "labctl-unit-gen", [None], tmp_path / "gen.log")
    ledger = Ledger()
    monkeypatch.setattr(gen, "start", lambda: 4242)
    assert gen.start_recorded(ledger) == 4242
    assert [(kind, ident) for kind, ident, _ in ledger.entries] == [
        ("dpdk", "labctl-unit-gen"), ("dir", str(RUNTIME_ROOT / "labctl-unit-gen")), ("process", "4242")]
    assert ledger.entries[-1][2]["role"] == "generator"
    assert Path(ledger.entries[1][1]).name == "labctl-unit-gen"
