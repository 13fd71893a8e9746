"""Console test helpers: a deterministic app factory (frozen clock, fake fleet) and a screen reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lerobot_fleet.app import FleetConsoleApp
from lerobot_fleet.sources.fake import FakeSource, ManualClock

from lerobot_policy_remote.testing import WaitTimeout, wait_until_async


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


async def until(pilot: Any, pred: Callable[[], Any], timeout: float, message: str, *, tick: bool = False) -> Any:
    """The kit's bounded wait between `pilot.pause`s (ticking the app's refresh first when `tick`: a live
    source's store changes need a tick to reach the screen); a timeout shows the last result and the screen."""

    def check() -> Any:
        if tick:
            pilot.app.tick()
        return pred()

    try:
        return await wait_until_async(check, timeout, interval=0.25 if tick else 0.02, message=message, pause=pilot.pause)
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}; last result: {pilot.app.last_result}\n{screen_text(pilot.app)}") from None
