"""The control plane: the replica's queryables (status, session open, reset, drain, cordon).

Each runs on a zenoh callback thread: it validates and replies in pure CPU, never waits on another thread, and
never lets an exception escape. It is handed what it answers from (the status builder, the seats, the drain, the
cordon, the worker's wake-up), never the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import zenoh

from ..wire.codec import decode, encode
from ..wire.codes import Refusal
from ..wire.errors import Reason, WireError
from ..wire.keys import BRIEF_STATUS, ServiceKeys, parse_key
from ..wire.messages import (
    CordonAck,
    DrainAck,
    DrainRequest,
    ResetAck,
    ResetRequest,
    ServerStatus,
    SessionAck,
    SessionOpen,
)
from ..wire.text import printable
from .admission import Seats
from .cordon import Cordon
from .metrics import ServerMetrics
from .sessions import Registry

log = logging.getLogger("lerobot.policy_server")

MAX_CONTROL_BYTES = 256 * 1024  # a session open, reset or drain request is a few KiB; never copy more


def query_bytes(query: zenoh.Query) -> bytes | None:
    """A control query's payload, sized before it is copied (a hostile peer cannot make us copy a huge body)."""
    payload = query.payload
    if payload is None:
        return None
    if len(payload) > MAX_CONTROL_BYTES:
        raise WireError(
            "payload",
            f"{len(payload)} bytes is over the {MAX_CONTROL_BYTES}-byte limit for a control message",
            Reason.OVERSIZE,
        )
    return payload.to_bytes()


class ControlPlane:
    """The queryables' callbacks; `declare(z)` declares them on the server's zenoh session."""

    def __init__(
        self,
        *,
        keys: ServiceKeys,
        replica: str,
        metrics: ServerMetrics,
        registry: Registry,
        seats: Seats,
        cordon: Cordon,
        status: Callable[[bool], ServerStatus],
        drain: Callable[[str], DrainAck],
        wake: Callable[[], None],
    ) -> None:
        self.keys, self.replica, self.metrics, self.registry = keys, replica, metrics, registry
        self.seats, self.cordon, self.status, self.drain, self.wake = seats, cordon, status, drain, wake

    def declare(self, z: Any) -> list[Any]:
        k, r = self.keys, self.replica
        return [
            z.declare_queryable(k.server(r, "status"), self.on_status),
            z.declare_queryable(k.session(r, "*"), self.on_session),
            z.declare_queryable(k.reset(r, "*"), self.on_reset),
            z.declare_queryable(k.server(r, "drain"), self.on_drain),
            z.declare_queryable(k.server(r, "cordon"), self.on_cordon),
        ]

    def on_status(self, query: zenoh.Query) -> None:
        with query:
            brief = BRIEF_STATUS in str(query.parameters).replace("&", ";").split(";")
            query.reply(self.keys.server(self.replica, "status"), encode(self.status(not brief)))

    def _key_robot(self, query: zenoh.Query) -> str:
        """The robot a session/reset query speaks for: the id in its key (the router's ACL vouches for it)."""
        robot = parse_key(str(query.key_expr)).robot
        if robot is None:
            raise WireError("key", f"{query.key_expr} names no robot")
        return robot

    def on_session(self, query: zenoh.Query) -> None:
        with query:
            reply_key = self.keys.session(self.replica, "*")
            try:
                robot = self._key_robot(query)
                reply_key = self.keys.session(self.replica, robot)
                req = decode(SessionOpen, query_bytes(query))
                ack = (
                    self._identity_refusal(robot, req.client_uuid) if req.client_uuid != robot else self.seats.open(req)
                )
            except WireError as exc:
                self.metrics.errors.labels(Reason.BAD_SESSION_OPEN.value).inc()
                self.metrics.rejected.labels(Refusal.BAD_REQUEST).inc()
                ack = SessionAck(False, Refusal.BAD_REQUEST, f"malformed session open: {exc}", replica=self.replica)
            except Exception as exc:  # never let a callback die silently
                log.exception("session open failed")
                ack = SessionAck(False, Refusal.BAD_REQUEST, f"session open failed: {exc}", replica=self.replica)
            query.reply(reply_key, encode(ack))

    def _identity_refusal(self, key_robot: str, body_robot: str) -> SessionAck:
        """A session open for another robot than the key it came on: refused, counted, the other robot untouched."""
        self.metrics.errors.labels(Reason.IDENTITY_MISMATCH.value).inc()
        self.metrics.rejected.labels(Refusal.IDENTITY_MISMATCH).inc()
        log.warning(
            "session open on robot %s's key names client_uuid %s: refused (one robot cannot open a session "
            "for another)",
            key_robot,
            printable(body_robot, 80),
        )
        return SessionAck(
            False,
            Refusal.IDENTITY_MISMATCH,
            f"this session open came on robot {key_robot}'s key but names client_uuid {printable(body_robot, 80)}",
            replica=self.replica,
        )

    def on_reset(self, query: zenoh.Query) -> None:
        with query:
            reply_key = self.keys.reset(self.replica, "*")
            try:
                robot = self._key_robot(query)
                reply_key = self.keys.reset(self.replica, robot)
                req = decode(ResetRequest, query_bytes(query))
                s = self.registry.by_session_id(req.session_id)
                if s is not None and s.client_uuid != robot:  # another robot's session id: act as if unknown
                    self.metrics.errors.labels(Reason.IDENTITY_MISMATCH.value).inc()
                    log.warning("reset on robot %s's key names a session of %s: refused", robot, s.client_uuid)
                    s = None
                if s is None:
                    ack = ResetAck(False, req.episode_id, "unknown session: re-open the session")
                else:
                    s.mailbox.clear()
                    s.pending_reset = req.episode_id  # applied by the worker before the next inference
                    self.wake()
                    ack = ResetAck(True, req.episode_id, "")
            except WireError as exc:
                self.metrics.errors.labels(Reason.BAD_RESET.value).inc()
                ack = ResetAck(False, 0, f"malformed reset: {exc}")
            query.reply(reply_key, encode(ack))

    def on_drain(self, query: zenoh.Query) -> None:
        with query:
            try:
                req = decode(DrainRequest, query_bytes(query) if query.payload is not None else b"\x80")
                ack = self.drain(f"{req.reason} (by {req.requested_by or 'operator'})")
            except WireError as exc:
                ack = DrainAck(False, f"malformed drain request: {exc}")
            query.reply(self.keys.server(self.replica, "drain"), encode(ack))

    def on_cordon(self, query: zenoh.Query) -> None:
        with query:
            try:
                ack = self.cordon.answer(query_bytes(query), [s.session_id for s in self.registry.all()])
            except WireError as exc:
                ack = CordonAck(False, self.cordon.on, f"malformed cordon request: {exc}")
            self.metrics.cordoned.set(1 if self.cordon.on else 0)
            query.reply(self.keys.server(self.replica, "cordon"), encode(ack))
