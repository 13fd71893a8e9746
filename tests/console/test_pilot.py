"""Pilot tests of console behaviour against the fake fleet: keys, actions, cursor stability, read-only."""

from __future__ import annotations

from fleet_helpers import make_app, screen_text, sync, until
from lerobot_fleet.console.screens import ConfirmScreen, FleetScreen, RobotDetailScreen
from lerobot_fleet.console.widgets import KeyedTable

from lerobot_policy_remote.wire.messages import RobotTelemetry

SIZE = (140, 42)
ACT = ("lerobot/act_pick_place", "main", "pick up the cube")
PI0 = ("lerobot/pi0_towel", "v1.2", "fold the towel")


def rid(key: str | None) -> str | None:
    """The robot id of a row key (rows are keyed by namespace and id)."""
    return None if key is None else key.rsplit("\x1f", 1)[-1]


async def _wait_result(pilot, prefix: str) -> str:
    """The action's final result line (not the 'waiting' one shown while it runs)."""
    return await until(
        pilot,
        lambda: (text := pilot.app.last_result[0]).startswith(prefix) and "waiting" not in text and text,
        15,
        f"a result starting with {prefix!r}",
    )


@sync
async def test_drain_confirmed_calls_source_and_shows_result():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key("gpu-a-1")
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        text = await _wait_result(pilot, "drain gpu-a-1")
        assert text.startswith("drain gpu-a-1: ok"), text
        assert "3 session(s) affected" in text
        assert app.source.actions == [("drain", "gpu-a-1")]
        assert app.store.snapshot().server("gpu-a-1").health == "draining"
        assert "drain gpu-a-1: ok" in screen_text(app)


@sync
async def test_cancel_does_nothing():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        robots = app.screen.query_one("#robots", KeyedTable)
        robots.select_key("arm-03")
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert app.source.actions == []


@sync
async def test_reset_from_detail_screen_advances_episode():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        robots = app.screen.query_one("#robots", KeyedTable)
        robots.select_key("arm-03")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RobotDetailScreen) and rid(app.screen.robot_id) == "arm-03"
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("y")
        text = await _wait_result(pilot, "reset arm-03")
        assert "episode now 5" in text
        assert app.store.snapshot().robot("arm-03").episode_id == 5
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)


@sync
async def test_read_only_hides_and_disables_actions():
    app = make_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        app.screen.query_one("#robots", KeyedTable).select_key("arm-03")
        await pilot.press("r")
        await pilot.pause()
        app.screen.query_one("#servers", KeyedTable).focus()
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
        assert app.source.actions == []
        text = screen_text(app)
        assert "READ-ONLY" in text and "Drain server" not in text and "Reset episode" not in text


@sync
async def test_cursor_stays_on_robot_when_order_changes():
    """The row under the cursor is the robot the next keystroke acts on: it must follow the robot."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        robots = app.screen.query_one("#robots", KeyedTable)
        robots.select_key("towel-2")
        await pilot.pause()
        index_before = robots.cursor_row
        # towel-3 and towel-4 collapse to DEAD: both jump above towel-2 in the severity order
        for robot in ("towel-3", "towel-4"):
            app.store.on_telemetry(RobotTelemetry(client_uuid=robot, state="DEAD"), PI0)
        app.tick()
        await pilot.pause()
        assert rid(robots.selected_key) == "towel-2"
        assert robots.cursor_row != index_before
        await pilot.press("o")  # re-sort by robot id
        await pilot.pause()
        assert rid(robots.selected_key) == "towel-2"


@sync
async def test_filter_inverse_and_faults_only():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"!towel", "enter")
        await pilot.pause()
        robots = app.screen.query_one("#robots", KeyedTable)
        keys = [rid(k) for k in robots.row_keys()]
        assert keys and not any(k.startswith("towel") for k in keys)
        await pilot.press("escape")
        await pilot.press("f")
        await pilot.pause()
        assert {rid(k) for k in robots.row_keys()} == {"arm-07", "arm-09", "arm-04", "arm-05", "arm-03", "arm-10"}


@sync
async def test_wire_text_is_never_markup():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        robots = app.screen.query_one("#robots", KeyedTable)
        assert robots.get_column_text("arm-04", "outcome").startswith("[bold]bad_request[/bold]")
        assert (
            "[bold]bad_request[/" in robots.get_cell(robots.resolve("arm-04"), "line").plain
        )  # rendered text, not markup


@sync
async def test_gone_robot_is_kept_and_marked():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.store.set_connection("connected")
        app.source.clock.advance(0.5)
        app.store.on_robot_alive("arm-02", False, ACT)
        app.tick()
        await pilot.pause()
        robots = app.screen.query_one("#robots", KeyedTable)
        assert robots.get_column_text("arm-02", "state") == "GONE"


@sync
async def test_offscreen_rows_are_current_once_scrolled_into_view():
    """Only rows near the viewport are re-rendered per tick; scrolling brings the others up to date."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        ns = ("m", "main", "t")
        for i in range(300):
            app.store.on_telemetry(RobotTelemetry(client_uuid=f"zz-{i:03d}", state="STREAMING", episode_id=1), ns)
        app.tick()
        await pilot.pause()
        robots = app.screen.query_one("#robots", KeyedTable)
        app.store.on_telemetry(RobotTelemetry(client_uuid="zz-299", state="STREAMING", episode_id=77), ns)
        app.tick()
        await pilot.pause()
        assert robots.get_column_text("zz-299", "episode") == "1"  # far below the viewport: not re-rendered yet
        robots.select_key("zz-299")  # moves the cursor there and scrolls
        await pilot.pause()
        assert robots.get_column_text("zz-299", "episode") == "77"
        assert "zz-299" in screen_text(app) and " 77 " in screen_text(app)


@sync
async def test_a_click_on_a_robot_row_moves_the_cursor_to_that_robot():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        robots = app.screen.query_one("#robots", KeyedTable)
        await pilot.pause()
        target = robots.row_keys()[3]
        await pilot.click("#robots", offset=(5, 1 + 3))  # the header line, then the fourth row
        await pilot.pause()
        assert robots.selected_key == target


@sync
async def test_a_result_line_undone_by_a_later_verb_says_so_instead_of_staying_green():
    """The console cordons gpu-a-1; a script uncordons it afterwards: the line stops claiming it is cordoned."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key("gpu-a-1")
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        text = await _wait_result(pilot, "cordon gpu-a-1")
        app.tick()
        assert app.last_result == (text, True) and "earlier" not in text  # the row agrees: cordoned
        app.source.cordon("gpu-a-1", False, "maintenance done", "a script")  # `lerobot-fleet uncordon` elsewhere
        line = await until(pilot, lambda: "earlier" in app.last_result[0] and app.last_result, 5, "the line", tick=True)
        assert line == (f"{text} (earlier; gpu-a-1 is uncordoned now)", None)
        assert "gpu-a-1 is uncordoned now" in screen_text(app)
