"""lerobot's `ActionQueue`, plus a source-observation stamp and provenance PER ACTION.

Why per action: in append mode one queue holds actions of several chunks, each computed from a
different observation, so one anchor per merge cannot bound their age. Stamps live under the
queue's own lock and follow every slice the parent makes (replace, append, consume, clear).
Also clamps the replace-mode trim to the steps actually consumed while the request was in flight
(stock `merge` trims `real_delay` even when nothing was consumed, e.g. on the first chunk).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from lerobot.policies.rtc.action_queue import ActionQueue
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.policies.rtc.latency_tracker import LatencyTracker


@dataclass(frozen=True)
class ChunkMeta:
    session_id: str
    seq_id: int
    episode_id: int
    replica: str = ""


class StampedActionQueue(ActionQueue):
    def __init__(self, cfg: RTCConfig) -> None:
        super().__init__(cfg)
        self.src_t = np.zeros(0, dtype=np.float64)  # monotonic time of each action's source observation
        self.meta: list[ChunkMeta] = []
        self.stale_dropped = 0
        self.last_trim = 0

    def clear(self) -> None:
        with self.lock:
            self.queue = None
            self.original_queue = None
            self.last_index = 0
            self.src_t = np.zeros(0, dtype=np.float64)
            self.meta = []

    def merge_stamped(
        self,
        original: torch.Tensor,
        processed: torch.Tensor,
        real_delay: int,
        idx_before: int | None,
        src_t: float,
        meta: ChunkMeta,
    ) -> int:
        """Merge a chunk; returns the number of leading steps trimmed (replace mode)."""
        n = len(processed)
        with self.lock:
            if self.cfg.enabled:
                consumed = max(0, self.last_index - idx_before) if idx_before is not None else max(0, real_delay)
                delay = max(0, min(int(real_delay), consumed, n))
                self._replace_actions_queue(original, processed, delay)
                self.src_t = np.full(n - delay, src_t, dtype=np.float64)
                self.meta = [meta] * (n - delay)
                self.last_trim = delay
                return delay
            keep = self.last_index if self.src_t.size else 0
            self._append_actions_queue(original, processed)
            self.src_t = np.concatenate([self.src_t[keep:], np.full(n, src_t, dtype=np.float64)])
            self.meta = self.meta[keep:] + [meta] * n
            self.last_trim = 0
            return 0

    def pop_fresh(self, now: float, max_age_s: float) -> tuple[torch.Tensor, float, ChunkMeta] | None:
        """Next action whose source observation is younger than `max_age_s`; older ones are dropped."""
        with self.lock:
            if self.queue is None:
                return None
            n = len(self.queue)
            while self.last_index < n and now - self.src_t[self.last_index] > max_age_s:
                self.last_index += 1
                self.stale_dropped += 1
            if self.last_index >= n:
                return None
            i = self.last_index
            self.last_index += 1
            return self.queue[i].clone(), float(self.src_t[i]), self.meta[i]

    def fresh_count(self, now: float, max_age_s: float) -> int:
        """Unconsumed actions that are still young enough to execute."""
        with self.lock:
            if self.queue is None:
                return 0
            rest = self.src_t[self.last_index :]
            return int(np.count_nonzero(now - rest <= max_age_s))

    def head_age(self, now: float) -> float:
        """Age of the next action's source observation (0 when empty)."""
        with self.lock:
            if self.queue is None or self.last_index >= len(self.src_t):
                return 0.0
            return float(now - self.src_t[self.last_index])


class WindowedLatency(LatencyTracker):
    """LatencyTracker whose max decays: the max over the last `maxlen` samples only.

    Why: the stock `max()` never decays, so one slow reply would inflate the RTC delay forever.
    """

    def max(self) -> float:  # type: ignore[override]
        return max(self._values) if self._values else 0.0

    def delay_steps(self, dt: float) -> int:
        m = self.max()
        return math.ceil(m / dt) if m > 0 else 0
