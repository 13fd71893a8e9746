"""The replica's own request rate (`server/rate.py`), which every status reply carries as `requests_per_s`."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.server.metrics import ServerMetrics
from lerobot_policy_remote.server.rate import RequestRate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_rate_over_the_last_ten_seconds_sampled_once_a_second():
    clock, total = Clock(), [0.0]
    rate = RequestRate(lambda: total[0], clock=clock)
    assert rate.update() and rate.value == 0.0
    for _ in range(30):  # 2 requests a second for 30 s
        clock.t += 0.5
        total[0] += 1
        rate.update()
    assert rate.value == pytest.approx(2.0)
    assert not rate.update(clock.t + 0.5)  # at most one sample a second
    for _ in range(20):  # then 5 a second: after 10 s the window holds only those
        clock.t += 1.0
        total[0] += 5
        rate.update()
    assert rate.value == pytest.approx(5.0)
    young = RequestRate(lambda: total[0], clock=clock)  # a replica up for 3 s: its rate over those 3 s
    young.update()
    for _ in range(3):
        clock.t += 1.0
        total[0] += 4
        young.update()
    assert young.value == pytest.approx(4.0)


def test_requests_served_never_goes_down_when_a_session_closes():
    """`requests_total` drops a client's label set when its session closes; the rate's total keeps its requests."""
    m = ServerMetrics("gpu-0")
    for client, n in (("arm-1", 3), ("arm-2", 4)):
        for _ in range(n):
            m.count_request(client)
    assert m.requests_served() == 7
    m.forget_client("arm-1")
    assert m.value("requests_total", client="arm-1") == 0.0 and m.requests_served() == 7
    m.count_request("arm-2")
    assert m.requests_served() == 8 and m.value("requests_total", client="arm-2") == 5.0
