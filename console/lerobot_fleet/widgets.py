"""Widgets: a DataTable that reconciles keyed rows in place and keeps the cursor on the same key."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Row = tuple[str, tuple[tuple[str, str], ...]]  # (row key, cells as (plain text, style))


class KeyedTable(DataTable):
    """Rows are identified by key; each refresh updates only changed cells (no clear(), no cursor jump).

    DataTable.sort keeps the cursor at its *index*, which would silently move the selection to another
    robot right before an operator presses "drain"; we restore it by key after every reorder.
    """

    def __init__(self, columns: Sequence[tuple[str, str, int]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._spec = list(columns)
        self._cells: dict[str, tuple[tuple[str, str], ...]] = {}
        self._order: list[str] = []
        self._col_index = {key: i for i, (key, _, _) in enumerate(self._spec)}

    def on_mount(self) -> None:
        # One DataTable column holding the whole pre-formatted line: DataTable renders (and, after any
        # update, re-renders) every visible *cell*, so one cell per row instead of twelve makes a repaint
        # about 5x cheaper (bench/console.py). Widths are fixed by us anyway.
        header = Text(no_wrap=True)
        for i, (_, label, width) in enumerate(self._spec):
            header.append(label[:width].ljust(width) + ("  " if i < len(self._spec) - 1 else ""))
        self.add_column(header, key="line", width=self.line_width)

    @property
    def line_width(self) -> int:
        return sum(w for _, _, w in self._spec) + 2 * (len(self._spec) - 1)

    def _join(self, cells: Sequence[tuple[str, str]]) -> Text:
        """Fixed-width columns in one Text; wire strings are appended as plain text (never markup)."""
        line = Text(no_wrap=True, overflow="ellipsis")
        append = line.append
        last = len(self._spec) - 1
        for i, ((_, _, width), (text, style)) in enumerate(zip(self._spec, cells, strict=True)):
            if len(text) > width:
                text = text[: width - 1] + "…"
            append(text, style or None)
            pad = width - len(text) + (2 if i < last else 0)
            if pad > 0:
                append(" " * pad)
        return line

    def get_column_text(self, row_key: str, column_key: str) -> str:
        """The plain text of one logical column of a row (tests and the e2e check read this)."""
        return self._cells[row_key][self._col_index[column_key]][0]

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def reconcile(self, rows: Sequence[Row]) -> None:
        """Make the table show exactly `rows`, in order, touching only what changed."""
        keep = self.selected_key
        wanted = {k for k, _ in rows}
        for key in [k for k in self._order if k not in wanted]:
            self.remove_row(key)
            self._cells.pop(key, None)
        for key, cells in rows:
            old = self._cells.get(key)
            if old is None:
                self.add_row(self._join(cells), key=key)
            elif old != cells:
                self.update_cell(key, "line", self._join(cells))
            self._cells[key] = cells
        order = [k for k, _ in rows]
        current = [rk.value for rk in self._ordered_row_keys()]
        if current != order:
            rank = {k: i for i, k in enumerate(order)}
            keys_by_line = {id(self._data[RowKey(k)][ColumnKey("line")]): k for k in order}
            self.sort("line", key=lambda cell: rank.get(keys_by_line.get(id(cell), ""), len(rank)))
        self._order = order
        if keep is not None and keep in wanted:
            idx = self.get_row_index(keep)
            if idx != self.cursor_row:
                self.move_cursor(row=idx, scroll=False)

    def _ordered_row_keys(self) -> list:
        locs = self._row_locations
        return [locs.get_key(i) for i in range(len(locs))]

    def select_key(self, key: str) -> None:
        if key in self._cells:
            self.move_cursor(row=self.get_row_index(key))

