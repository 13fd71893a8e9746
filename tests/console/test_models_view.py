"""The per-model view (`m`): the rollout above both models' figures, and its promote/abort/start actions."""

from __future__ import annotations

from fleet_helpers import screen_text, sync, until
from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.console.render import rollout_text
from lerobot_fleet.console.screens import ConfirmScreen, FleetScreen, ModelsScreen
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.rollout_read import RolloutRead
from lerobot_fleet.data.sources.fake import ManualClock
from rollout_fake import ACT_V2, FP_NEW, MOVED, STATUS, RolloutFakeSource

SIZE = (140, 42)


def make_rollout_app(read_only: bool = False) -> FleetConsoleApp:
    clock = ManualClock(1000.0)
    return FleetConsoleApp(
        RolloutFakeSource(clock), clock=clock, read_only=read_only, refresh_s=1.0, operator="test-operator"
    )


async def _open_models(pilot) -> None:
    robots = pilot.app.screen.query_one("#robots", KeyedTable)
    robots.focus()
    robots.select_key(next(r.key for r in pilot.app.view.fleet.robots if r.robot_id == "arm-06"))
    await pilot.press("m")
    await pilot.pause()


def test_models_view(snap_compare):
    """`m` on an ACT arm: the rollout (canary, old -> new, robots per state, message, events) above the old and the
    new model's figures side by side."""
    assert snap_compare(make_rollout_app(), run_before=_open_models, terminal_size=SIZE)


@sync
async def test_m_shows_both_models_and_p_promotes_after_the_confirmation():
    app = make_rollout_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_models(pilot)
        assert isinstance(app.screen, ModelsScreen) and app.screen.service == "pick up the cube"
        text = screen_text(app)
        assert "CANARY" in text and "r-0042" in text
        assert f"lerobot/act_pick_place@v2 {FP_NEW[:12]}" in text and "lerobot/act_pick_place@main" in text
        assert "2 moved" in text and "1 moving" in text and "5 waiting" in text
        assert "towel" not in text and "pi0" not in text  # the selected robot's service only
        rows = {m.revision: m for m in app.view.models if m.service == "pick up the cube"}
        assert (rows["v2"].robots, rows["v2"].streaming, rows["v2"].fingerprint) == (2, 2, FP_NEW)
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert app.source.commands == []  # nothing is sent before the confirmation
        await pilot.press("y")
        text = await until(pilot, lambda: "ok" in app.last_result[0] and app.last_result[0], 15, "the promote result")
        assert text.startswith("rollout promote: ok"), text
        assert [(c.action, c.requested_by) for c in app.source.commands] == [("promote", "test-operator")]
        assert any("rollout promote: ok" in e.text for e in app.view.events)


@sync
async def test_s_starts_a_rollout_to_the_selected_model_with_a_10_percent_canary():
    app = make_rollout_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_models(pilot)
        table = app.screen.query_one("#models", KeyedTable)
        table.select_key(next(m.key for m in app.view.models if m.revision == "v2"))
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await until(pilot, lambda: app.source.commands, 15, "the start command")
        (command,) = app.source.commands
        assert (command.action, command.to, command.service, command.canary) == ("start", FP_NEW, ACT_V2.service, 0.1)


@sync
async def test_abort_cancelled_sends_nothing_and_read_only_hides_the_rollout_keys():
    app = make_rollout_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_models(pilot)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, ModelsScreen) and app.source.commands == []
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, FleetScreen)
    app = make_rollout_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await _open_models(pilot)
        assert not any(what in ("Promote", "Abort rollout") for _, what in app.screen.key_help())
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, ModelsScreen) and app.source.commands == []


@sync
async def test_a_moved_robot_is_one_row_of_the_fleet():
    app = make_rollout_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for robot in MOVED:
            rows = [r for r in app.view.fleet.robots if r.robot_id == robot]
            assert [(r.ns, r.state.name) for r in rows] == [(ACT_V2, "STREAMING")]


def test_old_rollout_figures_are_marked_old():
    fresh = rollout_text(RolloutRead(STATUS, True, "", 0.5)).plain
    assert "OLD" not in fresh and "r-0042" in fresh and "CANARY" in fresh
    assert "lerobot/act_pick_place@main -> lerobot/act_pick_place@v2 9f2c4e1a7b3d" in fresh
    stale = rollout_text(RolloutRead(STATUS, True, "", 7.0)).plain
    assert stale.startswith("OLD (last read 7s ago)")
    failed = rollout_text(RolloutRead(STATUS, False, "no fleet router answered at @lerobot-fleet/rollout/status", 1.0))
    assert failed.plain.startswith("OLD (last read 1s ago): no fleet router answered")
    assert rollout_text(RolloutRead()).plain.startswith("OLD (never read)")


def test_a_router_that_never_started_a_rollout_says_so():
    from lerobot_policy_remote.wire.rollout import RolloutStatus

    assert rollout_text(RolloutRead(RolloutStatus(), True, "", 0.5)).plain == "no rollout has started on this router"


@sync
async def test_the_verbs_json_figures_are_the_consoles():
    """`rollout status --json` computes its models the way the console's tick does, from the same store: the same
    numbers, field by field."""
    from lerobot_fleet.data.model_compare import ModelWindow
    from lerobot_fleet.verbs.rollout import report_json

    from lerobot_policy_remote.wire.rollout import RolloutReply

    app = make_rollout_app()
    async with app.run_test(size=SIZE) as pilot:
        await _open_models(pilot)
        shown = [m.as_dict() for m in app.view.models if m.service == STATUS.service]
        window = ModelWindow()
        cap = app.store.capture()
        window.observe(cap)
        verb = report_json(RolloutReply(True, "", STATUS), window.figures(cap, STATUS.service))["models"]
    assert len(shown) == 2 and verb == shown
