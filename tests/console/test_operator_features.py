"""Pilot tests of the operator features: alerts open and clear, bulk actions report per target, export
writes what is on screen, the event log filters and stays bounded, help and the palette list every action."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

from fleet_helpers import make_app, screen_text, sync
from lerobot_fleet.console.app import FleetConsoleApp
from lerobot_fleet.console.screens import AlertsScreen, ConfirmScreen, EventsScreen, FleetScreen, HelpScreen
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.alerts import AlertBook, AlertRules
from lerobot_fleet.data.sources.fake import FakeSource, ManualClock
from lerobot_fleet.data.store import EVENT_HISTORY, FleetStore

SIZE = (140, 42)


def keys(text: str) -> list[str]:
    return ["space" if ch == " " else ch for ch in text]


async def _wait(pilot, pred, what: str):
    for _ in range(200):
        await pilot.pause(0.02)
        if pred():
            return
    raise AssertionError(f"timed out waiting for {what}; result: {pilot.app.last_result}")


@sync
async def test_alert_opens_highlights_and_clears():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        tel, ns = app.source.telemetry("arm-03")
        assert ("staleness", next(r.key for r in app.store.snapshot().robots if r.robot_id == "arm-03")) in {
            a.key for a in app.alerts.listing()
        }
        robots = app.screen.query_one("#robots", KeyedTable)
        assert robots.get_column_text("arm-03", "mark") == "!"
        assert "alerts  " in screen_text(app) and "open" in screen_text(app)
        app.store.on_telemetry(replace(tel, state="STREAMING", staleness_s=0.05, errors=0, seq=tel.seq + 1), ns)
        app.source.clock.advance(2.0)
        app.tick()
        await pilot.pause()
        cleared = [a for a in app.alerts.listing() if a.name == "arm-03" and a.cleared_s is not None]
        assert cleared and cleared[0].rule == "staleness"
        assert robots.get_column_text("arm-03", "mark") == ""
        events = [e.text for e in app.view.events if e.kind == "alert"]
        assert any("alert cleared: arm-03 staleness" in t for t in events) and any(
            "alert opened: arm-03" in t for t in events
        )
        await pilot.press("exclamation_mark")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        assert "cleared" in screen_text(app) and "staleness" in screen_text(app)


def test_alert_rules_from_file_and_flags(tmp_path):
    path = tmp_path / "alerts.toml"
    path.write_text("[alerts]\nrtt_p95_ms = 300\nserver_load = 0\n")
    rules = AlertRules.load(path, staleness_s=2.0, fault_s=None)
    assert (rules.rtt_p95_ms, rules.server_load, rules.staleness_s, rules.fault_s) == (300.0, 0.0, 2.0, 10.0)
    bad = tmp_path / "bad.json"
    bad.write_text('{"rtt": 1}')
    try:
        AlertRules.load(bad)
    except ValueError as exc:
        assert "unknown keys ['rtt']" in str(exc)
    else:
        raise AssertionError("an unknown key must be refused")
    clock = ManualClock()
    store = FleetStore(clock=clock)
    FakeSource(clock).start(store)
    book = AlertBook(AlertRules(server_load=0))  # load rule off: gpu-p-0 (0.95) raises nothing
    book.update(store.snapshot(), clock())
    assert not any(a.rule == "server_load" for a in book.listing())


@sync
async def test_bulk_drain_one_confirmation_results_per_target():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        servers = app.screen.query_one("#servers", KeyedTable)
        servers.focus()
        servers.select_key("gpu-a-0")
        await pilot.press("space", "space")  # gpu-a-0 and the next row
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        body = app.screen.body.plain
        marked = sorted(app.screen_stack[-2].marks["servers"])
        assert len(marked) == 2 and all(m in body for m in marked)
        await pilot.press("y")
        await _wait(pilot, lambda: app.last_result[0].startswith("drain: 2 of 2 ok"), "bulk result")
        assert sorted(t for _, t in app.source.actions) == marked
        lines = app.last_result[0].splitlines()
        assert len(lines) == 3 and all(any(m in line for line in lines[1:]) for m in marked)
        await _wait(
            pilot, lambda: sum(1 for e in app.view.events if e.kind == "drain" and "ok" in e.text) >= 2, "drain events"
        )


@sync
async def test_mark_all_shown_and_clear():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f", "a")  # faults only, then mark all shown
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        shown = {r.key for r in screen.visible_robots(app.current_snapshot())}
        assert screen.marks["robots"] == shown and len(shown) == 6
        await pilot.press("c")
        assert not screen.marks["robots"]


@sync
async def test_export_json_and_csv_is_what_is_on_screen(tmp_path):
    clock = ManualClock(1000.0)
    app = FleetConsoleApp(FakeSource(clock), clock=clock, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"towel", "enter", "x")
        await _wait(pilot, lambda: app.last_result[0].startswith("exported"), "export")
        data = json.loads((tmp_path / "fleet-fleet-1.json").read_text())
        assert sorted(r["robot_id"] for r in data["robots"]) == ["towel-1", "towel-2", "towel-3", "towel-4"]
        assert [s["replica"] for s in data["servers"]] == ["gpu-p-0"] or data["servers"] == []
        await pilot.press("X")
        await _wait(pilot, lambda: "fleet-fleet-2-robots.csv" in app.last_result[0], "csv export")
        rows = list(csv.DictReader((tmp_path / "fleet-fleet-2-robots.csv").open()))
        assert len(rows) == 4 and {r["state"] for r in rows} == {"STREAMING"}
        await pilot.press("e")
        await pilot.pause()
        await pilot.press("x")
        await _wait(pilot, lambda: "fleet-events-3.json" in app.last_result[0], "events export")
        assert json.loads((tmp_path / "fleet-events-3.json").read_text())["events"]


@sync
async def test_events_filter_and_bounded_history():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, EventsScreen)
        await pilot.press("slash", *keys("robot:arm-04 sev:error"), "enter")
        await pilot.pause()
        shown = app.screen.shown()
        assert shown and all(e.robot == "arm-04" and e.severity == "error" for e in shown)
        ages = [e.age_s for e in app.view.events]
        assert ages == sorted(ages)  # newest first
    store = FleetStore(clock=ManualClock())
    for i in range(EVENT_HISTORY + 50):
        store.event("info", "state", f"e{i}")
    events = store.events()
    assert len(events) == EVENT_HISTORY and events[0].text == f"e{EVENT_HISTORY + 49}"


@sync
async def test_help_and_palette_list_every_action():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = {k for k, _ in app.screen.keys}
        for b in FleetScreen.BINDINGS:
            from lerobot_fleet.console.render import key_label

            assert key_label(b.key) in listed, b.key
        await pilot.press("escape")
        titles = [c.title for c in app.get_system_commands(screen)]
        for b in FleetScreen.BINDINGS:
            if not b.action.startswith("app."):
                assert any(t.startswith(b.description) for t in titles), b.description


@sync
async def test_group_by_namespace_and_fold():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g", "g")  # none -> server -> namespace
        await pilot.pause()
        robots = app.screen.query_one("#robots", KeyedTable)
        groups = [k for k in robots.row_keys() if k.startswith("\x1egroup:")]
        assert len(groups) == 2 and any("pi0_towel" in g for g in groups)
        robots.select_key(next(g for g in groups if "pi0_towel" in g))
        await pilot.press("z")
        await pilot.pause()
        assert not any(k.endswith("towel-1") for k in robots.row_keys())
        await pilot.press("enter")  # enter on a group header unfolds it
        await pilot.pause()
        assert any(k.endswith("towel-1") for k in robots.row_keys())


@sync
async def test_reading_exporting_and_folding_the_view_advance_nothing(tmp_path):
    """Only a tick builds a view and moves alerts: the getters, an export and a fold change no alert and
    write no event, even when the next tick would open alerts."""
    clock = ManualClock(1000.0)
    app = FleetConsoleApp(
        FakeSource(clock), clock=clock, refresh_s=3600.0, export_dir=tmp_path
    )  # no timer tick in the test
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        clock.advance(15.0)  # DEAD/STALLED robots pass the 10 s fault threshold: the next tick opens fault alerts
        alerts, events, view = app.alerts.listing(), app.view.events, app.view
        store_events = app.store.events()
        assert not any(a.rule == "fault" for a in alerts)
        assert app.current_snapshot() is app.current_snapshot() is view.fleet and app.view is view
        await pilot.press(
            "g", "z", "x", "e", "x"
        )  # group, fold, export the fleet, the events screen, export the events
        await _wait(pilot, lambda: "fleet-events-2.json" in app.last_result[0], "two exports")
        assert app.alerts.listing() == alerts and app.view.events == events and app.store.events() == store_events
        assert app.view.fleet is view.fleet and app.view.alerts is view.alerts and app.view.event_log is view.event_log
        assert [e["text"] for e in json.loads((tmp_path / "fleet-events-2.json").read_text())["events"]] == [
            e.text for e in view.events
        ]
        app.tick()  # the tick does it
        assert any(a.rule == "fault" and a.cleared_s is None for a in app.alerts.listing())
        assert any(e.text.startswith("alert opened: arm-07") for e in app.view.events)
        assert not any(e.kind == "alert" for e in app.store.events())  # the app writes nothing into the store
        assert app.view.alerts.open_count > view.alerts.open_count and len(app.view.events) > len(view.events)


@sync
async def test_pause_freezes_the_view_but_not_the_result_line():
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        await pilot.pause()
        frozen = app.view
        assert frozen.paused and "PAUSED" in screen_text(app)
        tel, ns = app.source.telemetry("arm-01")
        app.store.on_telemetry(replace(tel, episode_id=99, seq=tel.seq + 1), ns)
        app.source.clock.advance(30.0)
        app.tick()
        await pilot.press("slash", *"arm-01", "enter")  # what is shown is still the frozen fleet
        await pilot.pause()
        assert app.view.fleet is frozen.fleet and app.view.alerts is frozen.alerts
        assert app.screen.query_one("#robots", KeyedTable).get_column_text("arm-01", "episode") == "12"
        await pilot.press("p")
        await pilot.pause()
        assert not app.view.paused and app.view.fleet is not frozen.fleet
        assert app.screen.query_one("#robots", KeyedTable).get_column_text("arm-01", "episode") == "99"
