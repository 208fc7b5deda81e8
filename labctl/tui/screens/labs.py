"""Labs: the profiles in ``domains/`` (and FILE) with their problems inline (``api.validate``), the
labs that are up with requested vs negotiated NICs and pins (``api.status``); up and down
(``api.load`` + ``api.up``, ``api.down``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from labctl import api
from labctl.tui import model
from labctl.tui.screens.base import LabScreen, error_text


def profile_option(result: api.Validation, current: Path | None) -> Option:
    mark = ("✓ " if result.ok else "✗ ")
    text = Text(mark, style="green" if result.ok else "red")
    text.append(str(result.path), style="bold")
    text.append(f"  {model.profile_summary(result)}")
    if current is not None and Path(current).resolve() == result.path.resolve():
        text.append("  [in use]", style="bold cyan")
    for problem in result.problems:
        text.append("\n    " + problem.render(), style="yellow" if problem.severity == "warning" else "red")
    return Option(text, id=str(result.path))


class LabsScreen(LabScreen):
    SUB_TITLE = "Labs"
    BINDINGS = [Binding("enter", "use", "Use profile"), Binding("u", "up", "Up"), Binding("d", "down", "Down"),
                Binding("f5", "refresh", "Refresh", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("Profiles (enter: use for Sweep and Advice; u/d: up/down a libvirt lab)", classes="title")
            yield OptionList(id="profiles")
            yield Static("Labs that are up", classes="title")
            yield Static("reading the state files...", id="labs")
            yield Static("", id="lab-action")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.watch(self.lab, "profile", lambda _value: self.action_refresh(), init=False)

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        paths = model.profile_paths(self.lab.profiles_dir, self.lab.profile)
        self.call_api(lambda: (api.validate(paths), api.status()), done=self.show, group="labs")

    def show(self, found: tuple[list[api.Validation], list[dict[str, Any]]]) -> None:
        validations, labs = found
        options = self.query_one("#profiles", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([profile_option(v, self.lab.profile) for v in validations])
        if validations:
            options.highlighted = min(highlighted or 0, len(validations) - 1)
        lines = [line for entry in labs for line in model.lab_lines(entry)]
        self.query_one("#labs", Static).update("\n".join(lines) if lines else "no labs are up")

    def _highlighted(self) -> Path | None:
        options = self.query_one("#profiles", OptionList)
        if options.highlighted is None or not options.option_count:
            return None
        return Path(options.get_option_at_index(options.highlighted).id or "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_use()

    def action_use(self) -> None:
        path = self._highlighted()
        if path is not None:
            self.lab.profile = path
            self.notify(f"using {path} on the Sweep and Advice screens")

    def _say(self, text: str) -> None:
        self.query_one("#lab-action", Static).update(text)

    def action_up(self) -> None:
        path = self._highlighted()
        if path is None:
            return
        if self.lab.busy:
            self.notify("measuring work is in flight: wait for it or cancel it first", severity="warning")
            return
        scope = self.lab.open_scope()
        self._say(f"up {path}: starting...")

        def phase(event: api.Event) -> None:
            if event.kind == "phase":
                self.app.call_from_thread(self._say, f"up {path}: {event.message}")

        def bring_up() -> Any:
            return api.up(api.load(path), on_event=phase, scope=scope)

        self.call_api(bring_up, owns=scope, group="measure", done=self.was_up,
                      failed=lambda exc: self._say(f"up {path}: {error_text(exc)}"))

    def was_up(self, result: Any) -> None:
        lines = [f"{result.domain}: {result.state} on {result.uri} (domain type {result.domain_type})"]
        lines += api.describe_nics(result.nics) + [f"warning: {w}" for w in result.warnings]
        self._say("\n".join(lines))
        self.action_refresh()

    def action_down(self) -> None:
        path = self._highlighted()
        if path is None:
            return

        def was_down(result: Any) -> None:
            self._say(f"{result.name}: removed {len(result.removed)} resources" if result.removed
                      else f"{result.name}: nothing to remove")
            self.action_refresh()

        self.call_api(api.down, str(path), done=was_down, group="down",
                      failed=lambda exc: self._say(f"down {path}: {error_text(exc)}"))
