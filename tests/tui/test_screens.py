"""Pilot-driven tests of each screen of the TUI (``App.run_test``), on fixed data (see conftest)."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import time

import pytest
from rich.console import Console
from rich.text import Text
from textual.widgets import DataTable, Input, OptionList, ProgressBar, Static

from labctl import api
from labctl.results.record import Metrics, TrialRecord
from labctl.results.store import Store
from labctl.tui.app import LabctlApp
from labctl.tui.screens.confirm import ConfirmScreen
from labctl.tui.screens.path_prompt import PathPrompt
from tests.tui.conftest import SIZE, ScriptedSweep


async def until(pilot, predicate, timeout: float = 10.0) -> None:
    """Let the app run until ``predicate()`` holds (workers hand results back asynchronously)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        await pilot.pause(0.02)


def text(app, selector: str) -> str:
    """The plain text a Static shows (Rich renderables rendered at 200 columns)."""
    content = app.screen.query_one(selector, Static).content
    if isinstance(content, (str, Text)):
        return str(content)
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(content)
    return console.export_text()


def run(coro):
    return asyncio.run(coro)


def shown(app) -> str:
    """The text on the terminal now, as the user sees it (what ``export_screenshot`` draws, as text)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False,
                      safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


# -- switching and quitting --------------------------------------------------------------------------

def test_each_screen_is_one_key_away_and_q_quits(fixed):
    async def go():
        app = LabctlApp(**fixed)
        async with app.run_test(size=SIZE) as pilot:
            for key, name in [("l", "LabsScreen"), ("s", "SweepScreen"), ("r", "ResultsScreen"),
                              ("a", "AdviceScreen"), ("h", "HostScreen")]:
                await pilot.press(key)
                assert type(app.screen).__name__ == name
                shown = {key for key, active in app.screen.active_bindings.items() if active.binding.show}
                assert {"h", "l", "s", "r", "a", "q"} <= shown  # listed in the footer on every screen
            await pilot.press("q")
        assert app.return_code == 0

    run(go())


# -- Host --------------------------------------------------------------------------------------------

def test_host_shows_the_doctor_report_and_probes_steadiness_on_demand(fixed):
    async def go():
        app = LabctlApp(**fixed)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "Example CPU" in text(app, "#facts"))
            facts = text(app, "#facts")
            for expected in ("4 online (0-3)", "node0: 0-3", "isolated", "2 MiB x 512 (512 free)",
                             "usable: kvm_intel is loaded -> kvm", "dpdk", "22.11.0", "lab embedded"):
                assert expected in facts
            assert "not measured" in text(app, "#steadiness")
            await pilot.press("p")
            await until(pilot, lambda: "steady: integer-loop" in text(app, "#steadiness"))
            await until(pilot, lambda: not app.busy)  # the probe's scope was handed back

    run(go())


def test_host_probe_refuses_a_bad_duration(fixed):
    async def go():
        app = LabctlApp(**fixed)
        async with app.run_test(size=SIZE) as pilot:
            app.screen.query_one("#probe-seconds", Input).value = ""
            await pilot.press("p")
            await pilot.pause()
            assert not app.busy and "not measured" in text(app, "#steadiness")

    run(go())


# -- Labs --------------------------------------------------------------------------------------------

def test_labs_lists_profiles_with_problems_inline_and_the_labs_that_are_up(fixed, monkeypatch):
    downs = []
    monkeypatch.setattr(api, "down", lambda target, uri=None: downs.append(target) or api.DownResult("quick", []))

    async def go():
        app = LabctlApp(**fixed, mode="labs")
        async with app.run_test(size=SIZE) as pilot:
            options = app.screen.query_one("#profiles", OptionList)
            await until(pilot, lambda: options.option_count == 2)
            prompts = [str(options.get_option_at_index(i).prompt) for i in range(2)]
            assert "bad.yaml" in prompts[0] and "invalid (1 problem)" in prompts[0]
            assert "rx_queue_size: 300 is not allowed (allowed: 256, 512, 1024)" in prompts[0]
            assert "quick (embedded, sweeps 2 knobs)" in prompts[1] and "[in use]" in prompts[1]
            labs = text(app, "#labs")
            assert "guest-vhostuser: running (qemu:///system, 2 resources)" in labs
            assert "queues 2->1  rx 1024->1024  tx 1024->1024" in labs and "enabled 1" in labs
            assert "pins requested: vcpus {0: 1} emulator 0 vhost 0" in labs
            assert "pins applied (live threads): vcpus {0: 1} emulator 0 vswitch {vswitch.rte-worker-1: 0}" in labs
            options.highlighted = 0
            await pilot.press("enter")
            await until(pilot, lambda: app.profile is not None and app.profile.name == "bad.yaml")
            await pilot.press("u")  # an invalid profile cannot come up: one line, nothing started
            await until(pilot, lambda: "rx_queue_size: 300" in text(app, "#lab-action"))
            await until(pilot, lambda: not app.busy)
            options.highlighted = 1
            await pilot.press("u")  # an embedded profile has no domain
            await until(pilot, lambda: "embedded profiles have no domain" in text(app, "#lab-action"))
            await pilot.press("d")
            await until(pilot, lambda: "quick: nothing to remove" in text(app, "#lab-action"))
            assert downs == [str(fixed["profiles_dir"] / "quick.yaml")]

    run(go())


# -- Sweep -------------------------------------------------------------------------------------------

def scripted(monkeypatch, **kwargs) -> ScriptedSweep:
    """A scripted sweep (see conftest) in place of ``api.sweep``, and :class:`FakeReport`'s bars for every run."""
    sweep = ScriptedSweep(**kwargs)
    monkeypatch.setattr(api, "sweep", sweep)
    monkeypatch.setattr(api, "report", lambda db, run=None, *a, **k: FakeReport())
    return sweep


