"""The one request the robot is waiting for, and how the last one ended (pure, worker only).

The link state is defined by it: a request outstanding longer than `degraded_after_s`, or one that
failed (timeout, refused chunk, error event) since the last merge, makes a streaming robot DEGRADED.
A robot that simply has not needed a chunk yet has nothing outstanding and stays STREAMING.
"""

from __future__ import annotations

from .request import Outstanding


class RequestTracker:
    def __init__(self) -> None:
        self.seq = 0
        self.current: Outstanding | None = None
        # The most recent request, kept after it timed out or failed until a newer one is sent (or a reset /
        # lost link / new session drops it): its late reply is still merged (a late chunk is accepted
        # when it answers the latest request, otherwise dropped).
        self.latest: Outstanding | None = None
        self.timeouts = 0  # consecutive timeouts (a streak means the link is lost)
        self.failing = False  # a request failed and none succeeded since
        self.last_outcome = ""  # ok | timeout | bad_chunk | event:<name>
        # No chunk merged on this session yet: its first request goes at once (the new path is proven in one
        # round trip, not after the old session's buffer drains) and its chunk replaces the old session's tail.
        self.session_fresh = True

    def begin(
        self, *, mono_ns: int, t_obs: float, t_send: float, idx_before: int, episode_id: int, epoch: int
    ) -> Outstanding:
        self.seq += 1
        self.current = self.latest = Outstanding(self.seq, mono_ns, t_obs, t_send, idx_before, episode_id, epoch)
        return self.current

    def awaited(self) -> Outstanding | None:
        """The request a chunk may answer: the one in flight, else the latest one if it timed out or failed."""
        return self.current or self.latest

    def age(self, now: float) -> float | None:
        """Seconds the current request has been outstanding (None: nothing outstanding)."""
        cur = self.current
        return None if cur is None else now - cur.t_send

    def drop(self) -> None:
        """No longer waited for (episode reset, lost link): not a failure of the request; a late reply is dropped."""
        self.current = self.latest = None

    def new_session(self) -> None:
        self.current = self.latest = None
        self.timeouts = 0
        self.failing = False
        self.session_fresh = True

    def expire(self, now: float, timeout_s: float) -> Outstanding | None:
        """The current request if it just timed out (counted in the streak)."""
        cur = self.current
        if cur is None or now - cur.t_send <= timeout_s:
            return None
        self.timeouts += 1
        self.fail("timeout")
        return cur

    def fail(self, outcome: str) -> None:
        self.current = None
        self.failing = True
        self.last_outcome = outcome

    def succeed(self) -> None:
        self.current = self.latest = None
        self.session_fresh = False
        self.timeouts = 0
        self.failing = False
        self.last_outcome = "ok"
