"""Rows derived with the figures kept between ticks equal rows built from scratch, and their ages keep moving."""

import pytest
from lerobot_fleet.derive import Derivation, robot_row, server_row
from lerobot_fleet.model import RobotState
from lerobot_fleet.sources.fake import ManualClock
from lerobot_fleet.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import ModelInfo, RobotTelemetry, ServerStatus

NS = Namespace("org/m", "main", "task")


def _fresh(store: FleetStore) -> list:
    cap = store.capture()
    servers = [server_row(s, cap.link, cap.now, cap.rtts) for s in cap.servers]
    return [robot_row(rec, cap.link, cap.now, servers) for rec in cap.robots]


def _status(active: int, cap: int = 2) -> ServerStatus:
    return ServerStatus(replica="gpu-0", model=ModelInfo(repo_or_path=NS[0], revision=NS[1]), service=NS[2], max_sessions=cap,
                        active_sessions=active, warmed_up=True)


def test_kept_figures_equal_a_fresh_build_while_only_some_robots_change():
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    store.on_status(_status(1), NS)
    for i in range(6):
        store.on_robot_alive(f"arm-{i}", True, NS)
        store.on_telemetry(RobotTelemetry(client_uuid=f"arm-{i}", state="STREAMING", replica="gpu-0", seq=0, staleness_s=0.1), NS)
    derive = Derivation()
    first = derive.snapshot(store.capture())
    for n in range(1, 5):
        clock.advance(0.7)
        store.on_telemetry(RobotTelemetry(client_uuid="arm-0", state="DEGRADED", replica="gpu-0", seq=n, staleness_s=0.2 * n), NS)
        snap = derive.snapshot(store.capture())
        assert list(snap.robots) == _fresh(store)
    quiet = next(r for r in snap.robots if r.robot_id == "arm-5")
    assert quiet.seen_age_s == pytest.approx(first.robots[5].seen_age_s + 4 * 0.7)  # unchanged figures, ages still tick
    assert next(r for r in snap.robots if r.robot_id == "arm-0").recent_staleness == pytest.approx((0.1, 0.2, 0.4, 0.6, 0.8))


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


def test_rows_of_two_snapshots_are_distinct_objects():
    store = FleetStore(clock=ManualClock())
    store.on_telemetry(RobotTelemetry(client_uuid="arm-1", state="STREAMING"), NS)
    a, b = store.snapshot(), store.snapshot()
    assert a.robots[0] == b.robots[0] and a.robots[0] is not b.robots[0]
