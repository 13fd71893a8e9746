"""Console fixtures: no blinking cursors (snapshots must not depend on timing)."""

from __future__ import annotations

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking Input cursor makes snapshots depend on timing: every Input is made with `cursor_blink`
    (Textual's public switch) off, so a focused Input always shows its cursor."""
    made = Input.__init__

    def init(self: Input, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        self.cursor_blink = False

    monkeypatch.setattr(Input, "__init__", init)
