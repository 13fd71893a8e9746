"""The fleet router's rollout status, read about once a second into the store (never on the UI thread).

`lerobot-fleet router` keeps the rollout (wire/rollout.py); this poller asks it with `ops.send_rollout(status)` on
its own thread, through the live source's session while it is linked, and writes each answer (or why there was
none) with `FleetStore.set_rollout`, which keeps the time of the read: the view marks the rollout old when the last
good read is more than 3 s old or the latest failed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lerobot_policy_remote.wire.rollout import RolloutCommand, RolloutReply

from ..ops import send_rollout
from ..store import FleetStore
from ..ui_gate import UiGate

if TYPE_CHECKING:
    import zenoh

__all__ = ["POLL_S", "RolloutActor", "poll_rollout", "rollout_loop"]

POLL_S = 1.0  # seconds between status reads
READ_TIMEOUT_S = 0.8  # one read waits at most this long, so reads do not pile up behind a silent router


@runtime_checkable
class RolloutActor(Protocol):
    """A source that can send rollout commands (the app asks through it, on a worker thread)."""

    def rollout(self, command: RolloutCommand) -> RolloutReply: ...


def poll_rollout(session: zenoh.Session, store: FleetStore, timeout: float = READ_TIMEOUT_S) -> None:
    """One read: the status into the store, or why there was none."""
    try:
        reply = send_rollout(session, RolloutCommand("status"), timeout)
    except Exception as exc:  # the session closed under us, the router went away mid-query
        store.set_rollout(None, f"rollout status query failed: {exc}"[:200])
        return
    if reply.ok:
        store.set_rollout(reply.status)
    else:
        store.set_rollout(None, reply.message)


def rollout_loop(
    store: FleetStore,
    session_of: Callable[[], zenoh.Session | None],
    gate: UiGate,
    stop: threading.Event,
    period_s: float = POLL_S,
) -> None:
    """Read every `period_s` while `session_of()` gives a linked session (None: not connected, nothing read: the
    last good status ages and turns old)."""
    while not stop.wait(period_s):
        session = session_of()
        if session is None:
            store.set_rollout(None, "not connected to the router")
            continue
        gate.wait()
        poll_rollout(session, store)
