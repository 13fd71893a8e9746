"""Widgets: a DataTable that reconciles keyed rows in place and keeps the cursor on the same key."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

Row = tuple[str, tuple[Text, ...]]  # (row key, cells); the first cell's plain text must equal the key


class KeyedTable(DataTable):
    """Rows are identified by key; each refresh updates only changed cells (no clear(), no cursor jump).

    DataTable.sort keeps the cursor at its *index*, which would silently move the selection to another
    robot right before an operator presses "drain"; we restore it by key after every reorder.
    """

    def __init__(self, columns: Sequence[tuple[str, str, int]], **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)  # type: ignore[arg-type]
        self._spec = list(columns)
        self._cells: dict[str, tuple[str, ...]] = {}
        self._order: list[str] = []

    def on_mount(self) -> None:
        for key, label, width in self._spec:
            self.add_column(label, key=key, width=width)

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
        col_keys = [c[0] for c in self._spec]
        for key in [k for k in self._order if k not in wanted]:
            self.remove_row(key)
            self._cells.pop(key, None)
        for key, cells in rows:
            plain = tuple(c.plain + "\x00" + str(c.style) for c in cells)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            elif old != plain:
                for i, (a, b) in enumerate(zip(old, plain, strict=True)):
                    if a != b:
                        self.update_cell(key, col_keys[i], cells[i])
            self._cells[key] = plain
        order = [k for k, _ in rows]
        current = [rk.value for rk in self._ordered_row_keys()]
        if current != order:
            rank = {k: i for i, k in enumerate(order)}
            self.sort(col_keys[0], key=lambda cell: rank.get(cell.plain if isinstance(cell, Text) else str(cell), len(rank)))
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

