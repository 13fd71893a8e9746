"""The default staleness alert never trips on a healthy robot and still opens on a real
degradation. Pure: a FleetStore on a manual clock, the AlertBook the console and `status --watch` use."""

from __future__ import annotations

import itertools

from lerobot_fleet.data.alerts import AlertBook, AlertRules
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry

NS = Namespace("lerobot/act", "main", "pick the cube")
# staleness of a healthy guide robot (0.5 s buffer, 20-step chunks at 30 fps), as measured on a live robot
HEALTHY_SWING = (0.80, 0.92, 1.03, 1.15, 0.85, 0.97, 1.10, 1.12, 0.81, 1.14)


def _run(staleness, *, bound: float = 3.0, seconds: int = 60, rules: AlertRules | None = None):
    """One telemetry a second (as robots send), two console ticks a second; every alert opened."""
    clock = ManualClock()
    store = FleetStore(clock=clock)
    book = AlertBook(rules or AlertRules())
    store.on_robot_alive("arm-1", True, NS)
    opened = []
    values = itertools.cycle(staleness)
    for seq in range(seconds):
        store.on_telemetry(
            RobotTelemetry(
                client_uuid="arm-1",
                state="STREAMING",
                service=NS.service,
                staleness_s=next(values),
                requests=10 * seq + 1,
                fps=30.0,
                seq=seq,
                max_action_age_s=bound,
            ),
            NS,
        )
        for _ in range(2):
            opened += book.update(store.snapshot(), clock())[0]
            clock.advance(0.5)
    return opened, book


def test_healthy_staleness_swing_opens_no_alert_in_60_s():
    opened, book = _run(HEALTHY_SWING)
    assert opened == [] and book.listing() == []


def test_healthy_swing_of_an_older_robot_without_its_bound_opens_no_alert():
    opened, _ = _run(HEALTHY_SWING, bound=0.0)  # 0: not reported; the 2 s default applies
    assert opened == []


def test_a_single_stale_sample_does_not_open_an_alert():
    opened, _ = _run((0.9, 0.9, 0.9, 0.9, 2.6, 0.9, 0.9, 0.9, 0.9, 0.9))
    assert opened == []


def test_a_real_degradation_opens_the_alert_with_the_robots_own_threshold():
    opened, book = _run((2.4,), seconds=10)
    assert [a.rule for a in opened] == ["staleness"]
    assert "≥ 2 s" in book.listing()[0].message  # 2/3 of the robot's 3 s bound


def test_threshold_follows_the_robots_bound_and_a_fixed_flag_overrides_it():
    rules = AlertRules()
    assert rules.staleness_threshold(3.0) == 2.0 and rules.staleness_threshold(1.5) == 1.0
    assert rules.staleness_threshold(None) == 2.0
    opened, _ = _run((1.2,), bound=1.5, seconds=10)  # a tight robot: 1.2 s is past 2/3 of its 1.5 s bound
    assert [a.rule for a in opened] == ["staleness"]
    fixed = AlertRules.load(None, staleness_s=1.0)
    assert fixed.staleness_threshold(3.0) == 1.0
    assert _run((0.0,), rules=AlertRules.load(None, staleness_s=0.0), seconds=5)[0] == []  # 0 turns it off
