"""The render module on fixtures, without an app (as k9s tests its renderers): every cell and text the
console shows for the issue's cases — gone servers, room, waiting robots, rounded units, (namespace, id) rows."""

from __future__ import annotations

from fleet_helpers import DEMO, DrainScenario
from lerobot_fleet.console import render
from lerobot_fleet.data.capacity import room
from lerobot_fleet.data.model import RobotState, robot_key
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore


def _scenario() -> FleetStore:
    clock = ManualClock(1000.0)
    store = FleetStore(clock=clock)
    DrainScenario(clock).start(store)
    return store


def _plain(cells) -> list[str]:
    return [text for text, _ in cells]


def _styles(cells) -> list[str]:
    return [style for _, style in cells]


def test_gone_server_shows_last_seen_age_and_dims_old_figures():
    snap = _scenario().snapshot()
    gone = snap.server("demo-a")
    assert gone.health == "gone" and gone.seen_age_s is not None and gone.seen_age_s >= 40
    cells = render.server_cells(gone)
    cols = [k for k, _, _ in render.SERVER_COLUMNS]
    health = _plain(cells)[cols.index("health")]
    assert health.startswith("gone ") and health.endswith("s")  # "gone 40s"
    for col in ("sessions", "load", "rps", "nmax"):
        assert _styles(cells)[cols.index(col)] == render.OLD, col  # last known, not live
    assert _plain(cells)[cols.index("headroom")] == "—"  # a gone server takes no robots


def test_room_is_bounded_by_the_session_cap_and_says_so():
    snap = _scenario().snapshot()
    full = snap.server("demo-b")
    assert full.n_max is not None and full.n_max > 3  # the latency model alone would say there is room
    assert (full.headroom, full.room_limit) == (0, "cap")
    assert render.room_text(full) == "+0 cap"
    assert room(89.9, 3, 3, False) == (0, "cap")
    assert room(2.5, 8, 1, False) == (1, "N_max")
    assert room(50.0, 8, 2, True) == (0, "draining")
    assert room(None, 0, 2, False) == (None, "")


def test_waiting_robot_says_why():
    snap = _scenario().snapshot()
    waiting = snap.robot(robot_key(DEMO, "demo-arm-4"))
    assert waiting.state is RobotState.RECONNECTING
    assert waiting.waiting == "waiting: no replica with room (demo-b 3/3, demo-a gone)"
    cols = [k for k, _, _ in render.ROBOT_COLUMNS]
    assert _plain(render.robot_cells(waiting))[cols.index("outcome")].startswith("no room (demo-b 3/3")
    moved = snap.robot(robot_key(DEMO, "demo-arm-1"))
    assert moved.waiting == "" and moved.replica == "demo-b"


def test_reconnecting_robot_that_still_names_its_old_session_waits_too():
    """Seen live: after `event:draining` the robot reports RECONNECTING with its old server and session."""
    from lerobot_policy_remote.wire.messages import RobotTelemetry

    clock = ManualClock(1000.0)
    store = FleetStore(clock=clock)
    DrainScenario(clock).start(store)
    store.on_telemetry(
        RobotTelemetry(
            client_uuid="demo-arm-4",
            state="RECONNECTING",
            replica="demo-a",
            session_id="s-old",
            last_outcome="event:draining",
            seq=99,
        ),
        DEMO,
    )
    r = store.snapshot().robot(robot_key(DEMO, "demo-arm-4"))
    assert r.waiting == "waiting: no replica with room (demo-b 3/3, demo-a gone)"


def test_robot_detail_prints_rounded_units():
    d = _scenario().robot_detail(robot_key(DEMO, "demo-arm-4"))
    text = render.robot_summary_text(d).plain
    assert "queue 0.53 s" in text and "staleness 0.15 s" in text and "rtt p50/p95 12/20 ms" in text
    assert "0.5333" not in text and "0.1477" not in text
    assert "waiting: no replica with room (demo-b 3/3, demo-a gone)" in text


