"""Housekeeping thread: load gauge, unknown-session replies, liveliness GC, drain deadline.

Runs every 100 ms off the callbacks and off the inference worker, so neither ever waits on it.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import TYPE_CHECKING, Any

import zenoh

from ..wire.codec import encode
from ..wire.codes import EventKind
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import parse_key
from ..wire.messages import SCHEMA_VERSION, EventMsg

if TYPE_CHECKING:
    from .service import PolicyServer

UNKNOWN_REPLY_INTERVAL_S = 1.0  # at most one unknown_session event per robot per second


class Housekeeper:
    """State the callbacks deposit into (unknown robots, live robot tokens) and the loop that acts on it."""

    def __init__(self, server: PolicyServer) -> None:
        self.srv = server
        self.unknown: collections.deque[str] = collections.deque(maxlen=256)
        self._unknown_last: dict[str, float] = {}
        self._alive: set[str] = set()
        self._alive_lock = threading.Lock()
        self.load = 0.0

    # ------------------------------------------------------------------ callback side (deposit only)
    def on_robot_alive(self, sample: Any) -> None:
        try:
            robot = parse_key(str(sample.key_expr)).robot
        except WireError:
            return  # a foreign token under our wildcard: not a robot of ours
        with self._alive_lock:
            if sample.kind == zenoh.SampleKind.PUT:
                self._alive.add(robot)
            else:
                self._alive.discard(robot)

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        srv = self.srv
        last_busy, last_t = 0.0, time.perf_counter()
        while not srv.stopped.wait(0.1):
            now = time.perf_counter()
            if now - last_t >= 1.0:
                busy = srv.worker.busy_s
                self.load = min(1.0, (busy - last_busy) / (now - last_t))
                srv.metrics.load.set(self.load)
                last_busy, last_t = busy, now
            self._reply_unknown()
            self._collect_gone()
            srv.metrics.active.set(srv.registry.count())
            if srv.draining.is_set() and not srv.drained.is_set():
                if not srv.worker_alive():
                    srv.drained.set()
                elif time.monotonic() - srv.drain_started > srv.manifest.drain_timeout_s:
                    srv.progress("Drain timeout reached; exiting with work still pending")
                    srv.drained.set()

    def _reply_unknown(self) -> None:
        srv = self.srv
        now = time.monotonic()
        while self.unknown:
            client = self.unknown.popleft()
            srv.metrics.unknown.inc()
            if now - self._unknown_last.get(client, -1e9) < UNKNOWN_REPLY_INTERVAL_S:
                continue
            if len(self._unknown_last) > 4096:
                self._unknown_last.clear()
            self._unknown_last[client] = now
            h = Header(SCHEMA_VERSION, MsgType.EVENT, 0, 0, 0, 0)
            srv.z.put(srv.keys.robot(client, "action"),
                      encode(EventMsg(EventKind.UNKNOWN_SESSION, "no session for this robot on this replica: re-handshake")),
                      attachment=h.pack(), congestion_control=zenoh.CongestionControl.DROP,
                      priority=zenoh.Priority.INTERACTIVE_HIGH, express=True)

    def _collect_gone(self) -> None:
        """GC sessions whose robot token has been gone for session_grace_s (never merely idle ones)."""
        srv = self.srv
        now = time.monotonic()
        with self._alive_lock:
            alive = set(self._alive)
        for s in srv.registry.all():
            if s.client_uuid in alive:
                s.gone_since = None
            elif s.gone_since is None:
                s.gone_since = now
            elif now - s.gone_since >= srv.manifest.session_grace_s:
                srv.close_session(s, "liveliness_lost")
