"""The store's fast row builder makes exactly the row the dataclass constructor makes."""

import pytest
from lerobot_fleet.model import RobotRow, RobotState, make_robot_row


def test_fast_row_equals_constructor_row():
    kw = dict(robot_id="arm-1", state=RobotState.parse("STREAMING"), reported_state="STREAMING", replica="gpu-0", staleness_s=0.4,
              rtt_p50_ms=12.0, requests=7, recent_staleness=(0.1, 0.4), row_key="k")
    fast, slow = make_robot_row(**kw), RobotRow(**kw)
    assert fast == slow and hash(fast) == hash(slow)
    assert fast.key == "k" and fast.superseded_pct == 0.0 and fast.ns == slow.ns
    with pytest.raises(AttributeError):  # still frozen
        fast.replica = "other"  # type: ignore[misc]


def test_fast_row_refuses_unknown_and_missing_fields():
    with pytest.raises(TypeError):
        make_robot_row(robot_id="a", state=RobotState.parse("STREAMING"), reported_state="", nope=1)
    with pytest.raises(TypeError):
        make_robot_row(robot_id="a", reported_state="")
