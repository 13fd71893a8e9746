"""Cordon and uncordon from the console (`C`/`U` on the servers table or a server's detail), the row that says so,
and the drain dialog naming the robots that will find no room, against the fake fleet (no network)."""

from __future__ import annotations

from fleet_helpers import make_app, screen_text, sync, until
from lerobot_fleet.console.render import confirm_body
from lerobot_fleet.console.screens import ConfirmScreen, FleetScreen
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.model import FleetSnapshot, RobotRow, RobotState, ServerRow

from lerobot_policy_remote.wire.keys import Namespace

SIZE = (140, 42)
NS = Namespace("lab/act", "main", "pick")


async def _result(pilot, prefix: str) -> str:
    return await until(
        pilot,
        lambda: (t := pilot.app.last_result[0]).startswith(prefix) and "waiting" not in t and t,
        15,
        f"a result starting with {prefix!r}",
    )


@sync
async def test_cordon_and_uncordon_a_server_from_the_fleet_screen():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key("gpu-a-1")
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and app.screen.title_text == "Cordon server gpu-a-1?"
        body = app.screen.body.plain
        assert "It stops admitting new sessions; the sessions it has keep streaming." in body
        assert "3 session(s) keep streaming (arm-03, arm-04, arm-06)" in body
        assert "New robots of the service go to:\nReplicas with room: gpu-a-0 (+5 cap)" in body
        await pilot.press("y")
        assert (await _result(pilot, "cordon gpu-a-1")).startswith("cordon gpu-a-1: ok")
        assert app.source.actions == [("cordon", "gpu-a-1")]
        await until(
            pilot,
            lambda: app.current_snapshot().server("gpu-a-1").health == "cordoned",
            5,
            "the row cordoned",
            tick=True,
        )
        row = servers.get_column_text("gpu-a-1", "health"), servers.get_column_text("gpu-a-1", "headroom")
        assert row == ("cordoned", "0 cordon")
        servers.select_key("gpu-a-1")
        await pilot.press("U")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen) and "room once uncordoned +5 cap" in app.screen.body.plain
        await pilot.press("y")
        assert (await _result(pilot, "uncordon gpu-a-1")).startswith("uncordon gpu-a-1: ok")
        await until(
            pilot, lambda: app.current_snapshot().server("gpu-a-1").health == "ok", 5, "the row back to ok", tick=True
        )
        assert servers.get_column_text("gpu-a-1", "headroom") == "+5 cap"


@sync
async def test_read_only_cannot_cordon():
    app = make_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.query_one("#servers", KeyedTable).focus()
        await pilot.press("C", "U")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen) and app.source.actions == []
        assert not any("Cordon" in what for _, what in app.screen.key_help())


def _server(replica: str, robots: tuple[str, ...], headroom: int, health: str = "ok") -> ServerRow:
    return ServerRow(
        replica=replica,
        model_id=NS.model_id,
        revision=NS.revision,
        service=NS.service,
        active_sessions=len(robots),
        max_sessions=3,
        health=health,
        headroom=headroom,
        room_limit="cap",
        session_robots=robots,
        ns=NS,
        n_max=20.0,
    )


def _waiting(robot: str) -> RobotRow:
    return RobotRow(
        robot_id=robot,
        state=RobotState.RECONNECTING,
        reported_state="RECONNECTING",
        ns=NS,
        waiting="waiting: no replica with room (b 3/3)",
    )


def test_the_drain_dialog_names_the_robots_that_will_find_no_room():
    """A drain that moves 2 sessions to a replica with room for 1: the dialog says, before the operator confirms,
    that one of them will wait; with no room at all it names both; with room enough, nothing."""

    def body(b_room: int, robots: tuple[RobotRow, ...] = ()) -> str:
        snap = FleetSnapshot(
            "r", "connected", 0.1, robots, (_server("a", ("arm-1", "arm-2"), 1), _server("b", ("arm-3",), b_room))
        )
        return confirm_body("drain", ("a",), snap).plain

    assert "1 robot(s) will find no room and wait: 1 of arm-1, arm-2 (room for 1: whoever asks first)" in body(1)
    assert "2 robot(s) will find no room and wait: arm-1, arm-2" in body(0)
    assert "will find no room" not in body(2)
    crowded = body(2, (_waiting("arm-9"),))  # a robot already waiting takes a seat too
    assert (
        "1 robot(s) will find no room and wait: 1 of arm-1, arm-2 (room for 2: whoever asks first); "
        "1 already wait(s) for a seat: arm-9" in crowded
    )
    # a cordoned replica has no room for them
    snap = FleetSnapshot(
        "r", "connected", 0.1, (), (_server("a", ("arm-1",), 2), _server("b", (), 0, health="cordoned"))
    )
    assert "1 robot(s) will find no room and wait: arm-1" in confirm_body("drain", ("a",), snap).plain


@sync
async def test_the_drain_dialog_on_screen_names_them_too():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key("gpu-p-0")  # the only replica of its service: its four robots have nowhere to go
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "4 robot(s) will find no room and wait: towel-1, towel-2, towel-3, towel-4" in screen_text(app)
        await pilot.press("n")
