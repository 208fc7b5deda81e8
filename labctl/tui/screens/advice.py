"""Advice: the recommendations of a run with their evidence and rationale, the inconclusive knobs with
what to measure next, the warnings (``api.advise``), and writing a tuned profile to a path the user
picks (``api.apply_advice``, as ``labctl advise --apply PROFILE --out PATH``).

The run is the one chosen on Results (the app's ``run_id``; None: the newest), named in the first lines;
``[`` and ``]`` step to an older or a newer run here (and Results follows): after ``make demo`` the newest
run is an NDR search of one configuration, with nothing to advise, and the sweep beside it is one key away."""

from __future__ import annotations

from dataclasses import dataclass
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

STYLES = {"head": "bold", "run": "dim", "recommend": "bold green", "evidence": "dim", "rationale": "",
          "inconclusive": "bold yellow", "next": "", "warning": "red", "none": "dim"}


def advice_text(advice: Any, run: dict[str, Any], runs: list[dict[str, Any]]) -> Text:
    text = Text()
    for i, (kind, line) in enumerate(model.advice_lines(advice, run, runs)):
        if i:
            text.append("\n")
        text.append(line, style=STYLES.get(kind, ""))
    return text


@dataclass
class Answer:
    """One read of the advice: the store's runs, the run read (the chosen one, or the newest), and its
    advice or the error that stands for it (the runs stay pickable either way)."""

    runs: list[dict[str, Any]]
    run: dict[str, Any] | None
    advice: Any = None
    error: BaseException | None = None


def read_advice(db: Any, run_id: int | None) -> Answer:
    """On a worker thread: the runs, then the advice of the chosen one (``run_id``; None: the newest)."""
    runs = api.runs(db)
    run = model.chosen_run(runs, run_id)
    try:
        return Answer(runs, run, advice=api.advise(db, run["id"] if run is not None else run_id))
    except api.LabError as exc:
        return Answer(runs, run, error=exc)


class AdviceScreen(LabScreen):
    SUB_TITLE = "Advice"
    BINDINGS = [Binding("w", "write", "Write tuned profile"), Binding("f5", "refresh", "Refresh", show=False),
                Binding("left_square_bracket", "step(-1)", "Older run", show=False),
                Binding("right_square_bracket", "step(1)", "Newer run", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.shown: tuple | None = None
        self.runs: list[dict[str, Any]] = []

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
        self.call_api(read_advice, self.lab.db, run, done=self.show, group="advise",
                      failed=lambda exc: self.query_one("#advice", Static).update(error_text(exc)))

    def action_step(self, step: int) -> None:
        """Read an older (-1) or a newer (1) run's advice; Results shows that run too."""
        target = model.step_run(self.runs, self.lab.run_id, step)
        if target is not None:
            self.lab.run_id = target
            self.action_refresh()

    def show(self, answer: Answer) -> None:
        if self.lab.run_id is not None and answer.run is not None and answer.run["id"] != self.lab.run_id:
            return  # an earlier read, overtaken by a step to another run
        self.runs = answer.runs
        advice = self.query_one("#advice", Static)
        if answer.error is None:
            advice.update(advice_text(answer.advice, answer.run, answer.runs))
            return
        which = [model.run_choice_line(answer.runs, answer.run)] if answer.run is not None else []
        advice.update("\n".join([*which, error_text(answer.error)]))

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
