"""Advice: the recommendations of a run with their evidence and rationale, the inconclusive knobs with
what to measure next, the warnings (``api.advise``), and writing a tuned profile to a path the user
picks (``api.apply_advice``, as ``labctl advise --apply PROFILE --out PATH``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from labctl import api
from labctl.tui import model
from labctl.tui.screens.base import LabScreen, error_text
from labctl.tui.screens.path_prompt import PathPrompt

STYLES = {"head": "bold", "recommend": "bold green", "evidence": "dim", "rationale": "", "inconclusive": "bold yellow",
          "next": "", "warning": "red", "none": "dim"}


def advice_text(advice: Any, run: int | None) -> Text:
    text = Text()
    for i, (kind, line) in enumerate(model.advice_lines(advice, run)):
        if i:
            text.append("\n")
        text.append(line, style=STYLES.get(kind, ""))
    return text


class AdviceScreen(LabScreen):
    SUB_TITLE = "Advice"
    BINDINGS = [Binding("w", "write", "Write tuned profile"), Binding("f5", "refresh", "Refresh", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="advice-scroll"):
            yield Static("reading the advice...", id="advice")
        yield Static("w writes the profile in use with this advice applied (labctl advise --apply)", id="applied")
        yield Footer(compact=True)

    def on_screen_resume(self) -> None:
        wanted = (self.lab.run_id, self.lab.stored)
        if wanted != self.shown:
            self.action_refresh()

    def action_refresh(self) -> None:
        run = self.lab.run_id
        self.shown = (run, self.lab.stored)
        self.call_api(api.advise, self.lab.db, run, done=lambda advice: self.show(advice, run), group="advise",
                      failed=lambda exc: self.query_one("#advice", Static).update(error_text(exc)))

    def show(self, advice: Any, run: int | None) -> None:
        self.query_one("#advice", Static).update(advice_text(advice, run))

    def action_write(self) -> None:
        profile = self.lab.profile
        default = f"{Path(profile).stem}-tuned.yaml" if profile is not None else "tuned.yaml"
        self.app.push_screen(PathPrompt("Write a tuned profile: the profile with this advice applied",
                                        [("profile", "profile to tune", str(profile or "")),
                                         ("out", "write the tuned profile to", default)]), self.write)

    def write(self, answer: dict[str, str] | None) -> None:
        if not answer:
            return
        profile, out = answer["profile"], answer["out"]
        applied = self.query_one("#applied", Static)
        if not profile or not out:
            applied.update("both a profile and a path to write are needed")
            return

        def written(notes: list[str]) -> None:
            applied.update("\n".join([*notes, f"wrote {out}"]))

        self.call_api(api.apply_advice, profile, out, self.lab.db, self.lab.run_id, done=written, group="apply",
                      failed=lambda exc: applied.update(error_text(exc)))
