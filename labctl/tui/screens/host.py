"""Host: the doctor report (``api.doctor``, ``api.describe_host``) and the host's steadiness on demand."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Header, Input, Label, Static

from labctl import api
from labctl.tui.screens.base import LabScreen, error_text


def facts_table(lines: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for label, text in lines:
        table.add_row(label, text)
    return table


class HostScreen(LabScreen):
    SUB_TITLE = "Host"
    BINDINGS = [Binding("p", "probe", "Probe steadiness"), Binding("f5", "refresh", "Refresh", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll():
            yield Static("reading the host's facts...", id="facts")
            with Horizontal(classes="fields"):
                yield Label("steadiness probe (s):")
                yield Input("5", id="probe-seconds", type="number", classes="short")
            yield Static("steadiness: not measured (p probes the host's own speed with nothing else running)",
                         id="steadiness")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.call_api(api.doctor, done=self.show_facts, group="doctor")

    def show_facts(self, result: api.Doctor) -> None:
        lines = api.describe_host(result)
        self.query_one("#facts", Static).update(facts_table([line for line in lines if line[0] != "steadiness"]))
        if result.steadiness is not None:
            self.query_one("#steadiness", Static).update(f"steadiness: {result.steadiness.describe()}")

    def action_probe(self) -> None:
        if self.lab.busy:
            self.notify("measuring work is in flight: a probe now would measure it, not the host", severity="warning")
            return
        text = self.query_one("#probe-seconds", Input).value
        try:
            seconds = float(text)
        except ValueError:
            self.notify(f"steadiness probe: {text!r} is not a number of seconds", severity="error")
            return
        scope = self.lab.open_scope()
        self.query_one("#steadiness", Static).update(f"steadiness: probing the host for {seconds:g} s...")
        self.call_api(api.doctor, seconds, scope=scope, owns=scope, done=self.show_facts,
                      failed=self.probe_failed, group="measure")

    def probe_failed(self, exc: BaseException) -> None:
        self.query_one("#steadiness", Static).update(f"steadiness: {error_text(exc)}")