def test_rows_are_keyed_by_namespace_and_id():
    snap = _scenario().snapshot()
    same_id = [r for r in snap.robots if r.robot_id == "demo-arm-1"]
    assert len(same_id) == 2 and len({r.key for r in same_id}) == 2
    assert {r.ns[2] for r in same_id} == {DEMO[2], "stack"}


def test_stale_robot_figures_are_dimmed():
    clock = ManualClock(1000.0)
    store = FleetStore(clock=clock)
    DrainScenario(clock).start(store)
    clock.advance(30.0)  # nobody reports for 30 s
    r = store.snapshot().robot(robot_key(DEMO, "demo-arm-2"))
    assert r.is_stale
    cols = [k for k, _, _ in render.ROBOT_COLUMNS]
    styles = _styles(render.robot_cells(r))
    assert styles[cols.index("rtt")] == render.OLD and styles[cols.index("seen")] == "bold red"


def test_bulk_confirmation_lists_every_target():
    snap = _scenario().snapshot()
    keys = tuple(robot_key(DEMO, f"demo-arm-{i}") for i in (1, 2, 4))
    assert render.confirm_title("reset", keys, snap) == "Reset the episodes of 3 robots?"
    body = render.confirm_body("reset", keys, snap).plain
    for i in (1, 2, 4):
        assert f"demo-arm-{i}" in body
    body = render.confirm_body("drain", ("demo-a", "demo-b"), snap).plain
    assert "demo-a" in body and "demo-b" in body and "has room" in body
    text, ok = render.results_text(
        "reset", [("a", True, "reset a: ok"), ("b", False, "reset b: FAILED — no robot answered")]
    )
    assert not ok and text.splitlines() == [
        "reset: 1 of 2 ok",
        "  reset a: ok",
        "  reset b: FAILED — no robot answered",
    ]


def test_sort_any_column_is_total():
    snap = _scenario().snapshot()
    from lerobot_fleet.data.sorting import ROBOT_SORT_KEYS, SERVER_SORT_KEYS, sort_rows

    for col in ROBOT_SORT_KEYS:
        a = [r.key for r in sort_rows(list(snap.robots), ROBOT_SORT_KEYS, col)]
        b = [r.key for r in sort_rows(list(reversed(snap.robots)), ROBOT_SORT_KEYS, col)]
        assert a == b, col
    for col in SERVER_SORT_KEYS:
        assert [s.replica for s in sort_rows(list(snap.servers), SERVER_SORT_KEYS, col)] == [
            s.replica for s in sort_rows(list(reversed(snap.servers)), SERVER_SORT_KEYS, col)
        ]


def test_robot_row_and_detail_show_network_time_and_an_unchecked_action_order():
    """The telemetry's round-trip split and the server's action-order verdict reach the row and the detail."""
    from lerobot_policy_remote.wire.messages import RobotTelemetry

    clock = ManualClock(1000.0)
    store = FleetStore(clock=clock)
    ns = ("org/act", "main", "pick")
    store.on_telemetry(
        RobotTelemetry(
            "robot-217",
            "STREAMING",
            rtt_p50_ms=120.0,
            rtt_p95_ms=300.0,
            network_ms_p50=25.0,
            queue_wait_ms_p50=15.0,
            inference_ms_p50=80.0,
            action_order="unchecked",
            seq=1,
        ),
        ns,
    )
    store.on_telemetry(RobotTelemetry("robot-218", "STREAMING", action_order="checked", seq=1), ns)
    snap = store.snapshot()
    cols = [k for k, _, _ in render.ROBOT_COLUMNS]
    unchecked = _plain(render.robot_cells(snap.robot(robot_key(ns, "robot-217"))))
    assert unchecked[cols.index("robot")] == "robot-217" + render.UNCHECKED_ORDER_MARK
    assert unchecked[cols.index("net")] == "25"
    checked = _plain(render.robot_cells(snap.robot(robot_key(ns, "robot-218"))))
    assert checked[cols.index("robot")] == "robot-218" and checked[cols.index("net")] == "—"
    detail = store.robot_detail(robot_key(ns, "robot-217"))
    text = render.robot_summary_text(detail).plain
    assert "network 25 ms" in text and "inference 80 ms" in text and "action order NOT checked" in text


