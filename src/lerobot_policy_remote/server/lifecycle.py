"""The server's lifecycle: serving -> draining -> drained, and stopped at any point.

This object alone sets those states; everything else asks it. Who moves it:
- the server's `drain()` (drain query, SIGTERM in the CLI) calls `begin_drain()`;
- the inference worker calls `mark_drained()` once nothing is pending, the housekeeper calls it when
  the worker has died or the drain deadline passed (whichever comes first wins; later calls are no-ops);
- the server's `stop()` calls `stop()`; the worker and housekeeping loops end when they see it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Lifecycle:
    """Thread-safe one-way flags: draining and drained never go back, stopped is final."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._draining = threading.Event()
        self._drained = threading.Event()
        self._stopped = threading.Event()
        self._drain_started: float | None = None

    # ------------------------------------------------------------------ transitions
    def begin_drain(self) -> bool:
        """Stop taking new work. True only for the call that started the drain (the others are repeats)."""
        with self._lock:
            if self._draining.is_set():
                return False
            self._drain_started = self._clock()
            self._draining.set()
            return True

    def mark_drained(self) -> bool:
        """The drain is over (all served, worker gone, or deadline). True only the first time; needs a drain."""
        with self._lock:
            if not self._draining.is_set():
                raise RuntimeError("mark_drained() before begin_drain(): a server is only drained after a drain")
            if self._drained.is_set():
                return False
            self._drained.set()
            return True

    def stop(self) -> bool:
        """Final: the loops end. True only for the call that stopped it (teardown runs once)."""
        with self._lock:
            if self._stopped.is_set():
                return False
            self._stopped.set()
            return True

    # ------------------------------------------------------------------ queries
    @property
    def draining(self) -> bool:
        """True from the drain's start on (also once drained)."""
        return self._draining.is_set()

    @property
    def drained(self) -> bool:
        return self._drained.is_set()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def drain_elapsed(self) -> float:
        """Seconds since the drain began (0.0 when not draining)."""
        started = self._drain_started
        return 0.0 if started is None else self._clock() - started

    def wait_drained(self, timeout: float | None = None) -> bool:
        return self._drained.wait(timeout)

    def wait_stopped(self, timeout: float | None = None) -> bool:
        """Sleep up to `timeout`, waking early on stop: a loop's tick."""
        return self._stopped.wait(timeout)
