"""What the robot reports: RTT percentiles, pacing of telemetry puts, the provenance log, and the telemetry itself."""

from __future__ import annotations

import collections
import logging
import math
from bisect import bisect_left, insort
from dataclasses import dataclass

from ..wire.messages import RobotTelemetry
from ..wire.text import printable
from .link import LinkState
from .provenance import Provenance

prov_logger = logging.getLogger("lerobot.remote.provenance")


class RttWindow:
    """The last `maxlen` samples, also kept sorted: a percentile is an index, with no sort per report (a robot
    reports four windows' medians each second; a host of hundreds of robots sorted them all).

    One writer (the network worker) adds; readers on any thread read `_sorted` once: each add swaps in a new list."""

    def __init__(self, maxlen: int = 64) -> None:
        self._ms: collections.deque[float] = collections.deque(maxlen=maxlen)
        self._sorted: list[float] = []

    def add(self, ms: float) -> None:
        if not math.isfinite(ms):  # a server's NaN timing is no sample (and would break the sorted order)
            return
        values = self._sorted.copy()
        if len(self._ms) == self._ms.maxlen:
            del values[bisect_left(values, self._ms[0])]  # the sample the deque drops below
        insort(values, ms)
        self._ms.append(ms)
        self._sorted = values

    def percentile(self, q: float) -> float:
        values = self._sorted
        return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


class ChunkTimings:
    """Where each round trip went: server queue wait and inference (server-reported durations) and the rest,
    network = RTT - queue wait - inference (robot-measured minus server-measured; never a cross-machine instant)."""

    def __init__(self, maxlen: int = 64) -> None:
        self.queue_wait, self.inference, self.network = RttWindow(maxlen), RttWindow(maxlen), RttWindow(maxlen)

    def add(self, rtt_ms: float, queue_wait_ms: float, inference_ms: float) -> float:
        """Record one chunk; returns its network time in ms (clamped at 0: clocks tick at different rates)."""
        network = max(0.0, rtt_ms - queue_wait_ms - inference_ms)
        self.queue_wait.add(queue_wait_ms)
        self.inference.add(inference_ms)
        self.network.add(network)
        return network


class TelemetryPacer:
    """Adaptive: send at once on every state change; while nothing changes, the period doubles from `period_s`
    up to `max_period_s` (a fleet of quiet robots costs the console and the routers less). A change resets it.

    The engine's version counts what the console must see at once: a state change, and the staleness crossing
    2/3 of `max_action_age_s` (the console's default staleness alert), so slowing down never hides a stale robot."""

    def __init__(self, period_s: float, max_period_s: float | None = None) -> None:
        self.period_s = period_s
        self.max_period_s = max(period_s, max_period_s if max_period_s is not None else period_s)
        self.current_s = period_s
        self._version = -1
        self._last = float("-inf")
        self.seq = 0

    def next_at(self) -> float:
        """When the period alone makes the next report due (a change makes it due at once)."""
        return self._last + self.current_s

    def due(self, version: int, now: float, force: bool = False) -> tuple[bool, bool]:
        """(send now, the state changed since the last send)."""
        changed = version != self._version
        if not (force or changed or now - self._last >= self.current_s):
            return False, False
        if changed:
            self.current_s = self.period_s
        elif self._last != float("-inf"):
            self.current_s = min(self.max_period_s, self.current_s * 2)
        self._version, self._last = version, now
        self.seq += 1
        return True, changed


class ProvenanceLog:
    """The control thread appends the first action it executed of each chunk; the worker logs each chunk once."""

    def __init__(self, level: int = logging.DEBUG) -> None:
        self.executed: collections.deque[tuple[Provenance, float]] = collections.deque(maxlen=4096)
        self._last: tuple[str, int] | None = None
        self.level = level  # INFO with --inference.log_every_chunk

    def flush(self) -> None:
        while self.executed:
            meta, age = self.executed.popleft()
            key = (meta.session_id, meta.seq_id)
            if key != self._last:
                self._last = key
                prov_logger.log(
                    self.level,
                    "executing session_id=%s seq_id=%d episode_id=%d replica=%s age=%.3fs",
                    printable(meta.session_id, 80),
                    meta.seq_id,
                    meta.episode_id,
                    meta.replica,
                    age,
                )