def test_rtc_cell_shows_the_delay_when_on_off_without_rtc_and_a_dash_before_a_session():
    """The robots table's `rtc` column and the robot detail say whether the session runs real-time chunking."""
    from lerobot_policy_remote.wire.messages import RobotTelemetry

    clock = ManualClock(1000.0)
    store = FleetStore(clock=clock)
    ns = ("org/pi0", "main", "fold")
    store.on_telemetry(
        RobotTelemetry("arm-rtc", "STREAMING", session_id="s-1", replica="gpu-0", delay_steps=3, rtc="on", seq=1), ns
    )
    store.on_telemetry(
        RobotTelemetry("arm-act", "STREAMING", session_id="s-2", replica="gpu-0", delay_steps=1, rtc="off", seq=1), ns
    )
    store.on_telemetry(RobotTelemetry("arm-new", "CONNECTING", seq=1), ns)
    store.on_telemetry(
        RobotTelemetry("arm-odd", "STREAMING", session_id="s-3", rtc="\x1b[31mon", seq=1), ns
    )  # not a known value
    snap = store.snapshot()
    cols = [k for k, _, _ in render.ROBOT_COLUMNS]
    width = {k: w for k, _, w in render.ROBOT_COLUMNS}["rtc"]

    def cell(robot: str) -> str:
        return _plain(render.robot_cells(snap.robot(robot_key(ns, robot))))[cols.index("rtc")]

    assert [cell(x) for x in ("arm-rtc", "arm-act", "arm-new", "arm-odd")] == ["d=3", "off", "—", "—"]
    assert all(len(cell(x)) <= width for x in ("arm-rtc", "arm-act", "arm-new"))
    text = render.robot_summary_text(store.robot_detail(robot_key(ns, "arm-rtc"))).plain
    assert "rtc on, inference delay 3 steps" in text
    assert (
        "rtc off (chunks are appended)" in render.robot_summary_text(store.robot_detail(robot_key(ns, "arm-act"))).plain
    )
    assert "rtc —" in render.robot_summary_text(store.robot_detail(robot_key(ns, "arm-new"))).plain
    from lerobot_fleet.data.sorting import ROBOT_SORT_KEYS, sort_rows

    order = [r.robot_id for r in sort_rows(list(snap.robots), ROBOT_SORT_KEYS, "rtc")]
    assert order.index("arm-rtc") < order.index("arm-act") < order.index("arm-new")


def test_robot_table_fits_200_columns_without_cutting_robot_ids():
    """Every column of a robots line, with its separators, fits a 200-column terminal."""
    spec = render.ROBOT_COLUMNS
    line = sum(w for _, _, w in spec) + 2 * (len(spec) - 1)
    assert line <= 200 - 4  # the table's own padding and scrollbar
    assert {k: w for k, _, w in spec}["robot"] >= len("sim-arm-01" + render.UNCHECKED_ORDER_MARK)


def test_the_server_detail_says_which_pass_serves_and_nothing_for_a_server_that_does_not_say() -> None:
    from lerobot_fleet.console.render.detail import server_summary_text
    from lerobot_fleet.data.store import FleetStore

    from lerobot_policy_remote.wire.keys import Namespace
    from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus

    store = FleetStore()
    store.set_connection("connected")
    ns = Namespace("org/act", "main", "pick")
    for replica, engine in (("gpu-1", "compiled"), ("gpu-2", "eager"), ("old-3", "")):
        store.on_server_alive(replica, True, ns)
        store.on_status(ServerStatus(replica=replica, model=ModelInfo(repo_or_path="org/act"), engine=engine), ns)
    texts = {r: server_summary_text(store.server_detail(r)).plain for r in ("gpu-1", "gpu-2", "old-3")}
    assert "engine compiled (a compiled graph per batch bucket)" in texts["gpu-1"]
    assert "engine eager (lerobot's eager pass)" in texts["gpu-2"]
    assert "engine" not in texts["old-3"]
