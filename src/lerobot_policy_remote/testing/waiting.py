"""Bounded waits on a condition: the only way tests synchronise with threads, processes and the network."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold in time (an AssertionError, so pytest reports it as a test failure)."""


def wait_until(cond: Callable[[], T], timeout: float, interval: float = 0.05, message: str = "condition") -> T:
    """Poll `cond()` until it returns something truthy and return that value.

    Raises :class:`WaitTimeout` naming `message`, the timeout and the last value seen. `cond` is always
    evaluated at least once, and once more at the deadline, so a slow poll never loses a late success.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {message} (last value: {value!r})")
        time.sleep(min(interval, left))


def assert_never(cond: Callable[[], object], duration: float, interval: float = 0.05, message: str = "condition") -> None:
    """Watch for `duration` seconds that `cond()` stays falsy: a bounded wait for something that must NOT happen."""
    deadline = time.monotonic() + duration
    while True:
        value = cond()
        if value:
            raise AssertionError(f"{message} happened (value {value!r}) during a {duration:g}s watch where it must not")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(interval, left))
