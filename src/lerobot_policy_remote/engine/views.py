"""The engine's read-only public state (`ready`, `state`, the session's ids, counts, the frame quality): views over
its parts. A mixin of `RemoteInferenceEngine` (engine/remote.py keeps the worker loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .link import LinkState
from .reporting import STALENESS_REPORT_FRACTION

if TYPE_CHECKING:
    from .parts import EngineParts


class EngineViews:
    """Read-only properties of `RemoteInferenceEngine`: what callers, the console and the tests may read."""

    @property
    def ready(self: EngineParts) -> bool:
        """The first handshake ended: a session is open, or the engine failed."""
        return self._ready.is_set() or self._failed.is_set()

    @property
    def failed(self: EngineParts) -> bool:
        return self._failed.is_set()

    @property
    def state(self: EngineParts) -> LinkState:
        return self.states.snapshot()[0]

    @property
    def telemetry_seq(self: EngineParts) -> int:
        return self._pacer.seq

    @property
    def last_outcome(self: EngineParts) -> str:
        """ok | timeout | bad_chunk | server_lost | event:<name>"""
        return self.requests.last_outcome

    @property
    def session_id(self: EngineParts) -> str:
        return self.session.session_id

    @property
    def replica(self: EngineParts) -> str:
        return self.session.replica

    @property
    def session_epoch(self: EngineParts) -> int:
        return self.session.epoch

    @property
    def fingerprint(self: EngineParts) -> str:
        return self.session.fingerprint

    @property
    def rtc_active(self: EngineParts) -> bool:
        return self.session.rtc_active

    @property
    def executed_count(self: EngineParts) -> int:
        return self.control.executed_count

    @property
    def fallback_count(self: EngineParts) -> int:
        return self.control.fallback_count

    @property
    def frame_quality(self: EngineParts) -> int:
        """JPEG quality of the frames sent now: 0 (raw) to a replica on this machine, unless told otherwise."""
        return 0 if self.session.same_host and self.cfg.raw_frames_on_same_host else self.cfg.jpeg_quality

    def quiet_until(self: EngineParts, now: float, cap_s: float = 1.0) -> float | None:
        """The earliest time a step of this engine that nothing woke would do more than bookkeeping, or None when
        that cannot be told (no session, a request in flight, a reset or a lost token pending, not streaming).

        For a caller stepping many engines on one thread (the fleet simulator): anything that arrives (a chunk, an
        event, a token change, a reset query) wakes the engine anyway, so until this time a quiet robot needs no
        step. Due are: the request (the fresh queue down to `buffer_time_s` at `fps`, or its oldest action aging
        out), the telemetry period, and the staleness report's threshold; at most `cap_s` ahead.
        """
        if (
            self.reconnect.needed
            or self.reconnect.token_gone_at is not None
            or self.requests.current is not None
            or self.requests.failing
            or self._pending_reset.is_set()
            or not self._active.is_set()
            or self.control.latest() is None
            or self.state is not LinkState.STREAMING
        ):
            return None
        max_age = self.cfg.max_action_age_s
        fresh, oldest, head = self.queue.outlook(now, max_age)
        stale_report_at = (head if head is not None else now) + STALENESS_REPORT_FRACTION * max_age
        if stale_report_at <= now:
            return None
        return min(
            now + max(0.0, fresh * self._dt - self.cfg.buffer_time_s),
            oldest + max_age,
            self._pacer.next_at(),
            stale_report_at,
            now + cap_s,
        )
