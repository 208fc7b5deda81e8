"""The Live screen (v): a reconf or soak started from the fields, its live events drawn while it runs (the
soak's seconds as sparklines), the trial in the CLI's words at the end; bad fields refused before any work."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Input, Sparkline, Static

from labctl import api
from labctl.measure.load_point import LoadPoint
from labctl.measure.soak import SoakResult
from labctl.profile.rates import Rate
from labctl.tui.app import LabctlApp
from labctl.tui.screens.live import LiveView, parse_request
from tests.live_data import soak_record
from tests.tui.conftest import SIZE
from tests.tui.test_screens import until


def test_fields_become_the_clis_request():
    assert parse_request("reconf", "workload.rxd=1024 workload.burst=64", "0.2Mpps", "3").changes == \
        ["workload.rxd=1024", "workload.burst=64"]
    req = parse_request("reconf", "exec: /bin/true --now 'a b'", "", "")
    assert req.exec_argv == ["/bin/true", "--now", "a b"] and req.rate is None and req.window_s == 5.0
    assert parse_request("soak", "", "40%", "90s").duration == "90s"
    for fields, message in ((("boil", "", "", ""), "kind boil: not a live trial"),
                            (("reconf", "", "", ""), "reconf needs one change"),
                            (("reconf", "workload.rxd=1024", "", "x"), "window x: not a number"),
                            (("soak", "", "", "1s"), "--duration 1s: out of range")):
        with pytest.raises(api.UserError, match=message):
            parse_request(*fields)


def test_the_view_follows_a_soaks_seconds():
    view = LiveView(state="running", kind="soak")
    for t in range(130):
        view.apply(api.Event("live", data={"kind": "soak", "t_s": float(t), "bin_s": 1.0, "offered": 1000,
                                           "received": 1000 - (t == 30) * 40, "lost": (t == 30) * 40,
                                           "p99_us": 9.0, "duration_s": 300.0}))
    assert len(view.received) == 120 and view.received[-1] == pytest.approx(0.001)  # the newest 120 s
    assert view.headline() == "soak: running, 130/300 s, 40 lost"
    assert view.lines == ["30 s: 40 lost, p99 9.0 us"]


def test_a_soak_is_watched_and_ends_in_the_clis_words(fixed, monkeypatch):
    calls = []

    def scripted_soak(loaded, duration, rate=None, at=None, db=None, on_event=None, scope=None, wait=True):
        calls.append((loaded.profile.name, duration, rate))
        for t in range(5):
            on_event(api.Event("live", lab="quick", data={"kind": "soak", "t_s": float(t), "bin_s": 1.0,
                                                          "offered": 1000, "received": 990, "lost": 10,
                                                          "p99_us": 9.0, "duration_s": 120.0}))
        return SoakResult(3, soak_record(3), str(db), LoadPoint(Rate("pps", 1000.0), "--rate 0.001Mpps", {}))

    monkeypatch.setattr(api, "soak", scripted_soak)

    async def go():
        app = LabctlApp(**fixed)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("v")
            assert type(app.screen).__name__ == "LiveScreen"
            for name, value in (("kind", "soak"), ("rate", "1kpps"), ("extent", "2m")):
                app.screen.query_one(f"#live-{name}", Input).value = value
            await pilot.press("g")
            await until(pilot, lambda: app.screen.view.state == "finished")
            assert calls == [("quick", "2m", "1kpps")]
            assert app.screen.query_one("#live-lost", Sparkline).data == [10.0] * 5
            lines = str(app.screen.query_one("#live-lines", Static).content)
            assert "soak of 120 s: 120 points of 1 s" in lines and "run 3 in" in lines
            assert app.run_id == 3 and not app.busy

    asyncio.run(go())


def test_bad_fields_start_nothing(fixed, monkeypatch):
    monkeypatch.setattr(api, "reconf", lambda *a, **k: pytest.fail("nothing may start"))

    async def go():
        app = LabctlApp(**fixed, mode="live")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("g")  # no change given
            await pilot.pause()
            assert not app.busy and app.screen.view.state == "idle"

    asyncio.run(go())
