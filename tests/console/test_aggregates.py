"""Incremental aggregates equal a full walk over the robots' latest telemetry, whatever order samples arrive in."""

import random

from lerobot_fleet.data.aggregates import ReplicaRtts
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry

NS = Namespace("org/m", "main", "task")


def _walk(latest: dict[str, tuple[str, float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for replica, rtt in latest.values():
        if replica and rtt > 0:
            out.setdefault(replica, []).append(rtt)
    return {k: sorted(v) for k, v in out.items()}


def test_replica_rtts_match_a_full_walk_through_moves_and_gaps():
    rng = random.Random(20)
    agg, latest = ReplicaRtts(), {}
    for _ in range(5000):
        robot = f"arm-{rng.randrange(60)}"
        replica = rng.choice(["gpu-0", "gpu-1", "gpu-2", ""])  # "" : between sessions
        rtt = rng.choice([0.0, rng.uniform(5, 80)])  # 0: no chunk measured yet
        agg.update(robot, replica, rtt)
        latest[robot] = (replica, rtt)
        if rng.random() < 0.02:
            assert {k: sorted(v) for k, v in agg.lists().items()} == _walk(latest)
    assert {k: sorted(v) for k, v in agg.lists().items()} == _walk(latest)


def test_store_capacity_input_follows_a_robot_that_moved():
    store = FleetStore()
    store.on_telemetry(RobotTelemetry(client_uuid="a", state="STREAMING", replica="gpu-0", rtt_p50_ms=30.0), NS)
    store.on_telemetry(RobotTelemetry(client_uuid="b", state="STREAMING", replica="gpu-0", rtt_p50_ms=50.0), NS)
    store.on_telemetry(RobotTelemetry(client_uuid="a", state="STREAMING", replica="gpu-1", rtt_p50_ms=40.0), NS)
    assert {k: sorted(v) for k, v in store.capture().rtts.items()} == {"gpu-0": [50.0], "gpu-1": [40.0]}
    store.on_telemetry(RobotTelemetry(client_uuid="b", state="RECONNECTING", replica="", rtt_p50_ms=50.0), NS)
    assert store.capture().rtts == {"gpu-1": [40.0]}
