"""Console fixtures: no blinking cursors (snapshots must not depend on timing)."""

from __future__ import annotations

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A blinking Input cursor makes snapshots depend on timing."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None, raising=False)
