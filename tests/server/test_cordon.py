"""Cordon (`server/cordon.py`): a cordoned replica admits no new sessions (`cordoned`, so robots try the next replica),
its robots keep their sessions (and may re-open them), and uncordon lets new robots in again. The flag's rules alone,
then a real `PolicyServer` (stub backend) through the shared router, cordoned by the `cordon` query."""

from __future__ import annotations

import numpy as np

from lerobot_policy_remote.server.capabilities import OpenVerdict
from lerobot_policy_remote.server.cordon import Cordon
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.messages import CordonAck, CordonRequest

OK = OpenVerdict(True)
FULL = OpenVerdict(False, Refusal.SERVER_FULL, "server full: 2/2 sessions active")
CONTRACT = OpenVerdict(False, Refusal.ACTION_MISMATCH, "the policy outputs 6 actions, the robot has 3")


def test_a_cordon_refuses_new_robots_only():
    said: list[str] = []
    c = Cordon("gpu-0", said.append)
    assert c.admit(OK, same_client=False) is OK  # not cordoned: nothing changes
    assert c.set(True, "maintenance (by alice)") and not c.set(True)
    assert said == ["Cordoned (maintenance (by alice)): no new sessions; current sessions keep streaming"]
    refused = c.admit(OK, same_client=False)
    assert (refused.ok, refused.code) == (False, Refusal.CORDONED) and "gpu-0 is cordoned" in refused.message
    assert c.admit(OK, same_client=True) is OK  # a robot that holds a session here re-opens it (a flapping link)
    assert c.admit(FULL, same_client=False).code == Refusal.CORDONED  # no seat frees up for a new robot either
    assert c.admit(CONTRACT, same_client=False) is CONTRACT  # a contract refusal is what the robot must hear
    c.set(False)
    assert c.admit(OK, same_client=False) is OK and said[-1] == "Uncordoned (requested): admitting new sessions again"


def test_the_cordon_query_answers_with_the_state_and_the_sessions_that_stay():
    c = Cordon("gpu-0", lambda _: None)
    ack = c.answer(encode(CordonRequest(True, "maintenance", "alice")), ["s-1", "s-2"])
    assert (ack.ok, ack.cordoned, ack.sessions) == (True, True, ["s-1", "s-2"])
    assert ack.message == "cordoned; new robots go to other replicas, its sessions keep streaming"
    assert c.answer(encode(CordonRequest(True)), []).message.startswith("already cordoned")
    assert c.answer(encode(CordonRequest(False)), []).message == "uncordoned; it admits new sessions again"
    bad = c.answer(b"\xc1", [])
    assert not bad.ok and bad.message.startswith("malformed cordon request")


def _cordon(z, server, on: bool) -> CordonAck:
    [reply] = list(
        z.get(
            server.keys.server(server.replica, "cordon"),
            payload=encode(CordonRequest(on, "test", "pytest")),
            timeout=5.0,
        )
    )
    return decode(CordonAck, reply.ok.payload.to_bytes())


def test_a_cordoned_server_keeps_serving_its_robots_and_refuses_new_ones(server_factory, robots, zenoh_client):
    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=4))
    old, new = robots(server, 2)
    assert old.open(server.replica).ok
    first = old.request(np.zeros(6), timeout=10)
    z = zenoh_client()
    ack = _cordon(z, server, True)
    assert ack.ok and ack.cordoned and ack.sessions == [first.session_id]
    [status] = [s for s in new.statuses() if s.replica == server.replica]
    assert status.cordoned and not status.draining
    assert server.metrics.value("cordoned") == 1.0
    refused = new.open(server.replica)
    assert (refused.ok, refused.code) == (False, Refusal.CORDONED)
    assert old.request(np.zeros(6), timeout=10).session_id == first.session_id  # its robot keeps streaming
    assert old.open(server.replica).ok  # ... and may open its session again
    assert server.healthy() == (True, "ok")  # cordoned is not unhealthy: it serves
    assert not _cordon(z, server, False).cordoned
    assert new.open(server.replica).ok
    [status] = [s for s in new.statuses() if s.replica == server.replica]
    assert not status.cordoned and status.active_sessions == 2


def test_robots_try_a_cordoned_replica_last_and_doctor_counts_no_free_session_there():
    from lerobot_policy_remote.discovery import group
    from lerobot_policy_remote.engine.handshake import free_seats, rank
    from lerobot_policy_remote.wire.keys import Namespace
    from lerobot_policy_remote.wire.messages import ServerStatus

    roomy = ServerStatus(replica="b", max_sessions=4, active_sessions=3, warmed_up=True)
    cordoned = ServerStatus(replica="a", max_sessions=8, active_sessions=1, cordoned=True)
    assert free_seats(cordoned) == 0
    assert [s.replica for s in rank([cordoned, roomy])] == ["b", "a"]
    [svc] = group([(cordoned, Namespace("m", "main", "t")), (roomy, Namespace("m", "main", "t"))])
    assert [(r.replica, r.health, r.free_sessions) for r in svc.replicas] == [("a", "cordoned", 0), ("b", "ok", 1)]
