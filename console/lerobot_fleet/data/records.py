"""The store's state of one robot and one replica: what its writers change under its lock, and the immutable
record a capture copies out of it."""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry, ServerStatus

from .capacity import AUDIT_RATE_WINDOW_S
from .capture import RobotRecord, ServerRecord
from .model import AuditEntry

NO_NAMESPACE = Namespace("", "", "")  # not learnt from a key yet
TREND_SAMPLES = 180  # per-robot trend length: about 3 minutes of 1 Hz telemetry


@dataclass
class RobotEntry:
    robot_id: str
    ns: Namespace = NO_NAMESPACE
    key: str = ""
    telemetry: RobotTelemetry | None = None
    ver: int = 0  # bumped by every change (the derivation reuses a row's figures while it stays)
    seen_at: float | None = None
    alive: bool | None = None
    gone_at: float | None = None
    recent: tuple[float, ...] = ()  # the last RECENT_STALENESS staleness samples, oldest first
    history: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=40))
    rtt: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    staleness: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    queue: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    audit: deque[AuditEntry] = field(default_factory=lambda: deque(maxlen=50))
    audit_at: deque[float] = field(default_factory=lambda: deque(maxlen=50))

    def record(self) -> RobotRecord:
        since = self.history[-1][0] if self.history else None
        return RobotRecord(
            self.key,
            self.robot_id,
            self.ns,
            self.ver,
            self.telemetry,
            self.seen_at,
            self.alive,
            self.gone_at,
            since,
            self.recent,
        )


@dataclass
class ServerEntry:
    replica: str
    ns: Namespace = NO_NAMESPACE
    status: ServerStatus | None = None
    status_at: float | None = None
    alive: bool | None = None
    gone_at: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    metrics_at: float | None = None
    metrics_prev: tuple[float, float] | None = None  # (t, requests_total) of the scrape before
    requests_per_s: float | None = None
    metrics_error: str = ""
    audit: deque[tuple[float, AuditEntry]] = field(default_factory=lambda: deque(maxlen=50))
    audit_times: deque[float] = field(default_factory=lambda: deque(maxlen=5000))
    audit_errors: int = 0
    audit_superseded: int = 0

    def record(self, now: float) -> ServerRecord:
        times = self.audit_times
        recent = len(times) - bisect.bisect_left(times, now - AUDIT_RATE_WINDOW_S) if times else 0
        return ServerRecord(
            self.replica,
            self.ns,
            self.status,
            self.status_at,
            self.alive,
            self.gone_at,
            self.metrics,
            self.metrics_error,
            self.requests_per_s,
            len(self.audit_times),
            recent,
            self.audit_errors,
            self.audit_superseded,
        )
