"""Rows derived with the figures kept between ticks equal rows built from scratch, and their ages keep moving."""

from dataclasses import asdict

import pytest
from lerobot_fleet.data.derive import Derivation, robot_row
from lerobot_fleet.data.derive_servers import server_row
from lerobot_fleet.data.model import RobotState, robot_key
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import ModelInfo, RobotTelemetry, ServerStatus

NS = Namespace("org/m", "main", "task")


def _fresh(store: FleetStore) -> list:
    cap = store.capture()
    servers = [server_row(s, cap.link, cap.now, cap.rtts) for s in cap.servers]
    return [robot_row(rec, cap.link, cap.now, servers) for rec in cap.robots]


def _status(active: int, cap: int = 2) -> ServerStatus:
    return ServerStatus(
        replica="gpu-0",
        model=ModelInfo(repo_or_path=NS[0], revision=NS[1]),
        service=NS[2],
        max_sessions=cap,
        active_sessions=active,
        warmed_up=True,
    )


def test_kept_figures_equal_a_fresh_build_while_only_some_robots_change():
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    store.on_status(_status(1), NS)
    for i in range(6):
        store.on_robot_alive(f"arm-{i}", True, NS)
        store.on_telemetry(
            RobotTelemetry(client_uuid=f"arm-{i}", state="STREAMING", replica="gpu-0", seq=0, staleness_s=0.1), NS
        )
    derive = Derivation()
    first = derive.snapshot(store.capture())
    for n in range(1, 5):
        clock.advance(0.7)
        store.on_telemetry(
            RobotTelemetry(client_uuid="arm-0", state="DEGRADED", replica="gpu-0", seq=n, staleness_s=0.2 * n), NS
        )
        snap = derive.snapshot(store.capture())
        assert list(snap.robots) == _fresh(store)
    quiet = next(r for r in snap.robots if r.robot_id == "arm-5")
    assert quiet.seen_age_s == pytest.approx(first.robots[5].seen_age_s + 4 * 0.7)  # unchanged figures, ages still tick
    assert next(r for r in snap.robots if r.robot_id == "arm-0").recent_staleness == pytest.approx(
        (0.1, 0.2, 0.4, 0.6, 0.8)
    )


def test_a_waiting_robot_follows_the_servers_without_a_new_sample():
    store = FleetStore(clock=ManualClock())
    store.set_connection("connected")
    store.on_status(_status(2), NS)
    store.on_telemetry(RobotTelemetry(client_uuid="arm-9", state="RECONNECTING"), NS)
    derive = Derivation()
    assert derive.snapshot(store.capture()).robots[0].waiting.startswith("waiting: no replica with room")
    store.on_status(_status(1), NS)  # a seat frees up; the robot has sent nothing since
    row = derive.snapshot(store.capture()).robots[0]
    assert row.waiting == "" and row.state is RobotState.RECONNECTING


def test_every_field_of_a_row_comes_from_its_telemetry_by_name():
    store = FleetStore(clock=ManualClock())
    store.set_connection("connected")
    tel = RobotTelemetry(
        client_uuid="arm-1",
        state="DEGRADED",
        model_id="org/m",
        service="task",
        session_id="s-1",
        replica="gpu-0",
        episode_id=4,
        staleness_s=0.3,
        queue_s=0.7,
        rtt_p50_ms=31.0,
        rtt_p95_ms=62.0,
        delay_steps=2,
        requests=90,
        superseded=3,
        errors=1,
        fallback_count=2,
        last_outcome="timeout",
        fps=29.0,
        network_ms_p50=11.0,
        queue_wait_ms_p50=4.0,
        inference_ms_p50=16.0,
        action_order="unchecked",
        max_action_age_s=1.5,
        rtc="on",
    )
    store.on_robot_alive("arm-1", True, NS)
    store.on_telemetry(tel, NS)
    row = asdict(store.snapshot().robots[0])
    same = (
        "session_id",
        "replica",
        "episode_id",
        "staleness_s",
        "queue_s",
        "rtt_p50_ms",
        "rtt_p95_ms",
        "delay_steps",
        "requests",
        "superseded",
        "errors",
        "fallback_count",
        "last_outcome",
        "fps",
        "action_order",
        "max_action_age_s",
        "rtc",
    )
    assert {k: row[k] for k in same} == {k: getattr(tel, k) for k in same}
    assert (row["robot_id"], row["state"], row["reported_state"], row["model_id"], row["revision"], row["service"]) == (
        "arm-1",
        RobotState.DEGRADED,
        "DEGRADED",
        "org/m",
        "main",
        "task",
    )
    assert (row["network_ms"], row["queue_wait_ms"], row["inference_ms"], row["alive"], row["recent_staleness"]) == (
        11.0,
        4.0,
        16.0,
        True,
        (0.3,),
    )
    assert (
        row["ns"] == NS
        and row["row_key"] == robot_key(NS, "arm-1")
        and row["seen_age_s"] == 0.0
        and row["waiting"] == ""
    )


def test_rows_of_two_snapshots_are_distinct_objects():
    store = FleetStore(clock=ManualClock())
    store.on_telemetry(RobotTelemetry(client_uuid="arm-1", state="STREAMING"), NS)
    a, b = store.snapshot(), store.snapshot()
    assert a.robots[0] == b.robots[0] and a.robots[0] is not b.robots[0]
