"""What zenoh hands the console, held until the decoder takes it: the subscriptions and the inbox.

Liveliness arrives through a callback that only appends `(kind, key, None)` to a bounded deque and
returns. Telemetry and audit publications (the fleet's bulk: up to 20,000 samples/s) wait in zenoh's own
bounded rings, with no Python callback per sample, so zenoh's threads never take the GIL for them; the
decoder thread moves them into the inbox in batches (`pull`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from ..ops import ANY
from ..ui_gate import UiGate

log = logging.getLogger(__name__)

INBOX_MAX = 50_000
# Audit publications held between two decoder passes (0.2 s). Each holds one or more lines: a replica publishes its
# lines every 0.1 s or 64 at a time, so 4,096 is about 2,000 replicas' worth (and up to 64 times that many lines).
RING_AUDIT = 4_096
GATE_EVERY = 64  # samples between two looks at the UI gate (~1 ms of decoding)
# How long the robots have to answer the telemetry query sent on connecting (a robot answers on its worker's next pass)
ASK_TELEMETRY_S = 2.0

# (kind, key expression, payload): kind alive+ | alive- | telemetry | audit (one publication: one or more lines)
Entry = tuple[str, str, bytes | None]


class Intake:
    """The subscriptions of one connection and the inbox they fill (bounded: the oldest entries go first)."""

    def __init__(self) -> None:
        self.inbox: deque[Entry] = deque(maxlen=INBOX_MAX)
        self._decls: list[Any] = []
        self._rings: list[tuple[str, Any]] = []  # (kind, ring-channel subscriber), read by the decoder thread
        self._overflow = 0  # liveliness entries pushed out of a full inbox (counted on zenoh's threads)
        self._overflow_lock = threading.Lock()

    def declare(self, session: Any, live_session: Any) -> None:
        """Subscribe. Liveliness goes on a session of its own: on the data session, a liveliness subscriber with
        2,000 robot tokens cut the telemetry that session received by more than half (docs/decisions.md)."""
        import zenoh

        live = live_session.liveliness()
        self._decls = [
            live.declare_subscriber(ANY.server("*", "alive"), self._deposit, history=True),
            live.declare_subscriber(ANY.robot("*", "alive"), self._deposit, history=True),
        ]
        ring = zenoh.handlers.RingChannel  # a full ring drops its oldest samples (telemetry is state)
        self._rings = [
            ("telemetry", session.declare_subscriber(ANY.robot("*", "telemetry"), ring(INBOX_MAX))),
            ("audit", session.declare_subscriber(ANY.server("*", "audit"), ring(RING_AUDIT))),
        ]
        self._decls += [sub for _, sub in self._rings]

    def ask_telemetry(self, session: Any) -> None:
        """Ask every robot for its telemetry now: the table fills at once on connecting, not a telemetry period
        (up to a quiet robot's slowest) later. Replies arrive on zenoh's threads and are deposited like samples."""
        session.get(ANY.robot("*", "telemetry"), self._deposit_reply, timeout=ASK_TELEMETRY_S)

    def undeclare(self) -> None:
        for d in self._decls:
            try:
                d.undeclare()
            except Exception:  # teardown: the router may already be gone
                log.debug("undeclare failed during stop", exc_info=True)
        self._decls, self._rings = [], []

    def _deposit(self, sample: Any) -> None:
        """Zenoh callback: copy out and return (never decode, lock the store, or touch widgets here)."""
        import zenoh

        if len(self.inbox) >= INBOX_MAX:
            with self._overflow_lock:
                self._overflow += 1
        self.inbox.append(("alive+" if sample.kind == zenoh.SampleKind.PUT else "alive-", str(sample.key_expr), None))

    def _deposit_reply(self, reply: Any) -> None:
        """Zenoh callback: a robot's telemetry reply goes to the inbox as a telemetry sample would."""
        if reply.ok is None:
            return
        if len(self.inbox) >= INBOX_MAX:
            with self._overflow_lock:
                self._overflow += 1
        self.inbox.append(("telemetry", str(reply.ok.key_expr), reply.ok.payload.to_bytes()))

    def pull(self, gate: UiGate) -> int:
        """Move what the rings hold into the inbox (decoder thread). Returns the entries dropped since the last
        call: pushed out of a full inbox here or by a liveliness deposit."""
        inbox = self.inbox
        dropped = 0
        for kind, sub in self._rings:
            try:
                n = 0
                while (smp := sub.try_recv()) is not None:
                    n += 1
                    if not n % GATE_EVERY:
                        gate.wait()
                    if len(inbox) >= INBOX_MAX:
                        dropped += 1
                    inbox.append((kind, str(smp.key_expr), smp.payload.to_bytes()))
            except Exception:  # the session closed under us (router gone, stop): the poller reports it
                log.debug("ring subscriber read failed", exc_info=True)
        with self._overflow_lock:
            dropped, self._overflow = dropped + self._overflow, 0
        return dropped
