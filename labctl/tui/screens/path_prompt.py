"""Ask for paths in a dialog: the profile to tune and where the tuned profile goes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static


class PathPrompt(ModalScreen["dict[str, str] | None"]):
    """Dismissed with ``{field: text}`` for every field (``enter`` on the last one, or Write), or None
    (``escape``, Cancel). ``fields``: (key, label, initial text)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, fields: list[tuple[str, str, str]], ok: str = "Write") -> None:
        super().__init__()
        self.title_text, self.fields, self.ok = title, fields, ok

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="question")
            for key, label, value in self.fields:
                yield Label(label)
                yield Input(value=value, id=f"field-{key}")
            with Horizontal(classes="buttons"):
                yield Button(self.ok, variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def _values(self) -> dict[str, str]:
        return {key: self.query_one(f"#field-{key}", Input).value.strip() for key, _label, _value in self.fields}

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        index = inputs.index(event.input)
        if index + 1 < len(inputs):
            inputs[index + 1].focus()
        else:
            self.dismiss(self._values())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._values() if event.button.id == "ok" else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
