"""LabSession: a guest whose boot failed is not kept as the run's guest, so the next trial boots anew
(it had been reused half-made: every later trial failed on its missing domain, and a duration budget of
``--until decided`` spun through thousands of such failures)."""

from __future__ import annotations

import pytest

from labctl.lab.plan import derive
from labctl.measure.labs import LabSession
from labctl.profile.load import load_profile
from tests.conftest import DOMAINS


class _NoLibvirtd:
    boots = 0
    closed = 0

    def __init__(self, plan, state, uri, warnings, phase):
        self.key = plan.domain_key()

    def boot(self):
        type(self).boots += 1
        raise RuntimeError("cannot connect to qemu:///system: Connection refused")

    def close(self):
        type(self).closed += 1


def test_a_guest_that_never_booted_is_booted_again_by_the_next_trial(monkeypatch):
    from labctl.lab.libvirt import kernel

    monkeypatch.setattr(kernel, "KernelGuestLab", _NoLibvirtd)
    plan = derive(load_profile(DOMAINS / "tcp-multiqueue.yaml", cpus=frozenset({0, 1})).profile)
    with LabSession("fx-session-boot") as session:
        for attempt in (1, 2):
            with pytest.raises(RuntimeError, match="cannot connect"):
                session.acquire(plan, [])
            assert session.guest is None and _NoLibvirtd.boots == attempt and _NoLibvirtd.closed == attempt
            session.release(None, failed=True)


class _Guest:
    """A booted lab that records what the session asks of it: boot, swap (or a refusal, or a failure), close."""

    domains = 1
    log: list = []
    refusal: str | None = None
    failure: Exception | None = None

    def __init__(self, plan, state, uri, warnings, phase):
        self.plan, self.key, self.boot_s, self.reached = plan, plan.domain_key(), 20.0, {}

    def boot(self):
        self.log.append(("boot", self.plan.nics[0].rx_ring))

    def swap_refusal(self, plan):
        return self.refusal

    def swap(self, plan):
        self.log.append(("swap", plan.nics[0].rx_ring))
        if self.failure is not None:
            raise self.failure
        self.plan, self.key = plan, plan.domain_key()
        return 3.0

    def start(self, plan):
        self.plan = plan

    def end_trial(self):
        pass

    def close(self):
        self.log.append(("close", self.plan.nics[0].rx_ring))


def _guest_plans(**top):
    from labctl.profile.load import validate_data

    data = {"name": "fx-swap", "backend": "libvirt", **top,
            "guest": {"vcpus": 1, "nics": [{"backend": "vhostuser"}, {"backend": "vhostuser"}]}}
    out = {}
    for rx in (256, 1024):
        for vcpus in (1, 2):
            data["guest"].update(vcpus=vcpus, nics=[{"backend": "vhostuser", "rx_queue_size": rx}] * 2)
            out[(rx, vcpus)] = derive(validate_data(data, "p", cpus=frozenset({0, 1})).profile)
    return out


@pytest.fixture
def guest_lab(monkeypatch):
    from labctl.lab.libvirt import guest

    monkeypatch.setattr(guest, "GuestLab", _Guest)
    _Guest.log, _Guest.refusal, _Guest.failure = [], None, None
    return _Guest


def _acquire(session, plan):
    warnings: list[str] = []
    lab = session.acquire(plan, warnings)
    session.release(lab, failed=False)
    return dict(lab.reached), warnings


def test_nic_settings_swap_in_the_running_guest_and_a_boot_knob_boots(guest_lab):
    plans = _guest_plans()
    notes = []
    with LabSession("fx-swap", on_event=lambda e: notes.append(e.message) if e.kind == "note" else None) as session:
        first, _ = _acquire(session, plans[(256, 1)])
        swapped, warnings = _acquire(session, plans[(1024, 1)])
        kept, _ = _acquire(session, plans[(1024, 1)])
        booted, _ = _acquire(session, plans[(1024, 2)])  # vCPUs need a boot
        assert (session.boots, session.swaps, session.fallbacks) == (2, 1, 0)
        assert session.info()["swaps"] == 1 and session.info()["swap_s"] == 3.0
    assert first == {"how": "boot", "s": 20.0} and swapped == {"how": "hotplug", "s": 3.0}
    assert kept == {"how": "kept", "s": 0.0} and booted == {"how": "boot", "s": 20.0}
    assert warnings == [] and notes == []
    assert guest_lab.log == [("boot", 256), ("swap", 1024), ("close", 1024), ("boot", 1024), ("close", 1024)]


def test_swap_boot_boots_for_every_nic_change_without_a_note(guest_lab):
    plans = _guest_plans(swap="boot")
    with LabSession("fx-swap") as session:
        _acquire(session, plans[(256, 1)])
        reached, warnings = _acquire(session, plans[(1024, 1)])
        assert (session.boots, session.swaps) == (2, 0) and "swaps" not in session.info()
    assert reached == {"how": "boot", "s": 20.0} and warnings == []
    assert [step for step, _ in guest_lab.log] == ["boot", "close", "boot", "close"]


@pytest.mark.parametrize("refusal, failure, said", [
    ("the image boots by its own loader under TCG", None, "hot-swap of the NICs not done: the image boots by its own "
                                                          "loader under TCG; booting instead"),
    (None, "the guest did not release nic0 within 30 s", "hot-swap of the NICs not done: the swap failed (the guest "
                                                          "did not release nic0 within 30 s); booting instead"),
])
def test_a_refused_or_failed_swap_boots_and_says_so_in_the_record_and_the_output(guest_lab, refusal, failure, said):
    from labctl.errors import SwapError

    guest_lab.refusal = refusal
    guest_lab.failure = SwapError(failure) if failure else None
    plans = _guest_plans()
    notes = []
    with LabSession("fx-swap", on_event=lambda e: notes.append(e.message) if e.kind == "note" else None) as session:
        _acquire(session, plans[(256, 1)])
        reached, warnings = _acquire(session, plans[(1024, 1)])
        assert (session.boots, session.swaps, session.fallbacks) == (2, 0, 1)
        assert session.info()["swap_fallbacks"] == 1
    assert reached == {"how": "boot", "s": 20.0, "note": said}
    assert warnings == [said] and notes == [said]
    assert ("close", 1024 if failure else 256) in guest_lab.log and guest_lab.log[-2][0] == "boot"


def test_an_interrupt_during_a_swap_is_not_a_fallback(guest_lab):
    from labctl.errors import Cancelled

    guest_lab.failure = Cancelled()
    plans = _guest_plans()
    with LabSession("fx-swap") as session:
        _acquire(session, plans[(256, 1)])
        with pytest.raises(Cancelled):
            session.acquire(plans[(1024, 1)], [])
        assert session.fallbacks == 0
    assert guest_lab.log[-1][0] == "close"  # the session's exit powered it off
