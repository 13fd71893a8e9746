"""The fail-safe link state machine (docs/robot.md, states), as pure logic (no I/O, no threads, time passed in).

    CONNECTING --first merge--> STREAMING
    STREAMING --the request in flight is older than degraded_after_s, or one failed--> DEGRADED
    DEGRADED/STALLED --a chunk merged--> STREAMING
    STREAMING/DEGRADED --no fresh action left (queue empty or all older than max_action_age_s)--> STALLED
    any live state --timeout streak / server liveliness lost / drain--> RECONNECTING --handshake ok--> CONNECTING
    offline > max_offline_s, contract mismatch on (re)connect --> DEAD (terminal)

DEGRADED is about the request the robot is waiting for, never about the time since the last chunk:
a robot whose queue is full enough that it has not asked yet is STREAMING. A re-handshake always
lands in CONNECTING, never straight in STREAMING: only a merged chunk proves the link works again.
"""

from __future__ import annotations

import threading
from enum import Enum


class LinkState(str, Enum):
    CONNECTING = "CONNECTING"
    STREAMING = "STREAMING"
    DEGRADED = "DEGRADED"
    STALLED = "STALLED"
    RECONNECTING = "RECONNECTING"
    DEAD = "DEAD"


class LinkStateMachine:
    """Thread-safe: the worker feeds network events, the control thread feeds queue observations."""

    def __init__(self, degraded_after_s: float, max_offline_s: float, now: float) -> None:
        self.degraded_after_s = degraded_after_s
        self.max_offline_s = max_offline_s
        self._lock = threading.Lock()
        self.state = LinkState.CONNECTING
        self.since = now
        self.last_ok = now  # last merged chunk (or start / resume): the offline clock
        self.dead_reason = ""
        self.version = 0  # bumped on every transition (telemetry on change)
        self.history: list[tuple[float, LinkState, str]] = [(now, LinkState.CONNECTING, "start")]

    def _go(self, new: LinkState, now: float, why: str) -> bool:
        if self.state is LinkState.DEAD or new is self.state:
            return False
        self.state = new
        self.since = now
        self.version += 1
        if len(self.history) < 1000:
            self.history.append((now, new, why))
        return True

    # -- network events (worker) ------------------------------------------------
    def on_handshake_ok(self, now: float) -> bool:
        with self._lock:
            if self.state in (LinkState.RECONNECTING, LinkState.CONNECTING):
                return self._go(LinkState.CONNECTING, now, "handshake ok")
            return False

    def on_merge(self, now: float) -> bool:
        with self._lock:
            self.last_ok = now
            if self.state is LinkState.RECONNECTING:
                return False  # a chunk from before the link was declared lost; re-handshake first
            return self._go(LinkState.STREAMING, now, "chunk merged")

    def on_link_lost(self, now: float, why: str) -> bool:
        with self._lock:
            return self._go(LinkState.RECONNECTING, now, why)

    def on_fatal(self, now: float, why: str) -> bool:
        with self._lock:
            if self.state is LinkState.DEAD:
                return False
            self.dead_reason = why
            return self._go(LinkState.DEAD, now, why)

    def restart_offline_clock(self, now: float) -> None:
        """Resume after a pause: the pause itself is not time offline."""
        with self._lock:
            self.last_ok = now

    # -- periodic evaluation (worker, and the control thread's cheap check) ------
    def evaluate(
        self,
        now: float,
        fresh_actions: int,
        streaming_began: bool,
        paused: bool = False,
        request_age: float | None = None,
        failing: bool = False,
    ) -> bool:
        """Time- and queue-driven transitions; returns True when the state changed.

        `request_age`: seconds the request in flight has been outstanding (None: none in flight);
        `failing`: a request failed (timeout, refused chunk, error event) and none succeeded since.
        """
        with self._lock:
            st = self.state
            if st is LinkState.DEAD:
                return False
            if not paused and st is not LinkState.STREAMING and now - self.last_ok > self.max_offline_s:
                self.dead_reason = f"offline for more than max_offline_s={self.max_offline_s:g}s"
                return self._go(LinkState.DEAD, now, self.dead_reason)
            if st in (LinkState.STREAMING, LinkState.DEGRADED) and fresh_actions == 0 and streaming_began:
                return self._go(LinkState.STALLED, now, "no fresh action left (queue empty or max_action_age_s)")
            if st is LinkState.STREAMING:
                if failing:
                    return self._go(LinkState.DEGRADED, now, "a request failed")
                if request_age is not None and request_age > self.degraded_after_s:
                    return self._go(
                        LinkState.DEGRADED,
                        now,
                        f"request outstanding for more than degraded_after_s={self.degraded_after_s:g}s",
                    )
            return False

    def snapshot(self) -> tuple[LinkState, float, int]:
        with self._lock:
            return self.state, self.since, self.version