def test_sweep_shows_progress_eta_phase_and_bars_then_cancels(fixed, monkeypatch):
    sweep = scripted(monkeypatch)

    async def go():
        app = LabctlApp(**fixed, mode="sweep", overrides={"workload.duration_s": 1})
        async with app.run_test(size=SIZE) as pilot:
            assert app.screen.query_one("#overrides", Input).value == "workload.duration_s=1"
            await pilot.press("g")
            await until(pilot, lambda: sweep.waiting.is_set() and "warm-up" in text(app, "#phase"))
            assert app.busy
            assert "run 7 quick: running, 2/4 trials" in text(app, "#headline")
            assert str(app.screen.query_one("#eta").content) == "ETA 0:00:20"  # 20 s for 2 trials, 2 to go
            assert "last: rx_queue_size=256 burst=64 -> 6.00 Mpps" in text(app, "#phase")
            await until(pilot, lambda: "burst=64" in text(app, "#bars"))
            await pilot.press("g")  # one at a time
            assert len(sweep.calls) == 1
            await pilot.press("c")
            await until(pilot, lambda: not app.busy)
            assert "cancelled" in text(app, "#headline")
            assert "--resume" in text(app, "#messages")
            await pilot.press("u")
            await until(pilot, lambda: len(sweep.calls) == 2)
            await pilot.press("c")
            await until(pilot, lambda: not app.busy)
        assert sweep.calls[0] == {"profile": "quick", "db": fixed["db"], "repeat": None, "resume": False, "duration": 1}
        assert sweep.calls[1]["resume"] is True

    run(go())


