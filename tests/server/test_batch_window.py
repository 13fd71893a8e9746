"""The batching worker's wait window (server/batch_window.py), on an injected clock."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.server.batch_window import BatchWindow


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_active_counts_only_recent_senders() -> None:
    clock = Clock()
    win = BatchWindow(clock=clock, recent_s=1.0)
    arrivals = [99.95, 99.5, 98.0, float("-inf")]  # two recent, one idle for 2 s, one never sent
    assert win.active(arrivals) == 2
    clock.t = 100.6
    assert win.active(arrivals) == 1


def test_lone_robot_never_waits() -> None:
    win = BatchWindow(clock=Clock())
    target = win.target(limit=8, active=1, sessions=5)  # four more sessions are connected but idle
    assert target == 1
    assert win.wait_s(ready=1, target=target, pass_s=0.040) == 0.0


def test_half_batch_waits_a_fraction_of_the_pass_for_the_other_half() -> None:
    win = BatchWindow(clock=Clock(), fraction=0.5)
    target = win.target(limit=8, active=8, sessions=8)
    assert target == 8
    assert win.wait_s(ready=4, target=target, pass_s=0.040) == pytest.approx(0.020)
    assert win.wait_s(ready=8, target=target, pass_s=0.040) == 0.0  # full: go at once
    assert win.wait_s(ready=0, target=target, pass_s=0.040) == 0.0  # nothing to batch
    assert win.wait_s(ready=4, target=target, pass_s=0.0) == 0.0  # no pass measured yet: opportunistic


def test_never_waits_for_more_than_the_batch_holds() -> None:
    win = BatchWindow(clock=Clock())
    assert win.target(limit=8, active=16, sessions=16) == 8
    assert win.wait_s(ready=8, target=8, pass_s=0.05) == 0.0


def test_zero_is_opportunistic_and_a_fixed_window_waits_for_every_session() -> None:
    assert BatchWindow(0.0).wait_s(ready=1, target=4, pass_s=0.05) == 0.0
    fixed = BatchWindow(0.25, clock=Clock())
    target = fixed.target(limit=8, active=1, sessions=3)
    assert target == 3
    assert fixed.wait_s(ready=1, target=target, pass_s=0.05) == 0.25
