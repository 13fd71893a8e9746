"""Console test helpers: a deterministic app factory (frozen clock, fake fleet) and a screen reader."""

from __future__ import annotations

from lerobot_fleet.app import FleetConsoleApp
from lerobot_fleet.sources.fake import FakeSource, ManualClock


def make_app(read_only: bool = False) -> FleetConsoleApp:
    clock = ManualClock(1000.0)
    return FleetConsoleApp(FakeSource(clock), clock=clock, read_only=read_only, refresh_s=1.0, operator="test-operator")


def screen_text(app: FleetConsoleApp) -> str:
    """The current screen as plain text (what a person would read), for assertions."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def sync(fn):
    """Run an async test body with asyncio.run (no async pytest plugin is installed)."""
    import asyncio
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper
