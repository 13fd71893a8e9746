"""What the robot reports: RTT percentiles, pacing of telemetry puts, the provenance log."""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING

from ..wire.messages import RobotTelemetry
from .provenance import Provenance

if TYPE_CHECKING:
    from .remote import RemoteInferenceEngine

prov_logger = logging.getLogger("lerobot.remote.provenance")


class RttWindow:
    def __init__(self, maxlen: int = 64) -> None:
        self._ms: collections.deque[float] = collections.deque(maxlen=maxlen)

    def add(self, ms: float) -> None:
        self._ms.append(ms)

    def percentile(self, q: float) -> float:
        values = sorted(self._ms)
        return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


class TelemetryPacer:
    """Send on every state change, otherwise once per period."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._version = -1
        self._last = float("-inf")
        self.seq = 0

    def due(self, version: int, now: float, force: bool = False) -> tuple[bool, bool]:
        """(send now, the state changed since the last send)."""
        changed = version != self._version
        if not (force or changed or now - self._last >= self.period_s):
            return False, False
        self._version, self._last = version, now
        self.seq += 1
        return True, changed


class ProvenanceLog:
    """The control thread appends what it executed; the worker logs each new chunk once."""

    def __init__(self) -> None:
        self.executed: collections.deque[tuple[Provenance, float]] = collections.deque(maxlen=4096)
        self._last: tuple[str, int] | None = None

    def flush(self) -> None:
        while self.executed:
            meta, age = self.executed.popleft()
            key = (meta.session_id, meta.seq_id)
            if key != self._last:
                self._last = key
                prov_logger.info("executing session_id=%s seq_id=%d episode_id=%d replica=%s age=%.3fs",
                                 meta.session_id, meta.seq_id, meta.episode_id, meta.replica, age)


def robot_telemetry(e: RemoteInferenceEngine, now: float) -> RobotTelemetry:
    """What the console shows for this robot, read from the engine's public state."""
    state, since, _ = e.link.snapshot()
    c = e.counters
    return RobotTelemetry(
        client_uuid=e.client_uuid, state=state.value, model_id=e.model_id, service=e.keys.service,
        session_id=e.session_id, replica=e.replica, episode_id=e.episode_id,
        staleness_s=e.queue.head_age(now), queue_s=e.queue.fresh_count(now, e.cfg.max_action_age_s) / e.fps,
        rtt_p50_ms=e.rtt.percentile(0.5), rtt_p95_ms=e.rtt.percentile(0.95), delay_steps=e.latency.delay_steps(1.0 / e.fps),
        fallback_count=e.fallback_count, requests=c["requests"], superseded=c["superseded"], errors=c["bad_chunk"] + c["timeouts"],
        last_outcome=e.link.dead_reason or e.last_outcome, state_age_s=now - since, fps=e.fps, seq=e.telemetry_seq,
    )
