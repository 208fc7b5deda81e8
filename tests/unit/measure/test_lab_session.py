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
