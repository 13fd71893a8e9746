"""The fleet help overlay names `tab` (the way to the servers table, where drain and cordon act), and a robot id with
its `?order` mark is shown whole on a 200-column terminal."""

from __future__ import annotations

from fleet_helpers import make_app, screen_text, sync, until
from lerobot_fleet.screens import HelpScreen

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
        app.store.on_telemetry(RobotTelemetry(client_uuid="sim-arm-01", state="STREAMING", replica="gpu-a-0", action_order="unchecked",
                                              seq=1), ns)
        await until(pilot, lambda: "sim-arm-01 ?order " in screen_text(app), 5, "the whole id and its mark", tick=True)
