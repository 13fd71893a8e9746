"""How long a batching worker waits for a forward pass to fill.

Why: robots that saturate a batching server settle into alternating half-batches. While half of them are in
a pass, the other half's observations arrive; when the pass ends those are ready and the just-served half is
not (their chunks are on the way back), so an opportunistic pick runs half a batch, and so on for ever. A
pass over B robots costs much less than two passes over B/2, so waiting a fraction of a pass for the others
pays. The default window is derived, not configured: wait only while fewer robots are ready than have been
active recently (never for a lone robot, never for robots that are idle), and at most `fraction` of the
measured pass time, so the added latency is bounded by what the fuller pass saves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

AUTO_FRACTION = 0.5  # of the measured pass time: the most a request waits for its batch to fill
RECENT_S = 1.0  # a session that sent an observation this recently is active (others may be idle robots)


class BatchWindow:
    """`fixed_s` None: the derived window; 0: opportunistic (never wait); > 0: wait up to that long."""

    def __init__(self, fixed_s: float | None = None, *, fraction: float = AUTO_FRACTION, recent_s: float = RECENT_S,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.fixed_s, self.fraction, self.recent_s, self.clock = fixed_s, fraction, recent_s, clock

    def active(self, last_arrivals: Iterable[float]) -> int:
        """Sessions whose last observation arrived within `recent_s` (by the same clock as the mail's t_arrival)."""
        now = self.clock()
        return sum(1 for t in last_arrivals if now - t <= self.recent_s)

    def target(self, limit: int, active: int, sessions: int) -> int:
        """How many robots the pass waits for: never more than the batch holds or than may come."""
        if self.fixed_s is not None:
            return min(limit, sessions)  # an operator's fixed window waits for every session, as before
        return min(limit, active)

    def wait_s(self, ready: int, target: int, pass_s: float) -> float:
        """The longest wait for this pick: 0 when nothing is ready (nothing to batch) or the pass is full."""
        if ready <= 0 or ready >= target:
            return 0.0
        if self.fixed_s is not None:
            return self.fixed_s
        return self.fraction * pass_s
