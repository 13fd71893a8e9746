"""The robot's telemetry report: a pure function of the engine's stats and a state snapshot (no engine built)."""

from __future__ import annotations

import dataclasses

import pytest

from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.telemetry import EngineSnapshot, EngineStats, robot_telemetry
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.messages import RobotTelemetry

STATS = EngineStats(
    requests=120, superseded=3, errors=2, fallback_count=5, rtt_p50_ms=31.5, rtt_p95_ms=48.0, delay_steps=2
)
SNAP = EngineSnapshot(
    client_uuid="arm-01",
    state=LinkState.DEGRADED,
    state_age_s=1.25,
    model_id="org/act",
    service="pick",
    session_id="s-9",
    replica="gpu-0",
    episode_id=4,
    staleness_s=0.08,
    queue_s=0.9,
    last_outcome="timeout",
    fps=30.0,
    seq=17,
    max_action_age_s=3.0,
    rtc="on",
)


def test_every_field_comes_from_the_stats_or_the_snapshot():
    assert robot_telemetry(STATS, SNAP) == RobotTelemetry(
        client_uuid="arm-01",
        state="DEGRADED",
        model_id="org/act",
        service="pick",
        session_id="s-9",
        replica="gpu-0",
        episode_id=4,
        staleness_s=0.08,
        queue_s=0.9,
        rtt_p50_ms=31.5,
        rtt_p95_ms=48.0,
        delay_steps=2,
        fallback_count=5,
        requests=120,
        superseded=3,
        errors=2,
        last_outcome="timeout",
        state_age_s=1.25,
        fps=30.0,
        seq=17,
        max_action_age_s=3.0,
        rtc="on",
    )


def test_a_dead_robot_reports_why_instead_of_its_last_outcome():
    dead = dataclasses.replace(SNAP, state=LinkState.DEAD, dead_reason="offline for more than max_offline_s=5s")
    t = robot_telemetry(STATS, dead)
    assert t.state == "DEAD" and t.last_outcome == "offline for more than max_offline_s=5s"


def test_a_fresh_engine_reports_zeros_and_encodes():
    t = robot_telemetry(
        EngineStats(), EngineSnapshot(client_uuid="arm-02", state=LinkState.CONNECTING, state_age_s=0.0)
    )
    assert (t.state, t.requests, t.errors, t.rtt_p50_ms, t.last_outcome, t.rtc) == ("CONNECTING", 0, 0, 0.0, "", "")
    assert decode(RobotTelemetry, encode(t)) == t
    assert type(t.state) is str  # the wire carries the state's value, not the enum


def test_inputs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        STATS.requests = 0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        SNAP.state = LinkState.DEAD  # type: ignore[misc]
