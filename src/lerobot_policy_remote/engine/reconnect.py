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
    """The reconnect policy (pure: the engine feeds it events and asks `due`).

    `token_grace_s` > 0 (several routers): a lost server token may come back through another router
    within the grace, and the session is kept; 0 (one router): a lost token ends the session at once.
    """

    def __init__(self, initial_s: float, max_s: float, token_grace_s: float = 0.0) -> None:
        self.backoff = Backoff(initial_s, max_s)
        self.token_grace_s = token_grace_s
        self.needed = True  # no session yet
        self.token_gone_at: float | None = None  # the bound replica's token went away (grace running)
        self._replacement = False  # another replica appeared during the grace: reconnect without waiting

    def token_lost(self, now: float) -> None:
        if self.token_gone_at is None:
            self.token_gone_at = now

    def token_expired(self, now: float) -> bool:
        """True once when the bound replica's token stayed away for the grace: give the session up."""
        gone = self.token_gone_at
        if gone is None or now - gone < self.token_grace_s:
            return False
        self.token_gone_at = None
        return True

    def due(self, now: float) -> bool:
        return self.needed and self.backoff.due(now)

    def lost(self, now: float) -> None:
        """The session is gone: the first retry waits one backoff step (a change cuts it short)."""
        self.needed = True
        if self._replacement:
            self._replacement = False
            self.backoff.now(now)
        else:
            self.backoff.defer(now)

    def failed(self, now: float) -> float:
        return self.backoff.defer(now)

    def retry_now(self, now: float) -> None:
        self.backoff.reset()
        self.backoff.now(now)

    def succeeded(self) -> None:
        self.needed = False
        self.token_gone_at = None
        self._replacement = False
        self.backoff.reset()

    def on_server_changes(self, changes: list[ServerChange], now: float, bound: str = "") -> bool:
        """A replica's token appeared while we look for one: try at once. Returns True when it did.

        During a token grace, the bound replica coming back keeps the session; another replica
        appearing ends the grace at once (the old one is not coming back: kill -9 and a replacement).
        """
        if self.token_gone_at is not None:
            if any(c.alive and c.replica == bound for c in changes):
                self.token_gone_at = None
            elif any(c.alive for c in changes):
                self.token_gone_at = float("-inf")
                self._replacement = True
        if self.needed and any(c.alive for c in changes):
            self.backoff.now(now)
            return True
        return False
