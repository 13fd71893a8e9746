"""The UI's right of way over ingest: one Python process, one GIL.

A refresh builds and draws a frame in ~40 ms of Python; while the source's decoder, status poller and
scrapers also hold the GIL, the same frame took 200-290 ms at 1,000 robots. The app closes
the gate for the length of one refresh; ingest threads call `wait()` between small units of work and
sleep while it is closed. The samples they would have decoded wait in bounded, coalescing queues, so a
frame costs the data a few tens of milliseconds of age, never a sample. A gate left closed (a refresh
that raised) opens itself after `max_hold_s`.
"""

from __future__ import annotations

import threading
import time

MAX_HOLD_S = 0.5  # longest one refresh may hold ingest back


class UiGate:
    def __init__(self, max_hold_s: float = MAX_HOLD_S) -> None:
        self.max_hold_s = max_hold_s
        self._open = threading.Event()
        self._open.set()
        self._until = 0.0
        self.waits = 0  # how many times an ingest thread waited (visible in tests and benches)

    @property
    def is_open(self) -> bool:
        """Whether ingest may run now (tests and benches check the UI closed it for a refresh)."""
        return self._open.is_set()

    def close(self) -> None:
        """The UI starts a refresh."""
        self._until = time.monotonic() + self.max_hold_s
        self._open.clear()

    def open(self) -> None:
        """The UI finished the refresh (its frame is drawn)."""
        self._open.set()

    def wait(self) -> None:
        """Ingest threads: return at once when open, else when the refresh ends (at most `max_hold_s`)."""
        if self._open.is_set():
            return
        self.waits += 1
        rest = self._until - time.monotonic()
        if rest <= 0 or not self._open.wait(rest):
            self._open.set()  # the refresh never said it ended: let ingest go on
