"""NIC hot-swap between trials on real libvirt guests (issue 40), under TCG on this host: one boot per test, short
trials, and every later trial reached by swapping the running guest's NICs.

Asserted: how each trial reached its configuration (``details.reached``: a boot, then swaps), what the guest's own
driver negotiated after each swap (the appliance's REPROBE; the image's ``ethtool`` through its agent), the run's
boot and swap counts, a swap the guest never answers falling back to a boot (said in the record and the output),
and a SIGINT in the middle of a swap leaving no domain, socket, port or process. Never a rate's size.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labctl import api
from labctl.lab.ledger import load_state
from labctl.results.store import Store
from tests.conftest import ROOT, default_sigint
from tests.integration.conftest import LIBVIRT_URI, dpdk_processes_of, needs_dpdk, needs_libvirtd
from tests.integration.test_guest_trials import guest_profile

pytestmark = [needs_dpdk, needs_libvirtd]


def appliance_profile(write_profile, name: str, sweep: str, repeat: int = 1):
    """test_guest_trials' appliance guest: 1 vCPU, two vhost-user NICs (rings 256), 2 s trials after 1 s."""
    return guest_profile(write_profile, name, "vhostuser", sweep, repeat)


def negotiated(record, key: str) -> set:
    return {(nic["negotiated"] or {}).get(key) for nic in record.details["nics"]}


def run_of(db, run_id):
    with Store(db) as store:
        return store.trials(run_id), store.run(run_id)["info"]


def test_appliance_ring_sweep_boots_once_then_swaps_every_trial(clean_lab, no_leftovers, write_profile, tmp_path):
    """rx_queue_size 256/1024 x 3 repeats, interleaved: one boot, then a swap before each of the five later
    trials, each with the rings the guest's driver negotiated as asked."""
    path = appliance_profile(write_profile, "it-swapring", "  guest.nics.*.rx_queue_size: [256, 1024]", repeat=3)
    db = tmp_path / "s.db"
    result = api.sweep(api.load(path), db)
    assert (result.ok, result.failed) == (6, 0)
    records, info = run_of(db, result.run_id)
    assert [r.config["guest.nics.0.rx_queue_size"] for r in records] == [256, 1024] * 3
    assert [r.details["reached"]["how"] for r in records] == ["boot"] + ["hotplug"] * 5
    assert records[0].details["boot"]["booted"] and not any(r.details["boot"]["booted"] for r in records[1:])
    for record in records:
        assert record.status == "ok" and record.metrics.mpps > 0
        assert negotiated(record, "rx_ring") == {record.config["guest.nics.0.rx_queue_size"]}
        assert negotiated(record, "tx_ring") == {256} and negotiated(record, "queues") == {1}
        assert record.details["reached"]["s"] > 0 and "note" not in record.details["reached"]
    for record in records[1:]:
        timings = record.details["timings"]
        assert timings["swap_s"] == pytest.approx(record.details["reached"]["s"], abs=0.01)
        assert timings["swap_detach_s"] > 0 and timings["swap_guest_s"] > 0
        assert record.details["guest"].get("reprobed") is True  # the guest's REPROBE answer, as HELLO's
        split = [timings[f"swap_guest_{step}_s"] for step in ("found", "reported", "bound")]  # the guest's own clock
        assert all(s >= 0 for s in split) and sum(split) <= timings["swap_guest_s"] + 0.05
    assert (info["boots"], info["swaps"], info["swap_fallbacks"], info["swap"]) == (1, 5, 0, "hotplug")
    assert any(note.startswith("guest boots: 1") and "NIC swaps: 5" in note for note in api.report(db, result.run_id).notes)


# the image guest's swaps (rings by queues, read through the agent): test_image_guest.py's sweep


def test_a_swap_the_guest_never_sees_boots_instead_and_says_so(clean_lab, no_leftovers, write_profile, tmp_path,
                                                                monkeypatch):
    """The guest is paused when the swap begins, so it never answers the ACPI eject: after the bound the run
    boots a fresh guest for the trial, the record and the output say why, and nothing is left behind."""
    from labctl.lab.libvirt import hotplug, hypervisor

    monkeypatch.setattr(hotplug, "DETACH_TIMEOUT_S", 8.0)
    path = appliance_profile(write_profile, "it-swapdeaf", "  guest.nics.*.rx_queue_size: [256, 1024]")
    notes: list[str] = []

    def on_event(event) -> None:
        if event.kind == "phase" and event.message == "swap":
            hypervisor.lookup(LIBVIRT_URI, "labctl-it-swapdeaf").suspend()  # a guest that does not answer
        elif event.kind == "note":
            notes.append(event.message)

    db = tmp_path / "d.db"
    result = api.sweep(api.load(path), db, on_event=on_event)
    assert (result.ok, result.failed) == (2, 0)
    records, info = run_of(db, result.run_id)
    reached = records[1].details["reached"]
    assert reached["how"] == "boot" and records[1].details["boot"]["booted"]
    assert "did not release ua-labctl-nic0, ua-labctl-nic1 within 8 s" in reached["note"]
    assert reached["note"] in records[1].warnings and notes == [reached["note"]]
    assert negotiated(records[1], "rx_ring") == {1024}
    assert (info["boots"], info["swaps"], info["swap_fallbacks"]) == (2, 0, 1)
    assert not load_state("it-swapdeaf").resources
    # clean_lab and no_leftovers: no domain, socket, tap, DPDK process, runtime directory or hugepages


def test_sigint_during_a_swap_leaves_no_domain_port_or_process(clean_lab, no_leftovers, write_profile, tmp_path):
    path = appliance_profile(write_profile, "it-swapint", "  guest.nics.*.rx_queue_size: [256, 1024]")
    env = {**os.environ, "LABCTL_FAULT": "phase.swap:INT:1:1.0"}  # SIGINT a second into the swap
    # SIGINT at its default, as from a terminal: a job started in the background by a shell without job
    # control (nohup ... &) inherits SIGINT ignored, and the fault's signal then did nothing (CI saw rc 0)
    proc = subprocess.run([sys.executable, "-m", "labctl.cli", "sweep", str(path), "--db", str(tmp_path / "i.db")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          preexec_fn=default_sigint)
    assert "labctl-fault: phase.swap INT" in proc.stderr and proc.returncode == 130, proc.stderr[-2000:]
    assert not load_state("it-swapint").resources
    assert dpdk_processes_of("labctl-it-swapint") == []
    from labctl.lab.libvirt import hypervisor

    assert hypervisor.lookup(LIBVIRT_URI, "labctl-it-swapint") is None
    # clean_lab and no_leftovers: no socket, tap, DPDK process, runtime directory or hugepages either
