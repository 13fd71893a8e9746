"""When the worker re-handshakes: at once when something changed, on a backoff when nothing did."""

from __future__ import annotations

from .transport import ServerChange


class Backoff:
    """`defer` after a failure; `now` when a reason to retry at once arrives; `reset` after success."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.delay_s = initial_s
        self.next_at = 0.0

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def defer(self, now: float) -> float:
        """Schedule the next attempt one step later than the last; returns the wait."""
        wait = self.delay_s
        self.next_at = now + wait
        self.delay_s = min(self.delay_s * 2, self.max_s)
        return wait

    def now(self, now: float) -> None:
        self.next_at = now

    def reset(self) -> None:
        self.delay_s = self.initial_s


class Reconnector:
    """The reconnect policy (pure: the engine feeds it events and asks `due`)."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.backoff = Backoff(initial_s, max_s)
        self.needed = True  # no session yet

    def due(self, now: float) -> bool:
        return self.needed and self.backoff.due(now)

    def lost(self, now: float) -> None:
        """The session is gone: the first retry waits one backoff step (a change cuts it short)."""
        self.needed = True
        self.backoff.defer(now)

    def failed(self, now: float) -> float:
        return self.backoff.defer(now)

    def retry_now(self, now: float) -> None:
        self.backoff.reset()
        self.backoff.now(now)

    def succeeded(self) -> None:
        self.needed = False
        self.backoff.reset()

    def on_server_changes(self, changes: list[ServerChange], now: float) -> bool:
        """A replica's token appeared while we look for one: try at once. Returns True when it did."""
        if self.needed and any(c.alive for c in changes):
            self.backoff.now(now)
            return True
        return False