class StreamSummary:
    """The INFO lines that say a robot is streaming (the per-chunk lines are DEBUG unless asked for): one when a
    session's first chunk merges, then at most one per `period_s` while chunks keep merging, none while idle."""

    period_s = 10.0

    def __init__(self) -> None:
        self._session = ""
        self._since = 0.0
        self._chunks = 0

    def due(self, now: float, chunks: int, session: str) -> tuple[int, bool]:
        """(chunks merged since the last line, whether this is the session's first) when a line is due, else
        (0, False)."""
        if chunks == self._chunks:
            return 0, False
        first = session != self._session
        if not first and now - self._since < self.period_s:
            return 0, False
        new, self._session, self._since, self._chunks = chunks - self._chunks, session, now, chunks
        return new, first


@dataclass(frozen=True)
class EngineStats:
    """What the engine has counted and measured so far (built by the engine, one object per report)."""

    requests: int = 0
    superseded: int = 0  # observations the server replaced by a newer one before serving them
    errors: int = 0  # refused chunks + request timeouts
    fallback_count: int = 0  # control ticks served by the fallback instead of a fresh action
    rtt_p50_ms: float = 0.0
    rtt_p95_ms: float = 0.0
    delay_steps: int = 0  # the RTC inference delay, in control steps
    queue_wait_ms_p50: float = 0.0  # server-reported, median over recent chunks
    inference_ms_p50: float = 0.0  # server-reported, median over recent chunks
    network_ms_p50: float = 0.0  # RTT - queue wait - inference, median over recent chunks


@dataclass(frozen=True)
class EngineSnapshot:
    """Who the robot is and where it stands at one instant (built by the engine)."""

    client_uuid: str
    state: LinkState
    state_age_s: float  # time in `state`
    model_id: str = ""
    service: str = ""
    session_id: str = ""
    replica: str = ""
    episode_id: int = 0
    staleness_s: float = 0.0  # age of the next action's source observation
    queue_s: float = 0.0  # fresh actions left, in seconds of control
    last_outcome: str = ""  # ok | timeout | bad_chunk | server_lost | event:<kind>
    dead_reason: str = ""  # set once DEAD: shown instead of the last outcome
    fps: float = 0.0
    seq: int = 0  # telemetry sequence number
    action_order: str = ""  # checked | unchecked (the server compared only the dimension) | "" before a session
    max_action_age_s: float = 0.0  # the robot's hard bound on action age (from its config; 0 = unknown)
    rtc: str = ""  # on | off (the session runs real-time chunking or appends chunks) | "" before a session
    revision: str = ""  # the namespace's revision the robot runs in now (a move changes it)
    fingerprint: str = ""  # the pinned checkpoint ("" before a session)
    moves: int = 0  # moves to another model completed (the new model's first chunk merged)


def robot_telemetry(stats: EngineStats, snap: EngineSnapshot) -> RobotTelemetry:
    """What the console shows for this robot: a pure function of the engine's stats and state snapshot."""
    return RobotTelemetry(
        client_uuid=snap.client_uuid,
        state=snap.state.value,
        model_id=snap.model_id,
        service=snap.service,
        session_id=snap.session_id,
        replica=snap.replica,
        episode_id=snap.episode_id,
        staleness_s=snap.staleness_s,
        queue_s=snap.queue_s,
        rtt_p50_ms=stats.rtt_p50_ms,
        rtt_p95_ms=stats.rtt_p95_ms,
        delay_steps=stats.delay_steps,
        fallback_count=stats.fallback_count,
        requests=stats.requests,
        superseded=stats.superseded,
        errors=stats.errors,
        last_outcome=snap.dead_reason or snap.last_outcome,
        state_age_s=snap.state_age_s,
        fps=snap.fps,
        seq=snap.seq,
        queue_wait_ms_p50=stats.queue_wait_ms_p50,
        inference_ms_p50=stats.inference_ms_p50,
        network_ms_p50=stats.network_ms_p50,
        action_order=snap.action_order,
        max_action_age_s=snap.max_action_age_s,
        rtc=snap.rtc,
        revision=snap.revision,
        fingerprint=snap.fingerprint,
        moves=snap.moves,
    )
