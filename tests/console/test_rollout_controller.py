"""The router's rollout controller on a real Zenoh router: its state survives a restart, commands are answered in one
line, a corrupt state file is set aside (never a crash)."""

from __future__ import annotations

import pytest
from lerobot_fleet.data.ops import send_rollout
from lerobot_fleet.rollout import state_file
from lerobot_fleet.rollout.controller import RolloutController

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.wire.rollout import ModelRef, RolloutCommand, RolloutReply, RolloutRobot, RolloutStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session


@pytest.fixture
def sessions(router):
    host = open_session(ZenohSettings(mode="client", connect_endpoints=[router.endpoint]))
    client = open_session(ZenohSettings(mode="client", connect_endpoints=[router.endpoint]))
    yield host, client
    client.close()
    host.close()


def canary(rollout_id: str) -> RolloutStatus:
    return RolloutStatus(
        rollout_id=rollout_id,
        phase="canary",
        service="pick",
        from_model=ModelRef("org/pick", "v1", "fpA"),
        to_model=ModelRef("org/pick", "v2", "fpB"),
        canary=0.5,
        robots=[RolloutRobot("arm-0", "moved"), RolloutRobot("arm-1", "waiting")],
        steps=1,
        message="canary: 1 robot(s) on org/pick@v2",
    )


def test_a_rollout_survives_the_controllers_restart_and_refuses_a_second_start(sessions, tmp_path):
    host, client = sessions
    path = tmp_path / "rollout.json"
    state_file.save(path, canary("ro-1"))
    said: list[str] = []
    first = RolloutController(host, path, say=said.append).start()
    try:
        st = first_status(client).status
        assert (st.rollout_id, st.phase, st.steps) == ("ro-1", "canary", 1)
        assert any("resumed from" in line for line in said)
        again = send_rollout(client, RolloutCommand("start", to="v2", requested_by="bob@box"), 5.0)
        assert not again.ok and again.message.startswith("rollout ro-1 is canary: promote or abort it")
        promoted = send_rollout(client, RolloutCommand("promote", requested_by="bob@box"), 5.0)
        assert promoted.ok and promoted.status.phase == "promoting" and "(by bob@box)" in promoted.message
    finally:
        first.stop()
    assert state_file.load(path)[0].phase == "promoting"  # written as it changed
    second = RolloutController(host, path, say=said.append).start()
    try:
        st = first_status(client).status
        assert (st.rollout_id, st.phase, st.steps) == ("ro-1", "promoting", 1)  # no step lost, none doubled
        assert any("bob@box" in e for e in st.events)
    finally:
        second.stop()


def first_status(client) -> RolloutReply:
    """The status reply of a controller that has just started: its queryable reaches the client through the router
    within a moment, longer on a loaded box, so ask until one answers."""
    return wait_until(
        lambda: (r := send_rollout(client, RolloutCommand("status"), 3.0)).ok and r,
        timeout=20,
        message="the new controller's status reply",
    )


def test_a_corrupt_state_file_is_set_aside_and_said_in_one_line(sessions, tmp_path):
    host, client = sessions
    path = tmp_path / "rollout.json"
    path.write_text("{not json")
    said: list[str] = []
    controller = RolloutController(host, path, say=said.append).start()
    try:
        reply = first_status(client)
        assert reply.ok and reply.status.rollout_id == ""
        assert len(said) == 1 and "is not readable" in said[0] and "\n" not in said[0]
        assert (tmp_path / "rollout.json.unreadable").exists()
        nothing = send_rollout(client, RolloutCommand("promote"), 5.0)
        assert not nothing.ok and "no rollout has been started" in nothing.message
        bad = send_rollout(client, RolloutCommand("start", to="v9", canary=0.2), 5.0)
        assert not bad.ok and "no replica serves" in bad.message
    finally:
        controller.stop()
