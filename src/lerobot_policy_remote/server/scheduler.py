"""Which ready session(s) the inference worker serves next.

Why a seam: cross-session micro-batching needs per-session delays/prefixes the policy API cannot
take yet; when it can, a MicroBatch scheduler returns several sessions here and nothing else changes.
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
