"""The fleet help overlay names `tab` (the way to the servers table, where drain and cordon act), and a robot id with
its `?order` mark is shown whole on a 200-column terminal (the robot column widens into spare width)."""

from __future__ import annotations

from fleet_helpers import make_app, screen_text, sync, until
from lerobot_fleet.console.screens import HelpScreen

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry


@sync
async def test_help_names_tab_to_reach_the_servers_table():
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = dict(app.screen.keys)
        assert keys["tab/shift+tab"] == "switch between the robots and servers tables"
        assert "tab/shift+tab  switch between the robots and servers tables" in screen_text(app)
        assert {"C", "U", "d"} <= keys.keys()


@sync
async def test_a_robot_id_and_its_order_mark_are_not_cut_at_200_columns():
    app = make_app()
    ns = Namespace("lerobot/act_pick_place", "main", "pick up the cube")
    async with app.run_test(size=(200, 50)) as pilot:
        app.store.on_robot_alive("sim-arm-01", True, ns)
        app.store.on_telemetry(
            RobotTelemetry(
                client_uuid="sim-arm-01", state="STREAMING", replica="gpu-a-0", action_order="unchecked", seq=1
            ),
            ns,
        )
        await until(pilot, lambda: "sim-arm-01 ?order " in screen_text(app), 5, "the whole id and its mark", tick=True)


@sync
async def test_a_long_robot_id_is_shown_whole_when_the_terminal_has_room():
    app = make_app()
    ns = Namespace("lerobot/act_pick_place", "main", "pick up the cube")
    long_id = "warehouse-b-arm-0017-left"
    async with app.run_test(size=(200, 50)) as pilot:
        app.store.on_robot_alive(long_id, True, ns)
        app.store.on_telemetry(
            RobotTelemetry(client_uuid=long_id, state="STREAMING", replica="gpu-a-0", action_order="unchecked", seq=1),
            ns,
        )
        await until(
            pilot, lambda: f"{long_id} ?order " in screen_text(app), 5, "the whole long id and its mark", tick=True
        )
        header = next(line for line in screen_text(app).splitlines() if "robot" in line and "state" in line)
        assert header.index("state") - header.index("robot") == len(long_id) + len(" ?order") + 2  # the column widened
    narrow = make_app()
    async with narrow.run_test(size=(140, 42)) as pilot:  # no spare width: the column keeps its 20
        narrow.store.on_robot_alive(long_id, True, ns)
        narrow.store.on_telemetry(RobotTelemetry(client_uuid=long_id, state="STREAMING", replica="gpu-a-0", seq=1), ns)
        await until(pilot, lambda: "warehouse-b-arm-001…" in screen_text(narrow), 5, "the id cut at 20", tick=True)