def test_a_budget_in_until_decided_starts_a_sweep_until_decided_showing_the_open_comparisons_shrink(fixed, monkeypatch):
    from labctl.measure.until import Look

    first = Look(1, 8, 3, 12, ["rx_queue_size: 1024 vs 256", "workload.burst: 64 vs 32"], {})
    second = Look(2, 8, 4, 16, ["workload.burst: 64 vs 32"], {"rx_queue_size: 1024 vs 256": "better"})
    third = Look(3, 8, 5, 20, [], {"rx_queue_size: 1024 vs 256": "better"}, ["workload.burst: 64 vs 32"])
    sweep = scripted(monkeypatch, notes=tuple((look.message(), look) for look in (first, second, third)))

    async def go():
        app = LabctlApp(**fixed, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            assert not app.screen.query_one("#open", Static).display  # until a look comes
            app.screen.query_one("#until-budget", Input).value = "90s"
            await pilot.press("g")
            await until(pilot, lambda: sweep.waiting.is_set() and "warm-up" in text(app, "#phase"))
            shown = text(app, "#open")
            assert "open comparisons: 0 (none); decided 1; out of reach 1" in shown and "look 3/8" in shown
            await pilot.press("c")
            await until(pilot, lambda: not app.busy)
        assert sweep.calls[0]["until"] == "decided" and sweep.calls[0]["budget"] == "90s"
        assert sweep.calls[0]["repeat"] is None and sweep.calls[0]["resume"] is False

    run(go())


def test_the_newest_message_shows_even_after_long_ones(fixed, monkeypatch):
    """A note that wraps (waiting for another labctl's CPUs) must not push the cancel message and its
    resume command off the three lines the messages have at 80x24."""
    waiting = ("waiting for CPU 0: pid 11762 (lab it-tcpkill, CPUs 0-1) is measuring on it (this trial "
               "needs CPUs 0-1)")
    sweep = scripted(monkeypatch, notes=(waiting, waiting))

    async def go():
        app = LabctlApp(**fixed, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("g")
            await until(pilot, lambda: sweep.waiting.is_set())
            await pilot.press("c")
            await until(pilot, lambda: not app.busy)
            await until(pilot, lambda: "--resume`" in shown(app))
            screen = shown(app)
            assert "cancelled (cleaned up); resume with u, or `labctl sweep" in screen
            assert "run 7 quick: cancelled" in screen

    run(go())


class FakeReport:
    class Row:
        def __init__(self, knobs, median):
            self.knobs, self.median, self.ci, self.n = knobs, median, (None, None), 1

    rows = [Row({"workload.burst": 32}, 5.0), Row({"workload.burst": 64}, 6.0)]


def test_sweep_without_a_profile_says_where_to_pick_one(fixed, monkeypatch):
    sweep = ScriptedSweep(hold=False)
    monkeypatch.setattr(api, "sweep", sweep)

    async def go():
        app = LabctlApp(**{**fixed, "profile": None}, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            assert "pick one on the Labs screen" in text(app, "#profile")
            await pilot.press("g")
            await pilot.pause()
            assert sweep.calls == [] and not app.busy

    run(go())


def test_a_sweep_written_by_another_process_shows_up_live(fixed, tmp_path):
    """A CLI sweep into the same store: the screen polls it and follows the new run."""
    db = tmp_path / "live.db"
    plan = [{"seq": i, "config": {"workload.burst": b}, "repeat_index": 0} for i, b in enumerate([32, 64, 32, 64])]
    with Store(db) as store:
        run_id = store.create_run("quick", {}, plan)

    async def go():
        app = LabctlApp(**{**fixed, "db": db, "poll_s": 0.05}, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: f"run {run_id} quick: running, 0/4" in text(app, "#headline"))
            with Store(db) as store:
                for seq, mpps, t in [(0, 5.0, 100.0), (1, 7.0, 110.0)]:
                    record = TrialRecord(run_id=run_id, config=plan[seq]["config"], metrics=Metrics(mpps=mpps),
                                         started_at=t, finished_at=t + 10.0)
                    store.add_trial(record, seq)
            await until(pilot, lambda: "2/4 trials (read from the store)" in text(app, "#headline"))
            assert str(app.screen.query_one("#eta").content) == "ETA 0:00:20"
            assert "burst=64" in text(app, "#bars")
            with Store(db) as store:
                store.finish_run(run_id, "finished")
            await until(pilot, lambda: "finished" in text(app, "#headline"))

    run(go())


@pytest.mark.parametrize("metrics, rate", [({"bandwidth_gbps": 9.413}, "9.41 Gbit/s"),
                                           ({"transactions_per_s": 23456.7}, "23,457 trans/s")])
def test_a_tcp_trial_shows_its_rate_in_its_unit_as_the_cli_does(fixed, monkeypatch, metrics, rate):
    """The progress line named a TCP trial "ok" (the TUI's own copy of the rate knew no TCP metric) where the
    CLI's bar said Gbit/s or trans/s: both now say what ``api.trial_rate`` says."""
    from labctl.cli.output import SweepProgress

    config = {"workload.sessions": 4, "workload.guest_queues": 2}
    sweep = scripted(monkeypatch, trials=((config, metrics), (config, metrics)))

    async def go():
        app = LabctlApp(**fixed, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("g")
            await until(pilot, lambda: sweep.waiting.is_set() and "warm-up" in text(app, "#phase"))
            assert f"last: sessions=4 guest_queues=2 -> {rate}" in text(app, "#phase")
            assert " ok" not in text(app, "#phase")
            await pilot.press("c")
            await until(pilot, lambda: not app.busy)

    run(go())
    trial = api.Event("trial", run_id=7, done=1, total=4, data={"config": config},
                      record=TrialRecord(config=config, metrics=Metrics(**metrics)))
    with SweepProgress() as cli:
        cli(api.Event("run", run_id=7, total=4, done=0))
        cli(trial)
        assert cli.progress.tasks[0].fields["last"] == f"last: sessions=4 guest_queues=2 -> {rate}"


def test_a_finished_ndr_run_shows_as_finished(fixed, tmp_path):
    """``labctl ndr`` plans no entries (its run is one search): finished, it showed "1/? trials" and its bar
    at 0%. While it searches, its measurements are not trials of a plan: 0 of an unknown total."""
    db = tmp_path / "ndr.db"
    with Store(db) as store:
        run_id = store.create_run("vnf", {}, [])
        for load in (1.0, 2.0, 1.5):
            store.add_trial(TrialRecord(run_id=run_id, config={}, details={"role": "search"},
                                        metrics=Metrics(offered_mpps=load, mpps=load)), None)

    async def go():
        app = LabctlApp(**{**fixed, "db": db, "poll_s": 0.05}, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: f"run {run_id} vnf: running, 0/? trials" in text(app, "#headline"))
            assert app.screen.query_one("#bar", ProgressBar).percentage == 0.0
            with Store(db) as store:
                store.add_trial(TrialRecord(run_id=run_id, config={}, details={"role": "ndr"},
                                            metrics=Metrics(ndr_mpps=2.0, pdr_mpps=2.1),
                                            started_at=100.0, finished_at=130.0), None)
                store.finish_run(run_id, "finished")
            await until(pilot, lambda: "finished" in text(app, "#headline"))
            assert f"run {run_id} vnf: finished, 1/1 trials (read from the store)" in text(app, "#headline")
            assert app.screen.query_one("#bar", ProgressBar).percentage == 1.0

    run(go())


# -- quitting and signals ----------------------------------------------------------------------------

def test_q_during_a_sweep_asks_and_then_cancels_before_quitting(fixed, monkeypatch):
    sweep = ScriptedSweep()
    monkeypatch.setattr(api, "sweep", sweep)

    async def go():
        app = LabctlApp(**fixed, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("g")
            await until(pilot, sweep.waiting.is_set)
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert app.busy and not isinstance(app.screen, ConfirmScreen)
            await pilot.press("q")
            await pilot.press("y")
            await until(pilot, lambda: not app.is_running)
        assert app.return_code == 0 and not app.busy

    run(go())


def test_sigterm_cancels_the_sweep_and_exits_after_clean_up(fixed, monkeypatch):
    sweep = ScriptedSweep()
    monkeypatch.setattr(api, "sweep", sweep)
    before = signal.getsignal(signal.SIGTERM)

    async def go():
        app = LabctlApp(**{**fixed, "handle_signals": True}, mode="sweep")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("g")
            await until(pilot, sweep.waiting.is_set)
            os.kill(os.getpid(), signal.SIGTERM)
            await until(pilot, lambda: not app.is_running)
        return app

    app = run(go())
    assert app.return_code == 143 and not app.busy
    assert signal.getsignal(signal.SIGTERM) == before  # the app gave the handler back


# -- Results -----------------------------------------------------------------------------------------

def test_results_table_sorts_filters_and_compares(fixed):
    async def go():
        app = LabctlApp(**fixed, mode="results")
        async with app.run_test(size=SIZE) as pilot:
            configs = app.screen.query_one("#configs", DataTable)
            await until(pilot, lambda: configs.row_count == 24)
            runs = app.screen.query_one("#runs", DataTable)
            assert runs.row_count == 1 and runs.get_row_at(0)[:4] == ["1", "import:embedded-grid.jsonl", "imported", "72/72"]
            titles = [str(c.label) for c in configs.columns.values()]
            assert titles[:8] == ["A/B", "queues", "rx_queue_size", "burst", "median mpps", "95% CI", "n", "loss"]
            assert {"gbps", "offered_mpps", "cycles_per_packet"} <= set(titles)  # every scalar metric recorded
            assert "run 1: 24 configurations" in text(app, "#notes")

            await pilot.press("slash")
            await pilot.press(*"burst=64")
            await until(pilot, lambda: configs.row_count == 6)
            assert "6 of 24 configurations" in text(app, "#notes")
            await pilot.press("escape")

            for _ in range(4):  # queues, rx_queue_size, burst, median (descending: best first)
                await pilot.press("o")
            medians = [float(configs.get_row_at(i)[4]) for i in range(configs.row_count)]
            assert medians == sorted(medians, reverse=True)
            await pilot.press("O")
            medians = [float(configs.get_row_at(i)[4]) for i in range(configs.row_count)]
            assert medians == sorted(medians)

            configs.move_cursor(row=0)
            await pilot.press("1")
            configs.move_cursor(row=5)
            await pilot.press("2")
            await until(pilot, lambda: "B vs A, mpps:" in text(app, "#compare"))
            compare = text(app, "#compare")
            assert "(3 trials)" in compare and "n=3 vs 3" in compare
            assert str(configs.get_row_at(0)[0]) == "A" and str(configs.get_row_at(5)[0]) == "B"
            await pilot.press("x")
            assert "mark rows with 1 (A) and 2 (B)" in text(app, "#compare")

    run(go())


def test_results_without_a_store_says_so(fixed, tmp_path, monkeypatch):
    monkeypatch.setattr(api, "runs", lambda db: (_ for _ in ()).throw(api.UserError(f"--db {db}: no such result store")))

    async def go():
        app = LabctlApp(**{**fixed, "db": tmp_path / "none.db"}, mode="results")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "no such result store" in text(app, "#notes"))

    run(go())


# -- Advice ------------------------------------------------------------------------------------------

def test_advice_shows_evidence_and_writes_a_tuned_profile(fixed, tmp_path):
    out = tmp_path / "tuned.yaml"

    async def go():
        app = LabctlApp(**fixed, mode="advice")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "recommend" in text(app, "#advice"))
            advice = text(app, "#advice")
            assert "recommend guest.nics.*.rx_queue_size = 1024: +22.0% [+4.9, +54.4] mpps" in advice
            assert "evidence: n=48, trials" in advice and "against rx_queue_size 256" in advice
            assert "inconclusive guest.nics.*.queues" in advice and "quiet the host" in advice
            assert "warning:" in advice
            await pilot.press("w")
            assert isinstance(app.screen, PathPrompt)
            assert app.screen.query_one("#field-profile", Input).value == str(fixed["profile"])
            assert app.screen.query_one("#field-out", Input).value == "quick-tuned.yaml"
            app.screen.query_one("#field-out", Input).value = str(out)
            app.screen.query_one("#field-out", Input).focus()
            await pilot.press("enter")
            await until(pilot, lambda: f"wrote {out}" in text(app, "#applied"))
            assert "applied guest.nics.*.rx_queue_size = 1024" in text(app, "#applied")
        tuned = api.load(out).profile
        assert tuned.name == "quick-tuned" and {n.rx_queue_size for n in tuned.guest.nics} == {1024}

    run(go())


def test_advice_reads_the_run_chosen_on_results_and_steps_to_another(fixed):
    """After ``make demo`` the newest run is an NDR search of one configuration: nothing to advise, while
    the sweep beside it has advice. Advice names the run it reads (the newest until one is chosen), ``[`` and
    ``]`` step to an older or a newer one, and the run under the cursor on Results is the one it reads."""
    with Store(fixed["db"]) as store:
        ndr = store.create_run("vnf", {}, [])
        store.add_trial(TrialRecord(run_id=ndr, config={"workload.burst": 32}, details={"role": "ndr"},
                                    metrics=Metrics(ndr_mpps=2.0, pdr_mpps=2.1)), None)
        store.finish_run(ndr, "finished")

    async def go():
        app = LabctlApp(**fixed, mode="advice")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: f"Advice for run {ndr}:" in text(app, "#advice"))
            advice = text(app, "#advice")
            assert f"Advice for run {ndr}: 1 trial, loss limit" in advice
            assert "nothing varies across these trials" in advice
            assert f"run {ndr} vnf (2 of 2, the newest), as chosen on Results; [ and ] pick" in advice
            await pilot.press("left_square_bracket")
            await until(pilot, lambda: "Advice for run 1: 72 trials" in text(app, "#advice"))
            assert app.run_id == 1
            advice = text(app, "#advice")
            assert "recommend guest.nics.*.rx_queue_size = 1024: +22.0% [+4.9, +54.4] mpps" in advice
            assert "run 1 import:embedded-grid.jsonl (1 of 2)" in advice
            await pilot.press("left_square_bracket")  # there is no older run: it stays
            await pilot.press("right_square_bracket")
            await until(pilot, lambda: f"Advice for run {ndr}:" in text(app, "#advice"))
            assert app.run_id == ndr

            # on Results, the cursor on the runs table (newest first) chooses the run Advice reads
            await pilot.press("r")
            await until(pilot, lambda: f"run {ndr}: 1 configurations" in text(app, "#notes"))
            await until(pilot, lambda: app.focused is not None and app.focused.id == "configs")
            await pilot.press("tab", "down")  # to the runs table, down to the older run, no enter
            await until(pilot, lambda: "run 1: 24 configurations" in text(app, "#notes"))
            assert app.run_id == 1
            await pilot.press("a")
            await until(pilot, lambda: "Advice for run 1: 72 trials" in text(app, "#advice"))
            # back on Results, its runs table is filled again: that is no choice, run 1 stays chosen
            chosen: list = []
            app.watch(app, "run_id", lambda run_id: chosen.append(run_id), init=False)
            await pilot.press("r")
            await until(pilot, lambda: not any(w.is_running for w in app.workers))
            await pilot.pause()
            assert chosen == [] and app.run_id == 1 and "run 1: 24 configurations" in text(app, "#notes")
            runs = app.screen.query_one("#runs", DataTable)
            assert runs.coordinate_to_cell_key(runs.cursor_coordinate).row_key.value == "1"

    run(go())


def test_advice_write_to_a_bad_path_is_one_line(fixed, tmp_path):
    async def go():
        app = LabctlApp(**fixed, mode="advice")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("w")
            app.screen.query_one("#field-out", Input).value = str(tmp_path / "no" / "such" / "dir.yaml")
            await pilot.click("#ok")
            await until(pilot, lambda: "cannot write there" in text(app, "#applied"))

    run(go())


@pytest.mark.parametrize("answer", ["escape", "cancel"])
def test_advice_write_can_be_called_off(fixed, answer):
    async def go():
        app = LabctlApp(**fixed, mode="advice")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("w")
            if answer == "escape":
                await pilot.press("escape")
            else:
                await pilot.click("#cancel")
            assert not isinstance(app.screen, PathPrompt)
            assert "w writes the profile" in text(app, "#applied")

    run(go())


def test_results_show_the_trend_marks_of_the_runs_profile(fixed, tmp_path):
    from tests.factories import trend_store

    db = trend_store(tmp_path / "trend.db", step=True)

    async def go():
        app = LabctlApp(**{**fixed, "db": db}, mode="results")
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "regression" in text(app, "#notes"))
            notes = text(app, "#notes")
            assert "run 10: 2 configurations" in notes
            assert "trend mpps rx_queue_size=256: regression -" in notes and "at run 7 (after run 6)" in notes
            assert "<- this run" not in notes  # the newest run (10) did not start the group
            app.screen.lab.run_id = 7  # the run picked in the runs table
            await until(pilot, lambda: "run 7:" in text(app, "#notes") and "<- this run" in text(app, "#notes"))

    run(go())
