"""lerobot's `ActionQueue`, plus a source-observation stamp and provenance PER ACTION.

Why per action: in append mode one queue holds actions of several chunks, each computed from a
different observation, so one anchor per merge cannot bound their age. Stamps live under the
queue's own lock and follow every slice the parent makes (replace, append, consume, clear).
Also clamps the replace-mode trim to the steps actually consumed while the request was in flight
(stock `merge` trims `real_delay` even when nothing was consumed, e.g. on the first chunk).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

import numpy as np
import torch
from lerobot.policies.rtc.action_queue import ActionQueue
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.policies.rtc.latency_tracker import LatencyTracker
from numpy.typing import NDArray

from .provenance import Provenance


class StampedActionQueue(ActionQueue):
    """Stock queue tensors (RTC prefixes, parity) + per-row numpy views prepared for a cheap `pop_fresh`.

    Why the row list: a torch op that drops and re-takes the GIL (clone, unbind, indexing a tensor per
    tick) queues behind every other thread of the process; under contention one `unbind` of a chunk
    cost hundreds of us of CPU (docs/decisions.md, "A merge without torch rows"). Rows are cut once per
    merge on the worker as numpy views of ONE numpy copy of the chunk (never memory of the queue's
    tensors, so a caller that mutates its action cannot change an RTC prefix), and `pop_fresh` does
    no torch work at all. The new lists are built outside the lock; the swap under it retries if the
    robot consumed meanwhile.
    """

    def __init__(self, cfg: RTCConfig) -> None:
        super().__init__(cfg)
        self.queue: torch.Tensor | None  # set by the base class; typed here
        self.original_queue: torch.Tensor | None
        self.rows: list[NDArray[np.float32]] = []  # aligned with self.queue; each a view of a per-merge copy
        self.src: list[float] = []  # monotonic time of each action's source observation, aligned too
        self.meta: list[Provenance] = []
        self.stale_dropped = 0
        self.last_trim = 0
        self.src_sorted = True  # `src` oldest first (every merge so far): `fresh_count` bisects instead of scanning

    @property
    def src_t(self) -> NDArray[Any]:
        with self.lock:
            return np.asarray(self.src, dtype=np.float64)

    def clear(self) -> None:
        with self.lock:
            self.queue = None
            self.original_queue = None
            self.last_index = 0
            self.rows, self.src, self.meta = [], [], []
            self.src_sorted = True

    def merge_stamped(
        self,
        original: torch.Tensor,
        processed: torch.Tensor,
        real_delay: int,
        idx_before: int | None,
        src_t: float,
        meta: Provenance,
        replace: bool = False,
    ) -> int:
        """Merge a chunk; returns the number of leading steps trimmed (replace mode).

        Takes ownership of `original` and `processed` (the caller hands over tensors it no longer uses): the queue
        keeps them or slices of them, and copies only where a row handed to the robot would otherwise share memory
        with the queue's own tensors (a caller that mutates its action must not change an RTC prefix). The same tensor
        as both (a chunk sent in robot space only) keeps both queues one tensor: each merge joins it once.

        `replace`: the first chunk of a new session supersedes what is left of the old session's chunk even
        when RTC is off: it was computed from a newer observation. Steps the robot executed since that
        observation are trimmed, exactly as RTC's replace mode does.
        """
        n = len(processed)
        while True:
            with self.lock:
                li, q, oq = self.last_index, self.queue, self.original_queue
                rows, src, metas = self.rows, self.src, self.meta
            if self.cfg.enabled or replace:
                consumed = max(0, li - idx_before) if idx_before is not None else max(0, real_delay)
                delay = max(0, min(int(real_delay), consumed, n))
                new_q = processed[delay:]
                new = (
                    new_q if original is processed else original[delay:],
                    new_q,
                    list(new_q.numpy().copy()),  # a copy: the rows share no memory with the queue's tensors
                    [src_t] * (n - delay),
                    [meta] * (n - delay),
                )
            else:
                delay = 0
                if q is None:
                    new = (original, processed, list(processed.numpy().copy()), [src_t] * n, [meta] * n)
                else:
                    assert oq is not None  # the base class sets both queues together
                    joined = _joined(q, li, processed)
                    new = (  # copies: the rows (views of `processed`) share no memory with the queue tensors
                        joined if original is processed and oq is q else _joined(oq, li, original),
                        joined,
                        rows[li:] + list(processed.numpy()),
                        src[li:] + [src_t] * n,
                        metas[li:] + [meta] * n,
                    )
            with self.lock:
                if self.last_index != li or self.queue is not q:
                    continue  # the robot consumed (or a reset cleared) while we built: redo with the new index
                kept = len(new[3]) - (n - delay if self.cfg.enabled or replace else n)  # stamps kept from before
                self.src_sorted = kept == 0 or (self.src_sorted and new[3][kept - 1] <= src_t)
                self.original_queue, self.queue, self.rows, self.src, self.meta = new
                self.last_index = 0
                self.last_trim = delay
                return delay

    def pop_fresh(self, now: float, max_age_s: float) -> tuple[NDArray[np.float32], float, Provenance] | None:
        """Next action whose source observation is younger than `max_age_s`; older ones are dropped.

        Control thread, every tick: list indexing only (no torch call, no allocation but the tuple).
        """
        with self.lock:
            src = self.src
            i, n = self.last_index, len(src)
            while i < n and now - src[i] > max_age_s:
                i += 1
                self.stale_dropped += 1
            if i >= n:
                self.last_index = i
                return None
            self.last_index = i + 1
            return self.rows[i], src[i], self.meta[i]

    def fresh_count(self, now: float, max_age_s: float) -> int:
        """Unconsumed actions that are still young enough to execute."""
        with self.lock:
            src, li = self.src, self.last_index
            if self.src_sorted:  # the network worker asks every step: O(log n) in C, no Python call per probe
                return len(src) - bisect_left(src, now - max_age_s, lo=li)
            return sum(1 for t in src[li:] if now - t <= max_age_s)

    def outlook(self, now: float, max_age_s: float) -> tuple[int, float, float | None]:
        """(fresh unconsumed actions, source time of the oldest of them or inf, source time of the next action or
        None when empty), under one lock: when the queue next matters without anything arriving."""
        with self.lock:
            src, li = self.src, self.last_index
            head = src[li] if li < len(src) else None
            if self.src_sorted:
                i = bisect_left(src, now - max_age_s, lo=li)
                return len(src) - i, (src[i] if i < len(src) else math.inf), head
            fresh = [t for t in src[li:] if now - t <= max_age_s]
            return len(fresh), min(fresh, default=math.inf), head

    def left_over_head(self, horizon: int) -> tuple[NDArray[np.float32] | None, NDArray[np.float32] | None]:
        """The next `horizon` unconsumed actions in model and robot space, both from the index read under one lock,
        as numpy copies: the RTC prefix a request carries ((None, None) when nothing is left).

        No torch call on the network worker (slicing a tensor queues behind the process's other threads); the queue's
        tensors are never written once set, so they are read outside the lock."""
        with self.lock:
            oq, q, li = self.original_queue, self.queue, self.last_index
        if oq is None or q is None or li >= q.shape[0]:
            return None, None
        return oq.numpy()[li : li + horizon].copy(), q.numpy()[li : li + horizon].copy()

    def head_meta(self) -> Provenance | None:
        """The stamp of the next unconsumed action (None when nothing is left)."""
        with self.lock:
            return self.meta[self.last_index] if self.last_index < len(self.meta) else None

    def head_age(self, now: float) -> float:
        """Age of the next action's source observation (0 when empty)."""
        with self.lock:
            if self.last_index >= len(self.src):
                return 0.0
            return float(now - self.src[self.last_index])


def _joined(q: torch.Tensor, li: int, tail: torch.Tensor) -> torch.Tensor:
    """`torch.cat([q[li:], tail])` in numpy: a torch op gives up the GIL and, with the process's other threads
    waiting for it, cost about 30 us of CPU where numpy's concatenate costs 2 (CPU tensors: the queue's always are)."""
    return torch.from_numpy(np.concatenate((q.numpy()[li:], tail.numpy())))


class WindowedLatency(LatencyTracker):
    """LatencyTracker whose max decays: the max over the last `maxlen` samples only.

    Why: the stock `max()` never decays, so one slow reply would inflate the RTC delay forever.
    """

    def max(self) -> float:
        return max(self._values) if self._values else 0.0

    def delay_steps(self, dt: float) -> int:
        m = self.max()
        return math.ceil(m / dt) if m > 0 else 0
