"""Torch's CPU threads belong to the inference worker thread, not to the main thread.

OpenMP (torch's intra-op backend) keeps one thread team per thread that starts a parallel region. Once the
main thread has run parallel torch ops (loading weights, warm-up), a second thread's team runs at about half
speed on a small box: a small ACT measured 21 ms per pass on the thread that first used torch and 40-45 ms on
another one, while every peer server runs its model on its main thread. So the main thread loads
with one torch thread (no team), and the worker thread, the one that serves, takes the full count and runs
the warm-up passes itself before the replica is announced (its first robot's pass finds the team built).
"""

from __future__ import annotations

from typing import Any

_full: int | None = None  # torch's own count, read before the first release (a second backend reads 1 otherwise)


def release_main_thread(torch: Any) -> int:
    """Called on the loading thread before any torch work: returns the count the worker should take."""
    global _full
    if _full is None:
        _full = int(torch.get_num_threads())
    torch.set_num_threads(1)  # per-thread in OpenMP: only this thread goes single-threaded
    return _full


def claim(torch: Any, n: int) -> None:
    """Called on the serving thread before its first pass."""
    torch.set_num_threads(max(1, n))
