"""Widgets: a DataTable that reconciles keyed rows in place and keeps the cursor on the same key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual._two_way_dict import TwoWayDict
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Cells = tuple[tuple[str, str], ...]  # one (plain text, style) per column
VIEW_MARGIN = 5  # rows above/below the viewport kept current too
RowT = TypeVar("RowT")  # a table's model row (a robot's, a server's, a group header)


class KeyedTable(DataTable[Text]):
    """Rows are identified by key; each refresh updates only changed cells (no clear(), no cursor jump).

    DataTable.sort keeps the cursor at its *index*, which would silently move the selection to another
    robot right before an operator presses "drain"; we restore it by key after every reorder.
    """

    def __init__(self, columns: Sequence[tuple[str, str, int]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._spec = list(columns)
        self._base = {key: width for key, _, width in self._spec}  # the widths asked for; `fit` only widens
        self._cells: dict[str, tuple[tuple[str, str], ...]] = {}
        self._order: list[str] = []
        self._col_index = {key: i for i, (key, _, _) in enumerate(self._spec)}
        # the last `reconcile`'s rows and their cells function, of the one row type that call was given
        self._rows: list[tuple[str, Any]] = []
        self._cells_of: Callable[[Any], Cells] | None = None

    def on_mount(self) -> None:
        # One DataTable column holding the whole pre-formatted line: DataTable renders (and, after any
        # update, re-renders) every visible *cell*, so one cell per row instead of twelve makes a repaint
        # about 5x cheaper (bench/console.py). Widths are fixed by us anyway.
        self.add_column(self._header(), key="line", width=self.line_width)

    def _header(self) -> Text:
        header = Text(no_wrap=True)
        for i, (_, label, width) in enumerate(self._spec):
            header.append(label[:width].ljust(width) + ("  " if i < len(self._spec) - 1 else ""))
        return header

    def fit(self, key: str, wanted: int) -> None:
        """Widen column `key` to `wanted` characters as far as the table's spare width allows (never below the width
        it was made with): a wide terminal shows long robot ids whole. Rows are re-joined only when the width
        changes."""
        i = self._col_index[key]
        base = self._base[key]
        spare = max(
            0, self.size.width - (self.line_width - self._spec[i][2] + base) - 2 * self.cell_padding - 2
        )  # 2: scrollbar
        width = max(base, min(wanted, base + spare))
        if width == self._spec[i][2] or not self.columns:
            return
        self._spec[i] = (key, self._spec[i][1], width)
        column = self.columns[ColumnKey("line")]
        column.label, column.width = self._header(), self.line_width
        line_key = ColumnKey("line")
        for row_key, cells in self._cells.items():
            self._data[RowKey(row_key)][line_key] = self._join(cells)
        self._require_update_dimensions = True
        self._clear_caches()
        self._update_count += 1
        self.refresh()

    @property
    def line_width(self) -> int:
        return sum(w for _, _, w in self._spec) + 2 * (len(self._spec) - 1)

    def _join(self, cells: Sequence[tuple[str, str]]) -> Text:
        """Fixed-width columns in one Text built in one go (wire strings stay plain text, never markup).

        A single cell spans the whole line (group header rows)."""
        if len(cells) == 1 and len(self._spec) > 1:
            text, style = cells[0]
            text = text if len(text) <= self.line_width else text[: self.line_width - 1] + "…"
            return Text(text.ljust(self.line_width), style=style, no_wrap=True, overflow="ellipsis")
        parts: list[str] = []
        spans: list[Span] = []
        pos = 0
        last = len(self._spec) - 1
        for i, ((_, _, width), (text, style)) in enumerate(zip(self._spec, cells, strict=True)):
            if len(text) > width:
                text = text[: width - 1] + "…"
            if style:
                spans.append(Span(pos, pos + len(text), style))
            seg = text.ljust(width + (2 if i < last else 0))
            parts.append(seg)
            pos += len(seg)
        return Text("".join(parts), spans=spans, no_wrap=True, overflow="ellipsis")

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        """A body cell: its one-line Text between the cell padding, styled as DataTable styles it (row metadata for
        the mouse, cursor and hover), without rich's Padding/Styled layout pass. A repaint renders every visible
        line; that pass was about a third of a frame. Headers, labels and anything not one plain line go the
        DataTable way."""
        row_key = self._row_locations.get_key(row_index) if row_index >= 0 and column_index >= 0 else None
        column_key = self._column_locations.get_key(column_index) if row_key is not None else None
        cell = self._data.get(row_key, {}).get(column_key) if row_key is not None and column_key is not None else None
        if (
            row_key is None
            or column_key is None
            or not isinstance(cell, Text)
            or "\n" in cell.plain
            or self.rows[row_key].height != 1
        ):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        key = (
            row_key,
            column_key,
            base_style,
            cursor,
            hover,
            self._show_hover_cursor,
            self._update_count,
            self._pseudo_class_state,
        )
        lines = self._cell_render_cache.get(key)
        if lines is None:
            fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
            component, post = self._get_styles_to_render_cell(
                False,
                False,
                fixed,
                hover,
                cursor,
                self.show_cursor,
                self._show_hover_cursor,
                self.cursor_foreground_priority == "css",
                self.cursor_background_priority == "css",
            )
            pre = base_style + Style.from_meta({"row": row_index, "column": column_index}) + component
            console = self.app.console
            pad = Segment(" " * self.cell_padding)
            # Text.render leaves out the Text's own style when it has no spans (its console render does not)
            text = cell.render(console) if cell.spans else [Segment(cell.plain, console.get_style(cell.style))]
            line = Segment.adjust_line_length([pad, *text, pad], width)
            lines = self._cell_render_cache[key] = [list(Segment.apply_style(line, pre, post))]
        return lines

    def get_column_text(self, row_key: str, column_key: str) -> str:
        """The plain text of one logical column of a row (tests and the e2e check read this)."""
        return self._cells[self.resolve(row_key)][self._col_index[column_key]][0]

    def row_keys(self) -> tuple[str, ...]:
        """The row keys in the order shown (group headers included)."""
        return tuple(self._order)

    def resolve(self, key: str) -> str:
        """A row key, or a bare robot id -> its row key (first in order when several namespaces share it)."""
        if key in self._cells:
            return key
        return next((k for k in self._order if k.rsplit("\x1f", 1)[-1] == key), key)

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def reconcile(self, rows: Sequence[tuple[str, RowT]], cells_of: Callable[[RowT], Cells]) -> None:
        """Make the table show exactly `rows` (key, model row), in order, touching only what changed.

        Cells are computed (and compared) only for new rows and for rows in or near the viewport:
        with 500 robots and ~40 visible rows that is most of the per-tick work saved. Rows scrolled
        into view are brought up to date at once (`watch_scroll_y`).
        """
        keep = self.selected_key
        wanted = {k for k, _ in rows}
        for key in [k for k in self._order if k not in wanted]:
            self.remove_row(key)
            self._cells.pop(key, None)
        for key, row in rows:
            if key not in self._cells:
                cells = cells_of(row)
                self.add_row(self._join(cells), key=key)
                self._cells[key] = cells
        order = [k for k, _ in rows]
        if order != self._order or len(order) != len(self._row_locations):
            # what DataTable.sort does, with our order: no per-row key function, one refresh
            self._row_locations = TwoWayDict({RowKey(k): i for i, k in enumerate(order)})
            self._update_count += 1
            self.refresh()
        self._order = order
        self._rows = list(rows)
        self._cells_of = cells_of
        self._refresh_visible()
        if keep is not None and keep in wanted:
            idx = self.get_row_index(keep)
            if idx != self.cursor_row:
                self.move_cursor(row=idx, scroll=False)

    def _refresh_visible(self) -> None:
        if self._cells_of is None:
            return
        top = int(self.scroll_y)
        height = self.size.height or 60
        lo, hi = max(0, top - VIEW_MARGIN), min(len(self._rows), top + height + VIEW_MARGIN)
        changed = False
        line_key = ColumnKey("line")
        for key, row in self._rows[lo:hi]:
            cells = self._cells_of(row)
            if cells != self._cells.get(key):
                # what update_cell does, minus a refresh() per cell: one refresh for the batch below
                self._data[RowKey(key)][line_key] = self._join(cells)
                self._cells[key] = cells
                changed = True
        if changed:
            self._update_count += 1
            self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(old_value) != int(new_value):
            self._refresh_visible()

    def _ordered_row_keys(self) -> list[RowKey | None]:
        locs = self._row_locations
        return [locs.get_key(i) for i in range(len(locs))]

    def select_key(self, key: str) -> None:
        """Move the cursor to a row key; a bare robot id finds its row whatever the namespace."""
        key = self.resolve(key)
        if key in self._cells:
            self.move_cursor(row=self.get_row_index(key))
