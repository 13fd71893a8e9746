"""Console test helpers: a deterministic app factory (frozen clock, fake fleet) and a screen reader."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.data.sources.fake import FakeSource, ManualClock

from lerobot_policy_remote.testing import WaitTimeout, wait_until_async
from lerobot_policy_remote.wire.keys import Namespace


def make_app(read_only: bool = False) -> FleetConsoleApp:
    clock = ManualClock(1000.0)
    return FleetConsoleApp(FakeSource(clock), clock=clock, read_only=read_only, refresh_s=1.0, operator="test-operator")


def screen_text(app: FleetConsoleApp) -> str:
    """The current screen as plain text (what a person would read), for assertions.

    Read from Textual's public screenshot (`App.export_screenshot`, an SVG): each line's text runs are put
    back on a character grid at the column their x position names.
    """
    import xml.etree.ElementTree as ET

    from rich.cells import cell_len

    width, height = app.size
    grid = [[" "] * width for _ in range(height)]
    for el in ET.fromstring(app.export_screenshot()).iter("{http://www.w3.org/2000/svg}text"):
        line = re.search(r"-line-(\d+)\)", el.get("clip-path", ""))
        text = (el.text or "").replace("\xa0", " ")
        if line is None or not text:  # the window title has no line
            continue
        y, char_width = int(line.group(1)), float(el.get("textLength", "0")) / len(text)
        x = round(float(el.get("x", "0")) / char_width) if char_width else 0
        for ch in text:
            if 0 <= y < height and 0 <= x < width:
                grid[y][x] = ch
            x += cell_len(ch)
    return "\n".join("".join(row).rstrip() for row in grid)


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
        return await wait_until_async(
            check, timeout, interval=0.25 if tick else 0.02, message=message, pause=pilot.pause
        )
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}; last result: {pilot.app.last_result}\n{screen_text(pilot.app)}") from None


DEMO = Namespace("lerobot/act_demo", "main", "pick the cube")


class DrainScenario:
    """The issue's demo situation, frozen: demo-a was drained and is gone, demo-b is full (3/3), two robots
    moved to demo-b, and demo-arm-4 found no replica with room. Also one robot id in two namespaces."""

    label = "scenario"
    can_act = True

    def __init__(self, clock) -> None:
        self.clock = clock
        self.actions: list[tuple[str, str]] = []

    def start(self, store) -> None:
        from lerobot_policy_remote.wire.messages import ModelInfo, RobotTelemetry, ServerStatus, SessionInfo

        store.set_connection("connected")
        self.clock.advance(5.0)

        def status(replica: str, robots: list[str], draining: bool = False) -> ServerStatus:
            return ServerStatus(
                replica=replica,
                model=ModelInfo(repo_or_path=DEMO[0], revision=DEMO[1]),
                service=DEMO[2],
                max_sessions=3,
                active_sessions=len(robots),
                chunk_size=50,
                trained_fps=30.0,
                inference_ms_p50=5.0,
                warmed_up=True,
                draining=draining,
                load=len(robots) / 3,
                sessions=[SessionInfo(session_id=f"s-{r}", client_uuid=r) for r in robots],
            )

        for replica in ("demo-a", "demo-b"):
            store.on_server_alive(replica, True, DEMO)
        store.on_status(status("demo-a", ["demo-arm-1", "demo-arm-2"]), DEMO)
        store.on_status(status("demo-b", ["demo-arm-3"]), DEMO)
        store.on_metrics("demo-a", {"requests_total": 100.0})
        for i in range(1, 5):
            store.on_robot_alive(f"demo-arm-{i}", True, DEMO)
        self.clock.advance(1.0)
        store.on_metrics("demo-a", {"requests_total": 110.0})
        # the drain: demo-a moves its robots and goes away; demo-b fills up; demo-arm-4 is left waiting
        store.on_status(status("demo-a", [], draining=True), DEMO)
        store.on_status(status("demo-b", ["demo-arm-1", "demo-arm-2", "demo-arm-3"]), DEMO)
        store.on_server_alive("demo-a", False, DEMO)
        for i, (state, replica) in enumerate(
            (("STREAMING", "demo-b"), ("STREAMING", "demo-b"), ("STREAMING", "demo-b"), ("RECONNECTING", "")), 1
        ):
            store.on_telemetry(
                RobotTelemetry(
                    client_uuid=f"demo-arm-{i}",
                    state=state,
                    model_id=DEMO[0],
                    service=DEMO[2],
                    replica=replica,
                    session_id=f"s-demo-arm-{i}" if replica else "",
                    episode_id=2,
                    staleness_s=0.14773235500001647,
                    queue_s=0.5333333333333333,
                    rtt_p50_ms=12.3456,
                    rtt_p95_ms=20.5,
                    requests=40,
                    delay_steps=1,
                    last_outcome="ok" if replica else "event:draining",
                    fps=30.0,
                    seq=i,
                ),
                DEMO,
            )
        # the same client_uuid in another namespace is another robot
        other = ("lerobot/act_other", "main", "stack")
        store.on_robot_alive("demo-arm-1", True, other)
        store.on_telemetry(
            RobotTelemetry(client_uuid="demo-arm-1", state="CONNECTING", model_id=other[0], service=other[2], seq=1),
            other,
        )
        self.clock.advance(40.0)
        for i in range(1, 5):  # the robots keep reporting; demo-a stays silent
            store.on_telemetry(
                RobotTelemetry(
                    client_uuid=f"demo-arm-{i}",
                    state="STREAMING" if i < 4 else "RECONNECTING",
                    model_id=DEMO[0],
                    service=DEMO[2],
                    replica="demo-b" if i < 4 else "",
                    session_id=f"s-demo-arm-{i}" if i < 4 else "",
                    episode_id=2,
                    staleness_s=0.14773235500001647,
                    queue_s=0.5333333333333333,
                    rtt_p50_ms=12.3456,
                    rtt_p95_ms=20.5,
                    requests=80,
                    delay_steps=1,
                    last_outcome="ok" if i < 4 else "event:draining",
                    fps=30.0,
                    seq=10 + i,
                    rtc="off" if i < 4 else "",  # ACT: chunks are appended
                ),
                DEMO,
            )
        store.on_status(status("demo-b", ["demo-arm-1", "demo-arm-2", "demo-arm-3"]), DEMO)

    def stop(self) -> bool:
        return True

    def drain(self, replica, reason, requested_by):
        from lerobot_fleet.data.sources.base import ActionResult

        self.actions.append(("drain", replica))
        return ActionResult(True, replica, "drain", "draining")

    def reset_episode(self, robot_id, reason, requested_by, ns=None):
        from lerobot_fleet.data.sources.base import ActionResult

        self.actions.append(("reset", robot_id))
        return ActionResult(True, robot_id, "reset", "episode reset", episode_id=3)


def make_scenario_app() -> FleetConsoleApp:
    clock = ManualClock(1000.0)
    return FleetConsoleApp(DrainScenario(clock), clock=clock, refresh_s=1.0, operator="test-operator")
