"""Bounded waits on a condition: the only way tests synchronise with threads, processes and the network."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar, cast

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold in time (an AssertionError, so pytest reports it as a test failure)."""


def _polls(cond: Callable[[], T], timeout: float, interval: float, message: str) -> Generator[float, None, T]:
    """Check `cond` until truthy (returned as the generator's value); yields how long to pause between checks.

    `cond` is checked at least once and once more at the deadline, so a slow poll never loses a late success.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {message} (last value: {value!r})")
        yield min(interval, left)


def wait_until(cond: Callable[[], T], timeout: float, interval: float = 0.05, message: str = "condition") -> T:
    """Poll `cond()` until it returns something truthy and return that value.

    Raises :class:`WaitTimeout` naming `message`, the timeout and the last value seen.
    """
    polls = _polls(cond, timeout, interval, message)
    try:
        while True:
            time.sleep(next(polls))
    except StopIteration as done:
        return cast(T, done.value)  # StopIteration.value is untyped: here it is _polls's return value, a T


async def wait_until_async(
    cond: Callable[[], T],
    timeout: float,
    interval: float = 0.05,
    message: str = "condition",
    pause: Callable[[float], Awaitable[object]] | None = None,
) -> T:
    """:func:`wait_until` for code on an event loop: yields with `pause(interval)` (default `asyncio.sleep`;
    Textual tests pass `pilot.pause`) so the app keeps running between polls."""
    sleep = pause or asyncio.sleep
    polls = _polls(cond, timeout, interval, message)
    try:
        while True:
            await sleep(next(polls))
    except StopIteration as done:
        return cast(T, done.value)  # StopIteration.value is untyped: here it is _polls's return value, a T


def assert_never(
    cond: Callable[[], object], duration: float, interval: float = 0.05, message: str = "condition"
) -> None:
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
