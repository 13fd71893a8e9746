"""A robot's discovery asks for the brief status (no session list): its reply does not grow with the replica's
sessions, while the console's full status still lists them; the ring index stays right across closes."""

import numpy as np

from lerobot_policy_remote.engine.handshake import discover
from lerobot_policy_remote.server.sessions import Mail, Registry, Session
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES


def test_discovery_gets_the_brief_status_the_console_the_full_one(server_factory, robots):
    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=8))
    fleet = robots(server, 3)
    for r in fleet:
        assert r.open(server.replica).ok
    assert fleet[0].request(np.zeros(6), timeout=10).session_id
    [brief] = discover(fleet[0].z, server.keys)
    assert brief.sessions == [] and brief.active_sessions == 3 and brief.max_sessions == 8
    [full] = fleet[0].statuses()  # the plain status query, as the console sends it
    assert sorted(s.client_uuid for s in full.sessions) == sorted(r.uuid for r in fleet)


def _session(cid: str) -> Session:
    return Session(session_id=cid, client_uuid=cid, state=None, rtc=None, schema_version=1)


def test_ring_positions_follow_closes():
    reg = Registry()
    for c in "abcde":
        reg.add(_session(c))
    reg.remove("b")
    reg.served(reg.get("d"))
    for c in "acde":
        reg.get(c).mailbox.deposit(Mail(b"", None, 0.0))
    assert [s.client_uuid for s in reg.ready_in_ring_order()] == ["e", "a", "c", "d"]
    reg.remove("a")
    reg.served(reg.get("e"))
    assert [s.client_uuid for s in reg.ready_in_ring_order()] == ["c", "d", "e"]
