"""Results: the runs of the store (``api.runs``), then the configurations of one (``api.reports``: every
scalar metric the trials carry) in a sortable, filterable table with the report's notes, and an A/B
comparison of two selections of rows (``api.compare_trials``); ``w`` writes the shown run's page
(``api.report_html``) into the current directory as ``labctl-run-ID.html`` and shows its path. Under the
notes, the trend marks of the run's profile (``api.trend_marks``: jumpavg's regressions and progressions
across its runs, the shown run's own flagged), when it has any."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, Input, Label, Static

from labctl import api
from labctl.tui import model
from labctl.tui.screens.base import LabScreen, error_text


class ResultsScreen(LabScreen):
    SUB_TITLE = "Results"
    BINDINGS = [Binding("o", "sort", "Sort"), Binding("O", "sort(True)", "Reverse", show=False),
                Binding("slash", "filter", "Filter"), Binding("1", "mark('A')", "A"), Binding("2", "mark('B')", "B"),
                Binding("x", "clear_marks", "Clear A/B", show=False), Binding("w", "write_page", "Page"),
                Binding("f5", "refresh", "Refresh", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self.table: model.ConfigTable | None = None
        self.sort_index = -1
        self.reverse = False
        self.marks: dict[str, str] = {}  # row key -> "A" | "B"
        self.shown_run: int | None = None
        self.runs: list[dict[str, Any]] = []
        self.highlighted: model.ConfigRow | None = None
        self.shown_count = (0, 0)
        self.page: Path | None = None  # the last page written (w), shown under the notes
        self.marks_lines: list[str] = []  # the trend marks of the shown run's profile

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            with Horizontal(classes="fields"):
                yield Label("filter")
                yield Input("", id="filter", placeholder="e.g. burst=64 rx_queue_size=1024")
            yield DataTable(id="configs", cursor_type="row", zebra_stripes=True)
            yield Static("A/B: mark rows with 1 (A) and 2 (B) to compare them", id="compare")
            yield Static("", id="notes")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        runs = self.query_one("#runs", DataTable)
        runs.add_columns(*model.RUN_COLUMNS)
        self.watch(self.lab, "run_id", lambda _value: self.load_run(), init=False)

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self.call_api(api.runs, self.lab.db, done=self.show_runs, group="runs",
                      failed=lambda exc: self._say("#notes", error_text(exc)))

    def _say(self, selector: str, text: str) -> None:
        self.query_one(selector, Static).update(text)

    # -- runs ----------------------------------------------------------------------------------------

    def show_runs(self, runs: list[dict[str, Any]]) -> None:
        self.runs = runs
        table = self.query_one("#runs", DataTable)
        lines = [model.run_line(run) for run in reversed(runs)]  # newest first
        # the columns' widths from their cells, set here: left to DataTable's own measuring (after the rows
        # land, at idle), a CI run showed them stuck at the headers' widths ("import:" for the run's name)
        with table.prevent(DataTable.RowHighlighted):  # filling the table is not the user choosing a run
            table.clear(columns=True)
            for i, label in enumerate(model.RUN_COLUMNS):
                table.add_column(label, width=max([cell_len(label)] + [cell_len(line[i]) for line in lines]))
            for run, line in zip(reversed(runs), lines):
                table.add_row(*line, key=str(run["id"]))
            if not runs:
                self._say("#notes", f"{self.lab.db}: no runs yet")
                return
            wanted = self.chosen()
            if str(wanted) in {str(r["id"]) for r in runs}:
                table.move_cursor(row=table.get_row_index(str(wanted)))
        self.load_run()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "runs" and event.row_key.value is not None:
            self.lab.run_id = int(event.row_key.value)

    def chosen(self) -> int | None:
        """The run shown: the one chosen (here or on Advice), else the newest."""
        run = model.chosen_run(self.runs, self.lab.run_id)
        return run["id"] if run is not None else self.lab.run_id

    def load_run(self) -> None:
        run = self.chosen()
        if run is None:
            return
        self.call_api(api.reports, self.lab.db, run, done=lambda reports: self.show_reports(run, reports),
                      group="report", failed=self.no_report)
        self.marks_lines = []
        self.call_api(api.trend_marks, self.lab.db, run, done=lambda lines: self.show_marks(run, lines), group="marks",
                      failed=lambda _exc: None)  # no marks is nothing to say: the report's own errors show

    def no_report(self, exc: BaseException) -> None:
        self.table = None
        configs = self.query_one("#configs", DataTable)
        configs.clear(columns=True)
        self._say("#notes", error_text(exc))

    def show_reports(self, run: int, reports: dict[str, Any]) -> None:
        if run != self.chosen():
            return  # an earlier read, overtaken by the choice of another run
        if run != self.shown_run:
            self.marks.clear()
            self.sort_index, self.reverse = -1, False
        self.shown_run = run
        self.table = model.config_table(reports)
        self.redraw_configs()
        if self.focused is None:  # the configurations are what the keys (1, 2, o, arrows) act on
            self.set_focus(self.query_one("#configs", DataTable))
        self.show_compare()

    # -- the configurations --------------------------------------------------------------------------

    def _rows(self) -> list[model.ConfigRow]:
        assert self.table is not None
        rows = model.filter_rows(self.table.rows, self.query_one("#filter", Input).value)
        if self.sort_index >= 0:
            rows = model.sort_rows(rows, self.table.columns[self.sort_index], self.reverse)
        return rows

    def redraw_configs(self) -> None:
        if self.table is None:
            return
        configs = self.query_one("#configs", DataTable)
        cursor = configs.cursor_row
        configs.clear(columns=True)
        configs.add_column("A/B", key="mark")
        for i, column in enumerate(self.table.columns):
            arrow = (" ▼" if self.reverse else " ▲") if i == self.sort_index else ""
            configs.add_column(column.title + arrow, key=column.key)
        rows = self._rows()
        for row in rows:
            cells = [model.cell(c, row.values.get(c.key)) for c in self.table.columns]
            mark = self.marks.get(row.key, "")
            configs.add_row(Text(mark, style="bold magenta" if mark == "A" else "bold cyan"), *cells, key=row.key)
        if rows:
            configs.move_cursor(row=min(cursor, len(rows) - 1))
        self.shown_count = (len(rows), len(self.table.rows))
        self.show_notes()

    def show_notes(self) -> None:
        """The run and how many rows are shown, the highlighted row's notes, the report's notes."""
        if self.table is None:
            return
        shown, total = self.shown_count
        lines = [f"run {self.shown_run}: " + (f"{shown} of {total} configurations" if shown != total
                                              else f"{total} configurations")]
        if self.highlighted is not None and self.highlighted.notes:
            lines.append(f"{self.highlighted.label}: {'; '.join(self.highlighted.notes)}")
        lines += [f"note: {n}" for n in self.table.notes]
        lines += self.marks_lines
        if self.page is not None:
            lines.append(f"page: {self.page}")
        self._say("#notes", "\n".join(lines))

    def show_marks(self, run: int, lines: list[str]) -> None:
        if run == self.shown_run or run == self.lab.run_id:  # not the answer for a run left meanwhile
            self.marks_lines = lines
            self.show_notes()

    # -- the page ------------------------------------------------------------------------------------

    def action_write_page(self) -> None:
        """Write the shown run's page (one self-contained HTML file) into the current directory."""
        if self.shown_run is None:
            self.notify("no run shown", severity="warning", timeout=4)
            return
        out = Path.cwd() / f"labctl-run-{self.shown_run}.html"
        self.call_api(api.report_html, out, self.lab.db, self.shown_run, done=self.page_written, group="page")

    def page_written(self, path: Path) -> None:
        self.page = path
        self.notify(f"wrote {path}", timeout=8)
        self.show_notes()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.redraw_configs()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.set_focus(self.query_one("#configs", DataTable))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        if self.table is None or event.data_table.id != "configs" or event.column_index == 0:
            return
        index = event.column_index - 1
        self.reverse = not self.reverse if index == self.sort_index else False
        self.sort_index = index
        self.redraw_configs()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "runs":  # the cursor on a run chooses it: its configurations, its advice
            if event.row_key.value is not None:
                self.lab.run_id = int(event.row_key.value)
            return
        if self.table is None:
            return
        self.highlighted = next((r for r in self.table.rows if r.key == event.row_key.value), None)
        self.show_notes()

    def action_sort(self, reverse: bool = False) -> None:
        if self.table is None:
            return
        if reverse:
            self.reverse = not self.reverse
        else:
            self.sort_index = (self.sort_index + 1) % len(self.table.columns)
            self.reverse = self.table.columns[self.sort_index].kind in ("number", "delta")  # best first
        self.redraw_configs()
        column = self.table.columns[self.sort_index]
        self.notify(f"sorted by {column.title}{' (descending)' if self.reverse else ''}", timeout=2)

    def action_filter(self) -> None:
        self.set_focus(self.query_one("#filter", Input))

    # -- A/B -----------------------------------------------------------------------------------------

    def action_mark(self, which: str) -> None:
        configs = self.query_one("#configs", DataTable)
        if self.table is None or not configs.row_count:
            return
        key = configs.coordinate_to_cell_key(configs.cursor_coordinate).row_key.value
        if key is None:
            return
        if self.marks.get(key) == which:
            del self.marks[key]
        else:
            self.marks[key] = which
        self.redraw_configs()
        self.show_compare()

    def action_clear_marks(self) -> None:
        self.marks.clear()
        self.redraw_configs()
        self.show_compare()

    def _selection(self, which: str) -> tuple[list[str], list[int]]:
        assert self.table is not None
        keys = [k for k, mark in self.marks.items() if mark == which]
        labels = [r.label for r in self.table.rows if r.key in keys]
        return labels, model.selection_trials(self.table.rows, keys)

    def show_compare(self) -> None:
        if self.table is None:
            return
        (a_labels, a), (b_labels, b) = self._selection("A"), self._selection("B")
        if not a or not b:
            self._say("#compare", "A/B: mark rows with 1 (A) and 2 (B) to compare them" +
                      (f"; A = {' + '.join(a_labels)}" if a else "") + (f"; B = {' + '.join(b_labels)}" if b else ""))
            return
        head = f"A = {' + '.join(a_labels)} ({len(a)} trials); B = {' + '.join(b_labels)} ({len(b)} trials)"
        metric, run = self.table.metric, self.shown_run
        self.call_api(api.compare_trials, self.lab.db, a, b, metric, run, group="compare",
                      done=lambda delta: self._say("#compare", f"{head}\nB vs A, {metric}: {delta.describe()}"),
                      failed=lambda exc: self._say("#compare", f"{head}\n{error_text(exc)}"))
