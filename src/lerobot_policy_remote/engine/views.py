"""The engine's read-only public state (`ready`, `state`, the session's ids, counts, the frame quality): views over
its parts. A mixin of `RemoteInferenceEngine` (engine/remote.py keeps the worker loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .link import LinkState

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
