"""Housekeeping thread: load gauge, unknown-session replies, liveliness GC, drain deadline.

Runs every 100 ms off the callbacks and off the inference worker, so neither ever waits on it.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

from ..wire.codec import encode
from ..wire.codes import EventKind
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import ServiceKeys, parse_key
from ..wire.messages import SCHEMA_VERSION, EventMsg
from .lifecycle import Lifecycle
from .load import LoadGauge
from .metrics import ServerMetrics
from .rate import RequestRate
from .sessions import Registry, Session

UNKNOWN_REPLY_INTERVAL_S = 1.0  # at most one unknown_session event per robot per second


class Housekeeper:
    """State the callbacks deposit into (unknown robots, live robot tokens) and the loop that acts on it.

    Handed exactly what it uses: `publish(key, payload, attachment)` sends an event outside any session
    (the unknown_session reply), `close_session(session, reason)` is the seats' teardown (admission.py),
    `worker_alive()` is the worker's `alive`: nothing here calls back into the server.
    """

    def __init__(
        self,
        *,
        lifecycle: Lifecycle,
        load: LoadGauge,
        registry: Registry,
        metrics: ServerMetrics,
        keys: ServiceKeys,
        publish: Callable[[str, bytes, bytes], None],
        close_session: Callable[[Session, str], None],
        worker_alive: Callable[[], bool],
        session_grace_s: float,
        drain_timeout_s: float,
        progress: Callable[[str], None] = print,
        rate: RequestRate | None = None,
        unknown: collections.deque[tuple[str, int]] | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.load = load
        self.rate = rate
        self.registry = registry
        self.metrics = metrics
        self.keys = keys
        self.publish = publish
        self.close_session = close_session
        self.worker_alive = worker_alive
        self.session_grace_s = session_grace_s
        self.drain_timeout_s = drain_timeout_s
        self.progress = progress
        # (robot, its obs' session epoch): the observation callback's deposits, handed in by whoever owns that callback
        self.unknown: collections.deque[tuple[str, int]] = collections.deque(maxlen=256) if unknown is None else unknown
        self._unknown_last: dict[str, float] = {}
        self._alive: set[str] = set()
        self._alive_lock = threading.Lock()

    # ------------------------------------------------------------------ callback side (deposit only)
    def on_robot_alive(self, sample: Any) -> None:
        try:
            robot = parse_key(str(sample.key_expr)).robot
        except WireError:
            return  # a foreign token under our wildcard: not a robot of ours
        if robot is None:
            return  # a key of ours that names no robot (the wildcard takes robots' tokens only)
        with self._alive_lock:
            if sample.kind == zenoh.SampleKind.PUT:
                self._alive.add(robot)
            else:
                self._alive.discard(robot)

    # ------------------------------------------------------------------ loop
    def run(self) -> None:
        while not self.lifecycle.wait_stopped(0.1):
            self.tick()

    def tick(self) -> None:
        """One round (every 100 ms): load gauge, request rate, unknown replies, liveliness GC, active gauge, drain
        end."""
        if self.load.update():
            self.metrics.load.set(self.load.value)
        if self.rate is not None:
            self.rate.update()
        self._reply_unknown()
        self._collect_gone()
        self.metrics.active.set(self.registry.count())
        self._check_drain()

    def _check_drain(self) -> None:
        lc = self.lifecycle
        if not lc.draining or lc.drained:
            return
        if not self.worker_alive():
            lc.mark_drained()
        elif lc.drain_elapsed() > self.drain_timeout_s and lc.mark_drained():
            self.progress("Drain timeout reached; exiting with work still pending")

    def _reply_unknown(self) -> None:
        now = time.monotonic()
        while self.unknown:
            client, epoch = self.unknown.popleft()
            self.metrics.unknown.inc()
            if now - self._unknown_last.get(client, -1e9) < UNKNOWN_REPLY_INTERVAL_S:
                continue
            if len(self._unknown_last) > 4096:
                self._unknown_last.clear()
            self._unknown_last[client] = now
            h = Header(SCHEMA_VERSION, MsgType.EVENT, 0, 0, 0, epoch)  # the robot acts on its own session's epoch only
            self.publish(
                self.keys.robot(client, "action"),
                encode(EventMsg(EventKind.UNKNOWN_SESSION, "no session for this robot on this replica: re-handshake")),
                h.pack(),
            )

    def _collect_gone(self) -> None:
        """GC sessions whose robot token has been gone for session_grace_s (never merely idle ones)."""
        now = time.monotonic()
        with self._alive_lock:
            alive = set(self._alive)
        for s in self.registry.all():
            if s.client_uuid in alive:
                s.gone_since = None
            elif s.gone_since is None:
                s.gone_since = now
            elif now - s.gone_since >= self.session_grace_s:
                self.close_session(s, "liveliness_lost")
