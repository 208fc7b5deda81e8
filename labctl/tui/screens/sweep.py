"""Sweep: start a sweep (with a budget in "until decided in": ``api.sweep(until="decided", budget=...)``,
the open comparisons shown shrinking look by look) or a tune from the profile in use (``api.load``, ``api.sweep``, ``api.tune``),
follow it (progress, ETA, the current trial's phase, a live plot of rate per configuration from
``api.report``), cancel it (``scope.cancel()``) and resume it. A run another process is writing into
the same store (a CLI sweep) is followed too, by polling ``api.runs`` / ``api.trials``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Input, Label, ProgressBar, Static

from labctl import api
from labctl.signals import CancelScope
from labctl.tui import model
from labctl.tui.screens.base import LabScreen, error_text
from labctl.tui.widgets.rate_bars import RateBars


@dataclass
class StoreView:
    """What one poll of the store found: the run followed, its bars, and (for a run written by another
    process) its progress."""

    run: dict[str, Any] | None
    bars: list[model.Bar]
    progress: model.Progress | None
    seen: tuple | None


def read_store(db: Any, mine: int | None, seen: tuple | None) -> StoreView | None:
    """One poll (on a worker thread). Cheap when nothing changed: the trial counts are compared with
    ``seen`` before any report is built. None: no store yet, or nothing new."""
    try:
        runs = api.runs(db)
    except api.LabError:
        return None
    run = model.watched_run(runs, mine)
    if run is None:
        return None
    now = (run["id"], run["status"], run["ok"], run["failed"], run["aborted"])
    if now == seen:
        return None
    try:
        bars = model.bars(api.report(db, run["id"]))
    except api.LabError:
        bars = []
    progress = None
    if run["id"] != mine:
        progress = model.progress_of_run(run, api.trials(db, run["id"], status=None)[1])
    return StoreView(run, bars, progress, now)


MESSAGES = 20  # the notes kept on the screen (its last lines show; the rest scroll)


class SweepScreen(LabScreen):
    SUB_TITLE = "Sweep"
    BINDINGS = [Binding("g", "start", "Start"), Binding("t", "tune", "Tune"),
                Binding("u", "resume", "Resume"), Binding("c", "cancel", "Cancel")]

    def __init__(self) -> None:
        super().__init__()
        self.progress = model.Progress()
        self.scope: CancelScope | None = None
        self.seen: tuple | None = None
        self._polling = self._poll_again = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="profile")
            with Horizontal(classes="fields"):
                yield Label("repeat")
                yield Input("", id="repeat", placeholder="auto", type="integer", classes="short")
                yield Label("budget")
                yield Input("12", id="budget", type="integer", classes="short")
                yield Label("until decided in")
                yield Input("", id="until-budget", placeholder="off", classes="short")  # 12m or 40: the switch
                yield Label("--set")
                yield Input(" ".join(f"{k}={v}" for k, v in self.lab.overrides.items()), id="overrides",
                            placeholder="KNOB=VALUE ...")
            yield Static(self.progress.headline(), id="headline")
            with Horizontal(classes="progress"):
                yield ProgressBar(total=None, show_eta=False, id="bar")
                yield Label("ETA --:--", id="eta")
            yield Static("", id="phase")
            opened = Static("", id="open", markup=False)
            opened.display = False  # shown by a sweep until decided's looks
            yield opened
            yield Static("Rate per configuration: median Mpps [95% CI] n", classes="title", markup=False)
            yield RateBars(id="bars")
            with VerticalScroll(id="messages-scroll"):  # kept at its end: the newest message is the one to see
                yield Static("", id="messages")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.show_profile()
        self.watch(self.lab, "profile", lambda _value: self.show_profile(), init=False)
        if self.lab.poll_s:
            self.set_interval(self.lab.poll_s, self.poll)
        self.poll()

    def show_profile(self) -> None:
        profile = self.lab.profile
        self.query_one("#profile", Static).update(
            f"profile: {profile if profile is not None else 'none (pick one on the Labs screen, l)'}    "
            f"store: {self.lab.db}")

    # -- starting and stopping -----------------------------------------------------------------------

    def _request(self, how: str = "sweep") -> dict[str, Any] | None:
        """The request from the fields, checked on the app's thread (errors are notified)."""
        if self.lab.busy:
            self.notify("measuring work is already in flight", severity="warning")
            return None
        if self.lab.profile is None:
            self.notify("no profile: pick one on the Labs screen (l), or start `labctl tui FILE`", severity="error")
            return None
        try:
            overrides = api.parse_overrides(self.query_one("#overrides", Input).value.split())
            repeat_text = self.query_one("#repeat", Input).value.strip()
            budget_text = self.query_one("#budget", Input).value.strip()
            return {"overrides": overrides, "repeat": int(repeat_text) if repeat_text else None,
                    "budget": int(budget_text) if budget_text and how != "decide" else 0,
                    "until_budget": self.query_one("#until-budget", Input).value.strip()}
        except (api.LabError, ValueError) as exc:
            self.notify(error_text(exc) if isinstance(exc, api.LabError) else f"not a number: {exc}",
                        severity="error")
            return None

    def action_start(self) -> None:
        self._begin("decide" if self.query_one("#until-budget", Input).value.strip() else "sweep")

    def action_resume(self) -> None:
        self._begin("resume")

    def action_tune(self) -> None:
        self._begin("tune")

    def _begin(self, how: str) -> None:
        request = self._request(how)
        if request is None:
            return
        self.query_one("#open", Static).display = False
        scope = self.scope = self.lab.open_scope()
        self.progress = model.Progress(profile=str(self.lab.profile), state="starting")
        self.seen = None
        self.redraw()
        path, db = self.lab.profile, self.lab.db

        def on_event(event: api.Event) -> None:
            self.app.call_from_thread(self.show_event, event)

        def measure() -> Any:
            loaded = api.load(path, request["overrides"])
            if how == "tune":
                return api.tune(loaded, request["budget"], db=db, on_event=on_event, scope=scope)
            if how == "decide":
                return api.sweep(loaded, db, None, False, None, on_event=on_event, scope=scope, until="decided",
                                 budget=request["until_budget"])
            return api.sweep(loaded, db, request["repeat"], how == "resume", None, on_event=on_event, scope=scope)

        self.call_api(measure, owns=scope, group="measure", done=self.finished, failed=self.stopped)

    def action_cancel(self) -> None:
        if self.scope is None or self.scope.cancelled:
            return
        self.scope.cancel()
        self.progress.state = "cancelling"
        self.progress.messages.append("cancelling: the trial in flight is torn down; the run stays resumable")
        self.redraw()

    def finished(self, result: Any) -> None:
        self.scope = None
        failed = getattr(result, "failed", 0)
        self.progress.state = "failed" if failed else "finished"
        if hasattr(result, "best_config"):
            self.progress.messages.append(f"best: {api.knob_label(result.best_config, ' ')} "
                                          f"({result.trials_used} trials, stopped: {result.stop_reason})")
        else:
            self.progress.messages.append(f"run {result.run_id}: {result.ok} ok, {result.failed} failed")
            self.progress.messages += api.course_lines(getattr(result, "until", None) or {})  # after "run N: ..."
        self.after_stop()

    def stopped(self, exc: BaseException) -> None:
        self.scope = None
        if isinstance(exc, api.Interrupted):
            self.progress.state = "cancelled"
            self.progress.messages.append(
                f"{exc.message}; resume with u, or `labctl sweep {self.lab.profile} --db {self.lab.db} --resume`")
        else:
            self.progress.state = "failed"
            self.progress.messages.append(error_text(exc))
        self.after_stop()

    def after_stop(self) -> None:
        self.progress.phase = ""
        self.seen = None
        self.redraw()
        self.poll()

    # -- what lands ----------------------------------------------------------------------------------

    def show_event(self, event: api.Event) -> None:
        self.progress.apply(event)
        look = event.data if event.kind == "note" else None
        if look is not None and hasattr(look, "open") and hasattr(look, "decided"):  # a sweep until decided's look
            names = ", ".join(look.open) or "none"
            opened = self.query_one("#open", Static)
            opened.display = True
            opened.update(
                f"open comparisons: {len(look.open)} ({names}); decided {len(look.decided)}"
                + (f"; out of reach {len(look.out_of_reach)}" if getattr(look, "out_of_reach", None) else "")
                + f"    look {look.look}/{look.looks}, {look.trials} trials")
        if event.kind == "trial":
            self.lab.stored += 1
            self.poll()
        self.redraw()

    def poll(self) -> None:
        """Read the store once (one read at a time: a poll asked for meanwhile runs after it)."""
        if self._polling:
            self._poll_again = True
            return
        self._polling, self._poll_again = True, False
        mine = self.progress.run_id if self.progress.source == "here" else None
        self.call_api(read_store, self.lab.db, mine, self.seen, done=self.show_store, group="poll",
                      exclusive=False, failed=lambda exc: self.show_store(None))

    def show_store(self, view: StoreView | None) -> None:
        self._polling = False
        if self._poll_again:
            self.poll()
        if view is None:
            return
        self.seen = view.seen
        self.query_one("#bars", RateBars).set_bars(view.bars)
        if view.progress is not None:
            self.lab.stored += 1  # trials landed that this TUI did not run
            mine = self.progress.source == "here" and self.progress.state != "idle"
            if self.scope is None and (not mine or view.progress.state == "running"):
                self.progress = view.progress  # a run another process is writing takes over the screen
        self.redraw()

    def redraw(self) -> None:
        progress = self.progress
        self.query_one("#headline", Static).update(progress.headline())
        bar = self.query_one("#bar", ProgressBar)
        bar.update(total=progress.total or 1, progress=progress.done if progress.total else 0)
        eta = progress.eta_s if progress.state == "running" else None
        self.query_one("#eta", Label).update(f"ETA {model.clock(eta)}")
        phase = f"phase: {progress.phase}" if progress.phase else "phase: -"
        last = f"    last: {progress.last}" if progress.last else ""
        self.query_one("#phase", Static).update(phase + last)
        self.query_one("#messages", Static).update("\n".join(progress.messages[-MESSAGES:]))
        scroll = self.query_one("#messages-scroll", VerticalScroll)
        self.call_after_refresh(scroll.scroll_end, animate=False)
