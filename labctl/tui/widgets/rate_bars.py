"""A horizontal bar per configuration: its median rate, 95% interval and n, redrawn as trials land."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from labctl.tui.model import Bar


class RateBars(Static):
    """``set_bars`` draws one line per configuration: label, bar scaled to the largest value, median,
    interval and n (the unit goes in a title above). Width follows the widget's own size."""

    DEFAULT_CSS = """
    RateBars { height: auto; min-height: 1; }
    """

    def __init__(self, empty: str = "no trials yet", **kwargs) -> None:
        super().__init__(empty, **kwargs)
        self.empty = empty
        self._bars: list[Bar] = []

    def set_bars(self, bars: list[Bar]) -> None:
        self._bars = list(bars)
        self.update(self._render_bars())

    def on_resize(self) -> None:
        if self._bars:
            self.update(self._render_bars())

    def _render_bars(self) -> Text:
        if not self._bars:
            return Text(self.empty, style="dim")
        width = max(self.size.width, 40)
        label_w = min(max(len(b.label) for b in self._bars), max(12, width // 2))
        figures = [f" {b.value:6.2f}" + (f" [{b.low:.2f}, {b.high:.2f}]" if b.low is not None else "")
                   + f" n={b.n}" for b in self._bars]
        bar_w = max(4, width - label_w - 1 - max(len(f) for f in figures))
        top = max((b.value for b in self._bars), default=0.0) or 1.0
        text = Text()
        for i, (bar, figure) in enumerate(zip(self._bars, figures)):
            filled = bar.value / top * bar_w
            whole = int(filled)
            text.append(bar.label[:label_w].ljust(label_w) + " ")
            text.append("█" * whole + ("▌" if filled - whole >= 0.5 else ""), style="green")
            text.append(" " * (bar_w - whole - (1 if filled - whole >= 0.5 else 0)))
            text.append(figure, style="dim" if bar.n < 3 else "")
            if i < len(self._bars) - 1:
                text.append("\n")
        return text
