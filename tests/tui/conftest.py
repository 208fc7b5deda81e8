"""Fixed data for the TUI's Pilot and snapshot tests: a store imported from the recorded grid, a host
and a lab that are always the same, profiles with and without problems, and a sweep driven by the test."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

from labctl import api
from labctl.host.facts import HostFacts, HugepagePool, KvmStatus
from tests.conftest import DOMAINS, ROOT

GRID = ROOT / "benchmarks" / "data" / "embedded-grid.jsonl"
SIZE = (80, 24)


@pytest.fixture(scope="session")
def grid_store(tmp_path_factory) -> Path:
    """The recorded 24-configuration grid (72 trials) as run 1 of a store (imported once per session)."""
    db = tmp_path_factory.mktemp("grid") / "grid.db"
    api.import_trials(GRID, db)
    return db


@pytest.fixture
def grid_db(grid_store, tmp_path) -> Path:
    """A copy of the grid store of this test's own."""
    db = tmp_path / "grid.db"
    shutil.copy(grid_store, db)
    return db


FACTS = HostFacts(
    cpu_model="Example CPU @ 2.0GHz", cpus=[0, 1, 2, 3], numa_nodes={0: [0, 1, 2, 3]}, smt_siblings={},
    isolated=[2, 3], hugepages=[HugepagePool(1048576, 0, 0), HugepagePool(2048, 512, 512)],
    kvm=KvmStatus(True, ["kvm", "kvm_intel"], True, "kvm_intel is loaded"), kernel="6.1.0-test",
    versions={"libvirt": "9.0.0", "qemu": "7.2.0", "dpdk": "22.11.0"},
    backends={"embedded": "ready: dpdk-testpmd with net_vhost and net_virtio_user", "libvirt": "ready: libvirtd is running"},
)


class FixedSteadiness:
    def describe(self) -> str:
        return "steady: integer-loop rate p10-p90 spread 2%, memory copy 3% over 5 s on CPUs 0,1,2,3"


LAB = {
    "name": "guest-vhostuser", "uri": "qemu:///system", "domain": "labctl-guest-vhostuser", "state": "running",
    "resources": [{"kind": "process", "ident": "1"}, {"kind": "domain", "ident": "labctl-guest-vhostuser"}],
    "nics": [{"index": 0, "requested": {"backend": "vhostuser", "queues": 2, "rx_ring": 1024, "tx_ring": 1024},
              "negotiated": {"ifname": "eth0", "queues": 1, "rx_ring": 1024, "tx_ring": 1024},
              "differences": ["queues: 2 queues on 1 vCPU: the guest's kernel driver enabled 1"]}],
    "pins": {"requested": {"vcpus": {0: "1"}, "emulator": "0", "vhost": "0"},
             "applied": {"threads": {"vcpus": {0: "1"}, "emulator": "0"}, "vswitch": {"vswitch.rte-worker-1": "0"}},
             "applied_source": "live threads"},
}

BAD_PROFILE = """\
name: bad
backend: embedded
guest:
  nics:
    - {backend: vhostuser, rx_queue_size: 300}
"""


@pytest.fixture
def fixed(monkeypatch, tmp_path, grid_db) -> dict[str, Any]:
    """The API with host-specific answers fixed: doctor, status; run times removed; a profiles
    directory with quick.yaml and a profile with a problem. Returns the app's arguments."""
    def doctor(steadiness_s=None, on_event=None, scope=None):
        return api.Doctor(FACTS, FixedSteadiness() if steadiness_s is not None else None)

    real_runs = api.runs
    monkeypatch.setattr(api, "doctor", doctor)
    monkeypatch.setattr(api, "status", lambda uri=None: [LAB])
    monkeypatch.setattr(api, "runs", lambda db: [{**r, "created_at": None} for r in real_runs(db)])
    profiles = tmp_path / "domains"
    profiles.mkdir()
    shutil.copy(DOMAINS / "quick.yaml", profiles / "quick.yaml")
    (profiles / "bad.yaml").write_text(BAD_PROFILE)
    return {"db": grid_db, "profile": profiles / "quick.yaml", "profiles_dir": profiles, "poll_s": None,
            "handle_signals": False}


#: The two trials a scripted sweep stores first: (its configuration, its metrics).
PACKET_TRIALS = (({"guest.nics.*.rx_queue_size": 256, "workload.burst": 32}, {"mpps": 5.0}),
                 ({"guest.nics.*.rx_queue_size": 256, "workload.burst": 64}, {"mpps": 6.0}))


class ScriptedSweep:
    """Stands in for ``api.sweep``: sends the events of a 4-trial run, then (``hold``) waits for the
    scope to be cancelled, as a trial in flight would; records what it was called with. ``notes``: note
    events sent after the run's; ``trials``: the trials stored before it holds (config, metrics)."""

    def __init__(self, hold: bool = True, notes: tuple[Any, ...] = (), trials: tuple[Any, ...] = PACKET_TRIALS):
        self.hold = hold
        self.notes = notes  # a message, or an (message, data) pair (a sweep until decided's Look)
        self.trials = trials
        self.calls: list[dict[str, Any]] = []
        self.waiting = threading.Event()

    def __call__(self, loaded, db=api.DEFAULT_DB, repeat=None, resume=False, steadiness_s=None, on_event=None,
                 scope=None, **until):
        from labctl.results.record import Metrics, TrialRecord

        self.calls.append({"profile": loaded.profile.name, "db": db, "repeat": repeat, "resume": resume,
                           "duration": loaded.profile.workload.duration_s, **until})
        on_event(api.Event("run", lab="quick", run_id=7, total=4, done=0))
        for note in self.notes:
            message, data = note if isinstance(note, tuple) else (note, None)
            on_event(api.Event("note", lab="quick", message=message, data=data))
        for i, (config, metrics) in enumerate(self.trials):
            on_event(api.Event("phase", lab="quick", message="measure"))
            record = TrialRecord(config={}, metrics=Metrics(**metrics))
            on_event(api.Event("trial", run_id=7, record=record, done=i + 1, total=4, elapsed_s=10.0 * (i + 1),
                               data={"config": config}))
        on_event(api.Event("phase", lab="quick", message="warm-up"))
        if self.hold:
            self.waiting.set()
            while not scope.cancelled:
                scope.sleep(0.02)
            scope.check()
        return type("Result", (), {"run_id": 7, "ok": 4, "failed": 0})()
