"""Snapshot tests of every console view, against the deterministic fake fleet and a frozen clock.

Regenerate baselines on purpose only: `pytest tests/console --snapshot-update` (then review the SVGs).
"""

from __future__ import annotations

from fleet_helpers import make_app, make_scenario_app
from lerobot_fleet.console.widgets import KeyedTable

SIZE = (140, 42)


async def _select(pilot, table_id: str, key: str) -> None:
    table = pilot.app.screen.query_one(f"#{table_id}", KeyedTable)
    table.focus()
    table.select_key(key)
    await pilot.pause()


def test_fleet_mixed_states(snap_compare):
    """Robots in every state (DEAD, GONE, STALLED, ..., UNKNOWN) sorted by severity; servers by health."""
    assert snap_compare(make_app(), terminal_size=SIZE)


def test_fleet_filtered(snap_compare):
    """`/` filters both tables: only robots and servers matching "gpu-a-1" stay."""
    assert snap_compare(make_app(), press=["slash", *"gpu-a-1", "enter"], terminal_size=SIZE)


def test_fleet_faults_only(snap_compare):
    """`f` hides healthy robots and servers."""
    assert snap_compare(make_app(), press=["f"], terminal_size=SIZE)


def test_fleet_read_only(snap_compare):
    """--read-only: READ-ONLY badge, no drain/reset in the footer."""
    assert snap_compare(make_app(read_only=True), terminal_size=SIZE)


def test_robot_detail(snap_compare):
    """Enter on a robot: state history, RTT sparkline, audit tail (markup in wire text shown verbatim)."""

    async def before(pilot):
        await _select(pilot, "robots", "arm-04")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_server_detail(snap_compare):
    """Enter on a server: sessions, capacity inputs, metrics, audit tail."""

    async def before(pilot):
        await _select(pilot, "servers", "gpu-a-0")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_drain_confirmation(snap_compare):
    """`d` on a server names it, the sessions that will move and the replicas with room."""

    async def before(pilot):
        await _select(pilot, "servers", "gpu-a-1")
        await pilot.press("d")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_reset_confirmation(snap_compare):
    """`r` on a robot names it, its episode and its session."""

    async def before(pilot):
        await _select(pilot, "robots", "arm-03")
        await pilot.press("r")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_disconnected_router(snap_compare):
    """Router lost: header DISCONNECTED, data age grows, robots keep their last state; arm-09 (gone before) stays
    GONE."""
    app = make_app()

    async def before(pilot):
        store = pilot.app.store
        store.set_connection("connected")
        for (
            r
        ) in store.snapshot().robots:  # the router going away deletes every token we were watching (again for arm-09)
            store.on_robot_alive(r.robot_id, False, (r.model_id, r.revision, r.service))
        store.set_connection("disconnected")
        pilot.app.source.clock.advance(12.0)
        pilot.app.tick()
        await pilot.pause()

    assert snap_compare(app, run_before=before, terminal_size=SIZE)


def test_gone_server_and_waiting_robot(snap_compare):
    """After draining demo-a: demo-a is gone (age shown, old figures dimmed), demo-b is full (room +0 cap),
    demo-arm-4 waits and says why; demo-arm-1 also exists in another namespace (two rows)."""
    assert snap_compare(make_scenario_app(), terminal_size=SIZE)


def test_waiting_robot_detail(snap_compare):
    """The waiting robot's detail: rounded units, the waiting reason, trends."""

    async def before(pilot):
        await _select(pilot, "robots", "demo-arm-4")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(make_scenario_app(), run_before=before, terminal_size=SIZE)


def test_gone_server_detail(snap_compare):
    """A gone server's detail says its figures are old and since when."""

    async def before(pilot):
        await _select(pilot, "servers", "demo-a")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(make_scenario_app(), run_before=before, terminal_size=SIZE)


def test_help_lists_every_key(snap_compare):
    """`?` on the fleet screen lists every key it answers."""
    assert snap_compare(make_app(), press=["question_mark"], terminal_size=SIZE)


def test_marks(snap_compare):
    """space marks the row under the cursor and moves down; the header and the title count marks."""

    async def before(pilot):
        await _select(pilot, "robots", "arm-03")
        await pilot.press("space", "space")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_bulk_reset_confirmation(snap_compare):
    """Marked robots: one confirmation lists every target."""

    async def before(pilot):
        await _select(pilot, "robots", "arm-03")
        await pilot.press("space", "space", "space", "r")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_alerts_screen(snap_compare):
    """`!`: open alerts with when they started, then cleared ones; the header counts open alerts."""

    async def before(pilot):
        app = pilot.app
        app.source.clock.advance(15.0)  # DEAD/STALLED robots pass the 10 s fault threshold
        app.tick()
        # arm-03's staleness recovers: its staleness alert clears
        from dataclasses import replace

        tel, ns = app.source.telemetry("arm-03")
        app.store.on_telemetry(replace(tel, staleness_s=0.1, seq=tel.seq + 1), ns)
        app.source.clock.advance(5.0)
        app.tick()
        await pilot.press("exclamation_mark")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)


def test_events_screen(snap_compare):
    """`e`: state changes, audit refusals, drains, alerts; newest first."""
    assert snap_compare(make_scenario_app(), press=["e"], terminal_size=SIZE)


def test_events_filtered(snap_compare):
    """The event filter: `sev:warn robot:arm-04` keeps arm-04's warnings and errors."""
    assert snap_compare(
        make_app(), press=["e", "slash", *"sev:warn", "space", *"robot:arm-04", "enter"], terminal_size=SIZE
    )


def test_grouped_by_server_with_a_fold(snap_compare):
    """`g` groups robots by server with a header per group; `z` folds the group under the cursor."""

    async def before(pilot):
        await pilot.press("g")
        await pilot.pause()
        await _select(pilot, "robots", "towel-1")
        await pilot.press("z")
        await pilot.pause()

    assert snap_compare(make_app(), run_before=before, terminal_size=SIZE)
