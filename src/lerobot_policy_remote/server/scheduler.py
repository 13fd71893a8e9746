"""Which ready session(s) the inference worker serves next.

Why a seam: the worker, the checks and the publishing are the same whether one robot or a batch of
robots shares a forward pass; only the pick differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

S = TypeVar("S")


class Scheduler(Protocol):
    def select(self, ready: Sequence[S]) -> list[S]: ...


class RoundRobin:
    """`ready` arrives in ring order starting after the last served session: take the first.

    Each session with pending work gets exactly one inference per cycle, so starvation is impossible.
    """

    def select(self, ready: Sequence[S]) -> list[S]:
        return list(ready[:1])


class MicroBatch:
    """Take up to `max_batch` ready sessions in ring order (opportunistic: whatever is ready now).

    Fair for the same reason as RoundRobin: the ring cursor moves past everyone served, so a robot
    left out of a full batch is first in the next one (it waits at most one batch cycle).
    """

    def __init__(self, max_batch: int) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.max_batch = max_batch

    def select(self, ready: Sequence[S]) -> list[S]:
        return list(ready[: self.max_batch])


def scheduler_for(max_batch: int) -> Scheduler:
    """`max_batch=1` is the unbatched round-robin of old."""
    return RoundRobin() if max_batch <= 1 else MicroBatch(max_batch)
