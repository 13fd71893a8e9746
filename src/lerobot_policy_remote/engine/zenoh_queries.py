"""The queries a robot's `ZenohLink` hands its worker: each held until the worker answers it once, on a safe point
(the Zenoh callback only deposits it)."""

from __future__ import annotations

from typing import Any

import zenoh

from ..wire.codec import encode
from ..wire.messages import EpisodeResetAck, RobotTelemetry
from ..wire.rollout import MoveAck


class ZenohResetQuery:
    def __init__(self, query: Any) -> None:
        self._query = query

    def answer(self, ack: EpisodeResetAck) -> None:
        with self._query:
            self._query.reply(self._query.key_expr, encode(ack))


class ZenohMoveQuery:
    def __init__(self, query: zenoh.Query) -> None:
        self._query = query

    @property
    def payload(self) -> bytes | None:
        body = self._query.payload
        return body.to_bytes() if body is not None else None

    def answer(self, ack: MoveAck) -> None:
        with self._query:
            self._query.reply(self._query.key_expr, encode(ack))


class ZenohTelemetryQuery:
    def __init__(self, query: Any, key: str) -> None:
        self._query, self._key = query, key

    def answer(self, telemetry: RobotTelemetry) -> None:
        with self._query:  # answered on the robot's own key: the query may name many robots with a wildcard
            self._query.reply(self._key, encode(telemetry))
