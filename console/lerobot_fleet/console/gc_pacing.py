"""Full garbage collections between frames, not inside them.

At 1,000 robots the console holds ~150,000 GC-tracked objects (rows, trends, audit entries); CPython's
automatic full collection then stops every thread for 60-290 ms, at a moment chosen by whichever
allocation tipped the count - in 60 s runs of `lerobot-fleet simulate --robots 1000`, several landed inside a
refresh. The pacer freezes what exists at start (modules,
Textual, the app: never garbage), turns automatic full collections off, and runs one itself right after
a frame is drawn, at most every `full_every_s`. Young collections stay automatic (they take ~1 ms);
reference counting frees everything else at once, so only reference cycles wait for the paced pass.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_EVERY_S = 20.0
NEVER = 1 << 30  # a generation-2 threshold no run reaches


class GcPacer:
    def __init__(self, full_every_s: float = FULL_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_s = full_every_s
        self.clock = clock
        self._saved: tuple[int, ...] | None = None
        self._last_full = 0.0
        self.full_runs = 0
        self.last_full_ms = 0.0

    @property
    def active(self) -> bool:
        return self._saved is not None

    def start(self) -> None:
        if self._saved is not None:
            return
        self._saved = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(self._saved[0], self._saved[1], NEVER)
        self._last_full = self.clock()

    def after_frame(self) -> None:
        """Called once a frame is drawn: the next refresh is a whole period away."""
        if self._saved is None or self.clock() - self._last_full < self.full_every_s:
            return
        t0 = time.perf_counter()
        gc.collect(2)
        self.last_full_ms = 1000 * (time.perf_counter() - t0)
        self.full_runs += 1
        self._last_full = self.clock()

    def stop(self) -> None:
        """Give the process its collector back as it was."""
        if self._saved is None:
            return
        gc.set_threshold(*self._saved)
        gc.unfreeze()
        self._saved = None
