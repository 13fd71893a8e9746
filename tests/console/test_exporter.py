"""`lerobot-fleet exporter`: robot telemetry as Prometheus metrics (pure collector; the real CLI through a router)."""

from __future__ import annotations

import re
import urllib.request

import pytest
from lerobot_fleet.verbs.exporter import ExporterMetrics, RobotTelemetryCollector, parse_listen

from lerobot_policy_remote.testing import Proc, free_port, wait_until
from lerobot_policy_remote.testing.procs import tool
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import RobotTelemetry

KEYS = ServiceKeys.for_service("org/act", "main", "pick up")


def tel(**kw) -> RobotTelemetry:
    base = dict(
        client_uuid="robot-217",
        state="DEGRADED",
        staleness_s=0.42,
        queue_s=0.3,
        rtt_p50_ms=120.0,
        rtt_p95_ms=300.0,
        network_ms_p50=35.0,
        queue_wait_ms_p50=5.0,
        inference_ms_p50=80.0,
        requests=40,
        errors=2,
        fallback_count=3,
        action_order="unchecked",
        episode_id=4,
    )
    return RobotTelemetry(**{**base, **kw})


def sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_collector_exposes_each_robot_with_the_server_conventions():
    now = [100.0]
    c = RobotTelemetryCollector(clock=lambda: now[0], forget_s=60)
    c.add(KEYS.robot("robot-217", "telemetry"), encode(tel()))
    now[0] = 102.5
    text = ExporterMetrics(c).render().decode()
    labels = dict(client="robot-217", model="org/act", revision="main", service="pick up")
    assert sample(text, "lerobot_robot_staleness_seconds", **labels) == pytest.approx(0.42)
    assert sample(text, "lerobot_robot_telemetry_age_seconds", **labels) == pytest.approx(2.5)
    assert sample(text, "lerobot_robot_network_seconds", **labels) == pytest.approx(0.035)
    assert sample(text, "lerobot_robot_rtt_seconds", quantile="0.95", **labels) == pytest.approx(0.3)
    assert sample(text, "lerobot_robot_state", state="DEGRADED", **labels) == 1.0
    assert sample(text, "lerobot_robot_state", state="STREAMING", **labels) == 0.0
    assert sample(text, "lerobot_robot_action_order_checked", **labels) == 0.0
    assert sample(text, "lerobot_robot_errors_total", **labels) == 2.0
    assert re.search(r"^lerobot_exporter_robots 1\.0$", text, re.M)


def test_bad_telemetry_is_counted_never_raised_and_silent_robots_are_forgotten():
    now = [0.0]
    c = RobotTelemetryCollector(clock=lambda: now[0], forget_s=10)
    c.add(KEYS.robot("robot-1", "telemetry"), b"\x92not telemetry")
    c.add("@lerobot/not/a/key", encode(tel()))
    c.add(KEYS.robot("robot-2", "telemetry"), encode(tel(client_uuid="robot-2")))
    text = ExporterMetrics(c).render().decode()
    assert re.search(r"^lerobot_exporter_decode_errors_total 2\.0$", text, re.M)
    assert sample(text, "lerobot_robot_staleness_seconds", client="robot-2") is not None
    now[0] = 11.0
    text = ExporterMetrics(c).render().decode()
    assert sample(text, "lerobot_robot_staleness_seconds", client="robot-2") is None
    assert re.search(r"^lerobot_exporter_robots 0\.0$", text, re.M)


def test_listen_parsing_says_the_form():
    assert parse_listen("0.0.0.0:9200") == ("0.0.0.0", 9200)
    assert parse_listen(":9200") == ("0.0.0.0", 9200)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen("9200x")


@pytest.mark.slow
def test_exporter_cli_serves_robot_telemetry_from_the_router(router, zenoh_client):
    from lerobot_policy_remote.testing.fake_robot import FakeRobot

    port = free_port()
    proc = Proc(
        [tool("lerobot-fleet"), "exporter", "--router", router.endpoint, "--listen", f"127.0.0.1:{port}"],
        name="exporter",
        max_seconds=120,
    )
    try:
        up = proc.wait_for("Robot telemetry exporter up", timeout=60)
        assert f"metrics=http://127.0.0.1:{port}/metrics" in up
        robot = FakeRobot(zenoh_client(), KEYS, "robot-217")

        def scraped() -> str | None:
            robot.publish_telemetry(tel())
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            return text if sample(text, "lerobot_robot_network_seconds", client="robot-217") is not None else None

        text = wait_until(scraped, timeout=30, message="robot-217's telemetry on the exporter's /metrics")
        assert sample(text, "lerobot_robot_staleness_seconds", client="robot-217", service="pick up") == pytest.approx(
            0.42
        )
    finally:
        proc.stop()


def test_doctor_says_whether_the_action_order_was_checked():
    """Doctor's dry-run ack gets an `action order` line: PASS when names were compared, WARN (with the fix) when not."""
    from lerobot_fleet.verbs.doctor_checks import action_order_check
    from lerobot_fleet.verbs.doctor_report import PASS, WARN, render

    from lerobot_policy_remote.wire.messages import SessionAck

    checked = action_order_check(SessionAck(True, action_names=["a.pos", "b.pos"], action_names_checked=True))
    assert checked.status == PASS and "2 actions" in checked.detail
    unchecked = action_order_check(SessionAck(True, action_names=[], action_names_checked=False))
    assert unchecked.status == WARN and "action_feature_names" in unchecked.fix
    text = render([unchecked])
    assert text.startswith("WARN  action order") and "Everything a rollout needs is in place." in text
