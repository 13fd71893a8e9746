"""The load gauge: the fraction of recent wall time the inference worker spent busy (checks + model).

The worker adds its busy seconds, the housekeeper samples once a window, and status replies and
action chunks read `value`. Nobody else computes load.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class LoadGauge:
    """Busy time accumulated by the worker, turned into a 0..1 load each `window_s` by `update()`."""

    def __init__(self, window_s: float = 1.0, clock: Callable[[], float] = time.perf_counter) -> None:
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._busy_s = 0.0
        self._last_busy_s = 0.0
        self._last_t = clock()
        self._value = 0.0

    def add_busy(self, seconds: float) -> None:
        """The worker: this many seconds were spent on checks or a forward pass."""
        with self._lock:
            self._busy_s += seconds

    @property
    def busy_s(self) -> float:
        """Total busy seconds since the server was built."""
        return self._busy_s

    @property
    def value(self) -> float:
        """The last sampled load, 0..1 (what status replies and chunks report)."""
        return self._value

    def update(self, now: float | None = None) -> bool:
        """The housekeeper's tick: resample when a window has passed. True when `value` was refreshed."""
        now = self._clock() if now is None else now
        with self._lock:
            elapsed = now - self._last_t
            if elapsed < self.window_s or elapsed <= 0:
                return False
            self._value = min(1.0, max(0.0, (self._busy_s - self._last_busy_s) / elapsed))
            self._last_busy_s, self._last_t = self._busy_s, now
            return True
