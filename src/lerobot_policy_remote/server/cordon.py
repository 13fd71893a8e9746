"""Cordon: an operator stops a replica from admitting new sessions while its current ones keep streaming.

`lerobot-fleet cordon|uncordon REPLICA` (and `C`/`U` in the console) query `server/<replica>/cordon` with a
`CordonRequest`; the replica answers a `CordonAck` and reports `ServerStatus.cordoned`. While cordoned, a session
open from a robot that holds no session here is refused with `Refusal.CORDONED`, which robots treat like a full
replica: they try the next one. A robot that already holds a session may open it again (a link that flapped), so
the robots on the replica keep streaming. Only the flag lives here; the server asks `admit` at every open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..wire.codec import decode
from ..wire.codes import Refusal
from ..wire.errors import WireError
from ..wire.messages import CordonAck, CordonRequest
from .capabilities import OpenVerdict


class Cordon:
    """The cordon flag of one replica (thread-safe: zenoh callbacks set and read it)."""

    def __init__(self, replica: str, progress: Callable[[str], None] = print) -> None:
        self.replica = replica
        self.progress = progress
        self._lock = threading.Lock()
        self._on = False

    @property
    def on(self) -> bool:
        return self._on

    def set(self, on: bool, why: str = "") -> bool:
        """Cordon or uncordon; True when that changed the state."""
        with self._lock:
            changed, self._on = self._on != on, on
        if changed:
            self.progress(
                f"{'Cordoned' if on else 'Uncordoned'} ({why or 'requested'}): "
                + ("no new sessions; current sessions keep streaming" if on else "admitting new sessions again")
            )
        return changed

    def admit(self, verdict: OpenVerdict, same_client: bool) -> OpenVerdict:
        """`verdict` from the capability checks, refused with `cordoned` when cordoned and the robot is new here.

        Contract refusals stand (the robot must hear them whatever the cordon); a full replica that is cordoned
        says `cordoned` (a seat that frees up goes to no new robot)."""
        if not self._on or same_client or not (verdict.ok or verdict.code == Refusal.SERVER_FULL):
            return verdict
        return OpenVerdict(
            False,
            Refusal.CORDONED,
            f"replica {self.replica} is cordoned: it admits no new sessions; try another replica",
        )

    def answer(self, payload: bytes | None, sessions: list[str]) -> CordonAck:
        """A cordon query's reply: the request applied, with the sessions that keep streaming here."""
        try:
            req = decode(CordonRequest, payload if payload is not None else b"\x80")
        except WireError as exc:
            return CordonAck(False, self._on, f"malformed cordon request: {exc}")
        changed = self.set(req.cordon, f"{req.reason or 'operator'} (by {req.requested_by or 'operator'})")
        word = "cordoned" if req.cordon else "uncordoned"
        state = word if changed else f"already {word}"
        detail = (
            "; new robots go to other replicas, its sessions keep streaming"
            if req.cordon
            else "; it admits new sessions again"
        )
        return CordonAck(True, self._on, state + detail, sessions)
