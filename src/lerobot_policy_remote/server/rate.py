"""The replica's request rate: requests it served per second over its last 10 s.

Every status reply carries it (`ServerStatus.requests_per_s`), so the console, `lerobot-fleet status` and
`lerobot-fleet doctor` read one number from its source instead of each differencing counters over a window of
its own (`status` listens 2.5 s, the console scrapes every 2 s: they disagreed by up to 10x). The housekeeper
samples the running total about once a second; a status reply only reads the last value.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

RATE_WINDOW_S = 10.0


class RequestRate:
    """`total()` is the running count of requests served; `update()` samples it, `value` is the rate."""

    def __init__(
        self,
        total: Callable[[], float],
        window_s: float = RATE_WINDOW_S,
        every_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._total = total
        self.window_s = window_s
        self.every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, float]] = deque()
        self._value = 0.0

    @property
    def value(self) -> float:
        """Requests per second over the last `window_s` (over the time since the first sample while younger)."""
        return self._value

    def update(self, now: float | None = None) -> bool:
        """Sample the total when `every_s` has passed since the last sample. True when `value` was refreshed."""
        now = self._clock() if now is None else now
        with self._lock:
            if self._samples and now - self._samples[-1][0] < self.every_s:
                return False
            self._samples.append((now, float(self._total())))
            while len(self._samples) > 2 and self._samples[1][0] <= now - self.window_s:
                self._samples.popleft()  # keep one sample at or before the window's start
            t0, n0 = self._samples[0]
            if now > t0:
                self._value = max(0.0, self._samples[-1][1] - n0) / (now - t0)
            return True
