"""Live: a reconf or a soak of the profile in use, watched while it runs (``api.reconf``, ``api.soak``).

The fields say what to run: ``reconf`` with ``--change`` assignments (``workload.rxd=1024``) or a command
(``exec: /usr/local/bin/step --now``, split as a shell splits words, run as an argv), or ``soak`` with a
duration; the load (empty: half the stored NDR) and the window. ``g`` starts it, ``c`` cancels it (a soak
keeps what it measured). While it runs the screen shows its ``live`` events: a reconf's steps, a soak's
seconds as sparklines of the received rate and of the packets lost, and its newest points; at the end the
trial in the CLI's words (``api.live_lines``). The app reaches it with ``v`` from any screen."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Header, Input, Label, Sparkline, Static

from labctl import api
from labctl.signals import CancelScope
from labctl.tui.screens.base import LabScreen, error_text

KINDS = ("reconf", "soak")
POINTS = 120  # seconds the sparklines show
LINES = 40


@dataclass
class LiveRequest:
    """The fields, parsed: ``kind``, the changes or the command (reconf), the duration (soak), the load."""

    kind: str
    changes: list[str] = field(default_factory=list)
    exec_argv: list[str] | None = None
    duration: str = "2m"
    rate: str | None = None
    window_s: float = 5.0


def parse_request(kind: str, what: str, rate: str, extent: str) -> LiveRequest:
    """The screen's fields as a request (api.UserError for what cannot be one: the CLI's own checks)."""
    kind = kind.strip().lower() or "reconf"
    if kind not in KINDS:
        raise api.UserError(f"kind {kind}: not a live trial (allowed: {', '.join(KINDS)})")
    rate = rate.strip() or None
    if kind == "soak":
        request = LiveRequest("soak", duration=extent.strip() or "2m", rate=rate)
        api.check_soak(request.duration, rate)
        return request
    text = what.strip()
    try:
        window = float(extent) if extent.strip() else 5.0
    except ValueError:
        raise api.UserError(f"window {extent}: not a number of seconds (allowed: 1..60)") from None
    if text.startswith("exec:"):
        try:
            argv = shlex.split(text[len("exec:"):])
        except ValueError as exc:
            raise api.UserError(f"exec: {exc}") from None
        request = LiveRequest("reconf", exec_argv=argv, rate=rate, window_s=window)
    else:
        request = LiveRequest("reconf", changes=text.split(), rate=rate, window_s=window)
    api.check_reconf(request.changes, request.exec_argv, None, request.window_s, rate)
    return request


@dataclass
class LiveView:
    """What the screen draws, from the live events (pure: no widget)."""

    state: str = "idle"
    kind: str = ""
    received: list[float] = field(default_factory=list)  # Mpps per point (soak)
    lost: list[float] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    t_s: float = 0.0
    duration_s: float = 0.0
    lost_total: int = 0

    def apply(self, event: Any) -> None:
        data = event.data if isinstance(event.data, dict) else {}
        if event.kind == "phase":
            self.lines.append(f"[{event.message}]")
        elif event.kind == "note":
            self.lines.append(event.message)
        elif event.kind == "live" and data.get("kind") == "reconf":
            self.lines.append(event.message)
        elif event.kind == "live" and data.get("kind") == "soak":
            width = data.get("bin_s") or 1.0
            self.received = (self.received + [data["received"] / width / 1e6])[-POINTS:]
            self.lost = (self.lost + [float(data["lost"])])[-POINTS:]
            self.t_s, self.duration_s = data["t_s"] + width, data.get("duration_s", 0.0)
            self.lost_total += int(data["lost"])
            if data["lost"]:
                self.lines.append(f"{data['t_s']:.0f} s: {data['lost']} lost, p99 {data['p99_us']:.1f} us")
        self.lines = self.lines[-LINES:]

    def headline(self) -> str:
        if self.kind == "soak" and self.duration_s:
            return f"{self.kind}: {self.state}, {self.t_s:.0f}/{self.duration_s:.0f} s, {self.lost_total} lost"
        return f"{self.kind or 'live'}: {self.state}"


class LiveScreen(LabScreen):
    SUB_TITLE = "Live"
    BINDINGS = [Binding("g", "start", "Start"), Binding("c", "cancel", "Cancel")]

    def __init__(self) -> None:
        super().__init__()
        self.view = LiveView()
        self.scope: CancelScope | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="live-profile")
            with Horizontal(classes="fields"):
                yield Label("kind")
                yield Input("reconf", id="live-kind", classes="short")
                yield Label("change")
                yield Input("", id="live-what", placeholder="workload.rxd=1024 ... | exec: ARGV")
            with Horizontal(classes="fields"):
                yield Label("rate")
                yield Input("", id="live-rate", placeholder="half the NDR", classes="short")
                yield Label("window s / soak duration")
                yield Input("", id="live-extent", placeholder="5 | 2m", classes="short")
            yield Static(self.view.headline(), id="live-headline")
            yield Static("received Mpps per second", classes="title")
            yield Sparkline([], id="live-received")
            yield Static("packets lost per second", classes="title")
            yield Sparkline([], id="live-lost")
            with VerticalScroll(id="live-scroll"):
                yield Static("", id="live-lines", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.show_profile()
        self.watch(self.lab, "profile", lambda _value: self.show_profile(), init=False)

    def show_profile(self) -> None:
        profile = self.lab.profile
        self.query_one("#live-profile", Static).update(
            f"profile: {profile if profile is not None else 'none (pick one on the Labs screen, l)'}    "
            f"store: {self.lab.db}")

    def action_start(self) -> None:
        if self.lab.busy:
            self.notify("measuring work is already in flight", severity="warning")
            return
        if self.lab.profile is None:
            self.notify("no profile: pick one on the Labs screen (l), or start `labctl tui FILE`", severity="error")
            return
        try:
            request = parse_request(*(self.query_one(f"#live-{name}", Input).value
                                      for name in ("kind", "what", "rate", "extent")))
        except api.LabError as exc:
            self.notify(error_text(exc), severity="error")
            return
        scope = self.scope = self.lab.open_scope()
        self.view = LiveView(state="starting", kind=request.kind)
        self.redraw()
        path, db, overrides = self.lab.profile, self.lab.db, dict(self.lab.overrides)

        def on_event(event: api.Event) -> None:
            self.app.call_from_thread(self.show_event, event)

        def measure() -> Any:
            loaded = api.load(path, overrides)
            if request.kind == "soak":
                return api.soak(loaded, request.duration, request.rate, db=db, on_event=on_event, scope=scope)
            return api.reconf(loaded, request.changes, request.exec_argv, rate=request.rate,
                              window_s=request.window_s, db=db, on_event=on_event, scope=scope)

        self.call_api(measure, owns=scope, group="measure", done=self.finished, failed=self.stopped)

    def action_cancel(self) -> None:
        if self.scope is None or self.scope.cancelled:
            return
        self.scope.cancel()
        self.view.state = "cancelling"
        self.view.lines.append("cancelling: sending stops and what was measured is stored")
        self.redraw()

    def show_event(self, event: api.Event) -> None:
        if self.view.state == "starting" and event.kind in ("phase", "live"):
            self.view.state = "running"
        self.view.apply(event)
        if event.kind == "trial":
            self.lab.stored += 1
        self.redraw()

    def finished(self, result: Any) -> None:
        self.scope = None
        self.view.state = "finished" if result.record.status == "ok" else "failed"
        self.view.lines += api.live_lines(result.record) + [f"run {result.run_id} in {result.db}"]
        self.lab.run_id = result.run_id
        self.redraw()

    def stopped(self, exc: BaseException) -> None:
        self.scope = None
        self.view.state = "cancelled" if isinstance(exc, api.Interrupted) else "failed"
        self.view.lines.append(error_text(exc))
        self.redraw()

    def redraw(self) -> None:
        self.query_one("#live-headline", Static).update(self.view.headline())
        self.query_one("#live-received", Sparkline).data = list(self.view.received)
        self.query_one("#live-lost", Sparkline).data = list(self.view.lost)
        self.query_one("#live-lines", Static).update("\n".join(self.view.lines))
        scroll = self.query_one("#live-scroll", VerticalScroll)
        self.call_after_refresh(scroll.scroll_end, animate=False)
