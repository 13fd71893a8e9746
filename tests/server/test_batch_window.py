"""The batching worker's wait window (server/batch_window.py), on an injected clock."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.server.batch_window import BatchWindow


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_due_counts_robots_whose_next_observation_comes_within_the_window() -> None:
    clock = Clock()
    win = BatchWindow(clock=clock)
    arrivals = [
        (99.93, 0.08),  # closed loop, just served: next at 100.01, within 0.02
        (99.50, 0.52),  # next at 100.02, on the edge
        (99.80, 1.30),  # a real robot refilling its buffer every 1.3 s: next at 101.1, not waited for
        (98.00, 0.10),  # overdue by 1.9 s, far more than its interval: idle or gone
        (float("-inf"), None),  # never sent
        (99.99, None),  # sent once: no interval yet
    ]
    assert win.due(arrivals, within_s=0.02) == 2
    assert win.due(arrivals, within_s=0.0) == 0
    clock.t = 100.05  # both are now a little late (by less than their interval): still expected
    assert win.due(arrivals, within_s=0.0) == 2
    clock.t = 100.5  # the 0.08 s one is late by 0.49 s, several intervals: gone; the 0.52 s one by 0.48 s
    assert win.due(arrivals, within_s=0.0) == 1
    clock.t = 100.6  # now the 0.52 s one is late by more than its interval too
    assert win.due(arrivals, within_s=0.0) == 0


def test_lone_robot_never_waits() -> None:
    win = BatchWindow(clock=Clock())
    target = win.target(limit=8, ready=1, due=0, sessions=5)  # four more sessions are connected but not due
    assert target == 1
    assert win.wait_s(ready=1, target=target, pass_s=0.040) == 0.0


def test_robot_asking_every_second_is_not_waited_for() -> None:
    """An unsaturated fleet (each robot asks when its buffer runs low) pays nothing for batching by default."""
    clock = Clock()
    win = BatchWindow(clock=clock)
    others = [(99.2 + 0.1 * k, 1.0) for k in range(7)]  # seven robots asking once a second, none due within 20 ms
    target = win.target(limit=8, ready=1, due=win.due(others, win.horizon_s(0.040)), sessions=8)
    assert win.wait_s(ready=1, target=target, pass_s=0.040) == 0.0


def test_half_batch_waits_a_fraction_of_the_pass_for_the_other_half() -> None:
    win = BatchWindow(clock=Clock(), fraction=0.5)
    target = win.target(limit=8, ready=4, due=4, sessions=8)
    assert target == 8
    assert win.wait_s(ready=4, target=target, pass_s=0.040) == pytest.approx(0.020)
    assert win.wait_s(ready=8, target=target, pass_s=0.040) == 0.0  # full: go at once
    assert win.wait_s(ready=0, target=target, pass_s=0.040) == 0.0  # nothing to batch
    assert win.wait_s(ready=4, target=target, pass_s=0.0) == 0.0  # no pass measured yet: opportunistic


def test_never_waits_for_more_than_the_batch_holds() -> None:
    win = BatchWindow(clock=Clock())
    assert win.target(limit=8, ready=8, due=8, sessions=16) == 8
    assert win.wait_s(ready=8, target=8, pass_s=0.05) == 0.0


def test_zero_is_opportunistic_and_a_fixed_window_waits_for_every_session() -> None:
    assert BatchWindow(0.0).wait_s(ready=1, target=4, pass_s=0.05) == 0.0
    fixed = BatchWindow(0.25, clock=Clock())
    target = fixed.target(limit=8, ready=1, due=0, sessions=3)
    assert target == 3
    assert fixed.wait_s(ready=1, target=target, pass_s=0.05) == 0.25
