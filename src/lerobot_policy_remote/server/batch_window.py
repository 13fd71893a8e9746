"""How long a batching worker waits for a forward pass to fill.

Why: robots that saturate a batching server settle into alternating half-batches. While half of them are in
a pass, the other half's observations arrive; when the pass ends those are ready and the just-served half is
not (their chunks are on the way back), so an opportunistic pick runs half a batch, and so on for ever. A
pass over B robots costs much less than two passes over B/2, so waiting a fraction of a pass for the others
pays. The default window is derived, not configured: wait only for robots whose next observation is due within
the window (each mailbox keeps its robot's smoothed interval between observations), and at most `fraction` of
the measured pass time, so the added latency is bounded by what the fuller pass saves. A lone robot is never
waited on, nor a robot that asks every second or so (a real robot refilling its action buffer): its next
observation is not due within a fraction of a pass, so batching by default costs an unsaturated fleet nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

AUTO_FRACTION = 0.5  # of the measured pass time: the most a request waits for its batch to fill


class BatchWindow:
    """`fixed_s` None: the derived window; 0: opportunistic (never wait); > 0: wait up to that long."""

    def __init__(
        self,
        fixed_s: float | None = None,
        *,
        fraction: float = AUTO_FRACTION,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.fixed_s, self.fraction, self.clock = fixed_s, fraction, clock

    def horizon_s(self, pass_s: float) -> float:
        """The longest the derived window waits: a robot due later than this is not waited for."""
        return self.fraction * pass_s

    def due(self, arrivals: Iterable[tuple[float, float | None]], within_s: float) -> int:
        """Robots (not ready now) whose next observation is due within `within_s`: `arrivals` holds each one's last
        arrival (the mail's clock) and smoothed interval (None until it has sent two). One overdue by more than
        its interval is idle or gone, not late."""
        now = self.clock()
        n = 0
        for last, interval in arrivals:
            if interval is None:
                continue
            next_at = last + interval
            if next_at <= now + within_s and now - next_at <= interval:
                n += 1
        return n

    def target(self, limit: int, ready: int, due: int, sessions: int) -> int:
        """How many robots the pass waits for: never more than the batch holds or than may come."""
        if self.fixed_s is not None:
            return min(limit, sessions)  # an operator's fixed window waits for every session, as before
        return min(limit, ready + due)

    def wait_s(self, ready: int, target: int, pass_s: float) -> float:
        """The longest wait for this pick: 0 when nothing is ready (nothing to batch) or the pass is full."""
        if ready <= 0 or ready >= target:
            return 0.0
        if self.fixed_s is not None:
            return self.fixed_s
        return self.horizon_s(pass_s)
