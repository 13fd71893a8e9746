"""The control plane (server/control.py) from fake queries: each queryable validates, answers on the robot's own
key, counts what it refuses, and never lets a bad body escape as an exception."""

from __future__ import annotations

from typing import Any

import zenoh

from lerobot_policy_remote.server.control import ControlPlane
from lerobot_policy_remote.server.cordon import Cordon
from lerobot_policy_remote.server.metrics import ServerMetrics
from lerobot_policy_remote.server.sessions import Registry, Session
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.errors import Reason
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import DrainAck, DrainRequest, ResetAck, ResetRequest, SessionAck, SessionOpen

KEYS = ServiceKeys.for_service("m", "main", "svc")


class Query:
    """What a zenoh query offers a queryable: its key, payload and parameters, and the replies it got."""

    def __init__(self, key: str, body: bytes | None, parameters: str = "") -> None:
        self.key_expr, self.parameters = key, parameters
        self.payload = None if body is None else zenoh.ZBytes(body)
        self.replies: list[tuple[str, bytes]] = []

    def __enter__(self) -> Query:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def reply(self, key: str, payload: bytes) -> None:
        self.replies.append((key, payload))


class Seats:
    def __init__(self) -> None:
        self.opened: list[SessionOpen] = []

    def open(self, req: SessionOpen) -> SessionAck:
        self.opened.append(req)
        return SessionAck(True, Refusal.OK, "", "sid-" + req.client_uuid, replica="rep")


def _plane(**kw: Any) -> tuple[ControlPlane, dict[str, Any]]:
    parts: dict[str, Any] = dict(
        keys=KEYS,
        replica="rep",
        metrics=ServerMetrics("rep"),
        registry=Registry(),
        seats=Seats(),
        cordon=Cordon("rep", progress=lambda s: None),
        status=lambda full: None,
        drain=lambda why: DrainAck(True, why),
        wake=lambda: woke.append(1),
    )
    woke: list[int] = []
    parts.update(kw)
    return ControlPlane(**parts), {**parts, "woke": woke}


def test_a_session_open_is_admitted_only_for_the_robot_its_key_names() -> None:
    plane, p = _plane()
    ok = Query(KEYS.session("rep", "arm-1"), encode(SessionOpen(client_uuid="arm-1", action_names=["a"])))
    plane.on_session(ok)
    [(key, body)] = ok.replies
    assert key == KEYS.session("rep", "arm-1") and decode(SessionAck, body).ok
    forged = Query(KEYS.session("rep", "arm-1"), encode(SessionOpen(client_uuid="arm-2", action_names=["a"])))
    plane.on_session(forged)
    ack = decode(SessionAck, forged.replies[0][1])
    assert (
        not ack.ok and ack.code == Refusal.IDENTITY_MISMATCH and [r.client_uuid for r in p["seats"].opened] == ["arm-1"]
    )
    assert p["metrics"].value("errors_total", reason=Reason.IDENTITY_MISMATCH.value) == 1.0
    garbage = Query(KEYS.session("rep", "arm-1"), b"\xc1 not msgpack")
    plane.on_session(garbage)
    assert decode(SessionAck, garbage.replies[0][1]).code == Refusal.BAD_REQUEST


def test_a_reset_applies_to_the_robots_own_session_and_wakes_the_worker() -> None:
    plane, p = _plane()
    mine = Session("sid-1", "arm-1", None, None, 1)
    p["registry"].add(mine)
    other = Query(KEYS.reset("rep", "arm-2"), encode(ResetRequest("sid-1", 4)))
    plane.on_reset(other)  # arm-2 names arm-1's session: as if unknown
    assert not decode(ResetAck, other.replies[0][1]).ok and mine.pending_reset is None and not p["woke"]
    own = Query(KEYS.reset("rep", "arm-1"), encode(ResetRequest("sid-1", 4)))
    plane.on_reset(own)
    assert decode(ResetAck, own.replies[0][1]).ok and mine.pending_reset == 4 and p["woke"] == [1]


def test_a_drain_query_without_a_body_drains_and_a_malformed_one_is_refused() -> None:
    plane, _ = _plane()
    empty = Query(KEYS.server("rep", "drain"), None)
    plane.on_drain(empty)
    assert decode(DrainAck, empty.replies[0][1]).ok
    named = Query(KEYS.server("rep", "drain"), encode(DrainRequest("upgrade", "ops")))
    plane.on_drain(named)
    assert decode(DrainAck, named.replies[0][1]).message == "upgrade (by ops)"
    bad = Query(KEYS.server("rep", "drain"), b"\x01")
    plane.on_drain(bad)
    assert not decode(DrainAck, bad.replies[0][1]).ok
