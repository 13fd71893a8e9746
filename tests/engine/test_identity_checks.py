"""The robot believes a status or an ack only when the key it came on vouches for it.

Unit tests of isolated logic (the zenoh replies are stand-ins); the attacks through a real router are in
tests/prod/test_acl_fleet.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import zenoh

from lerobot_policy_remote.discovery import key_vouches_for
from lerobot_policy_remote.engine.handshake import ask_session
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import ServerStatus, SessionAck, SessionOpen

K = ServiceKeys.for_service("lab/act", "main", "pick")


def test_a_status_is_believed_only_on_its_own_replicas_key():
    honest = ServerStatus(replica="rep-1", service=K.service)
    assert key_vouches_for(honest, K.server("rep-1", "status"))
    assert not key_vouches_for(honest, K.server("rogue", "status"))  # rogue answering in rep-1's name
    assert not key_vouches_for(ServerStatus(replica="rep-1", service="other"), K.server("rep-1", "status"))
    assert not key_vouches_for(honest, K.robot("rep-1", "telemetry"))
    assert not key_vouches_for(honest, "not/a/lerobot/key")


class _Session:
    def __init__(self, ack: SessionAck) -> None:
        self.ack, self.asked = ack, []

    def get(self, key, payload, timeout):
        self.asked.append(key)
        reply = SimpleNamespace(ok=SimpleNamespace(payload=zenoh.ZBytes(encode(self.ack)), key_expr=key))
        return [reply]


def test_the_ack_must_come_from_the_replica_asked_on_the_robots_own_key():
    req = SessionOpen(client_uuid="arm-a", action_names=["j0"])
    s = _Session(SessionAck(True, session_id="s" * 32, replica="rogue"))
    out = ask_session(s, K, "rep-1", req, 1.0)
    assert isinstance(out, str) and "names replica rogue" in out
    assert s.asked == [K.session("rep-1", "arm-a")]
    good = _Session(SessionAck(True, session_id="s" * 32, replica="rep-1"))
    assert isinstance(ask_session(good, K, "rep-1", req, 1.0), SessionAck)
