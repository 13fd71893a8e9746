"""Seats: who may open a session here (capabilities, the cordon, a full replica's idle seat), and its teardown.

Why a piece of its own: the session queryable, the housekeeper's liveliness GC and the server's stop all open or
close sessions; each is handed this object, none calls back into the server. The zenoh links a session's
publishers are declared on (`z`, `direct`) and `warmed_up` are set by the server once it has them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..shared_memory import shm_zids
from ..wire.codes import Refusal
from ..wire.keys import ServiceKeys, check_id
from ..wire.messages import SessionAck, SessionOpen
from ..wire.text import printable
from .backend_base import Backend
from .capabilities import Capabilities, check_open
from .cordon import Cordon
from .lifecycle import Lifecycle
from .manifest import Manifest
from .metrics import ServerMetrics
from .sessions import Registry, Session, declare_action_publisher, new_session_id, reply_terms

log = logging.getLogger("lerobot.policy_server")


class Seats:
    """Opens (validate in pure CPU, then register) and closes sessions; the only writer of the registry."""

    def __init__(
        self,
        *,
        manifest: Manifest,
        caps: Capabilities,
        backend: Backend,
        registry: Registry,
        lifecycle: Lifecycle,
        cordon: Cordon,
        metrics: ServerMetrics,
        keys: ServiceKeys,
        replica: str,
    ) -> None:
        self.manifest, self.caps, self.backend, self.registry = manifest, caps, backend, registry
        self.lifecycle, self.cordon, self.metrics, self.keys, self.replica = lifecycle, cordon, metrics, keys, replica
        self.z: Any = None  # the zenoh session (set by the server once open)
        self.direct: Any = None  # the loopback listener (direct.py), when this server offers one
        self.warmed_up = False

    def open(self, req: SessionOpen) -> SessionAck:
        """Validate (pure CPU) and register; re-open by the same client replaces its session."""
        check_id(req.client_uuid, "client_uuid")
        c = self.caps
        with self.registry.lock:
            same = self.registry.get(req.client_uuid) is not None
            verdict = self.cordon.admit(check_open(req, c, self.registry.count(), self.lifecycle.draining, same), same)
            if (
                verdict.code == Refusal.SERVER_FULL
                and c.serving_mode == "shared"
                and not req.dry_run
                and self._reclaim_idle_seat()
            ):
                verdict = check_open(req, c, self.registry.count(), self.lifecycle.draining, same)
            base = dict(
                replica=self.replica,
                model=self.backend.model_info,
                action_names=list(c.action_names),
                chunk_size=c.chunk_size,
                trained_fps=c.trained_fps,
                supports_rtc=c.supports_rtc,
                serving_mode=c.serving_mode,
                warmed_up=self.warmed_up,
                max_sessions=c.max_sessions,
                image_sizes={k: [int(v[-2]), int(v[-1])] for k, v in c.image_shapes.items() if len(v) >= 2},
                shm_zids=shm_zids(self.z),
                direct_endpoints=self.direct.endpoints if self.direct is not None else [],
            )
            if not verdict.ok:
                self.metrics.rejected.labels(verdict.code).inc()
                log.info(
                    "session refused for %s: %s %s", req.client_uuid, verdict.code, printable(verdict.message, 300)
                )
                return SessionAck(
                    False,
                    verdict.code,
                    verdict.message,
                    warnings=verdict.warnings,
                    active_sessions=self.registry.count(),
                    **base,
                )
            if req.dry_run:  # doctor: every check passed; nothing is registered, nothing to close
                return SessionAck(
                    True,
                    Refusal.OK,
                    "dry run: this robot would be accepted (no session opened)",
                    warnings=verdict.warnings,
                    active_sessions=self.registry.count(),
                    action_names_checked=verdict.names_checked,
                    **base,
                )
            session = Session(
                new_session_id(),
                req.client_uuid,
                self.backend.new_session_state(),
                req.rtc if verdict.rtc_active else None,
                verdict.schema_version,
                req.task,
                dict(req.tags),
            )
            key = self.keys.robot(req.client_uuid, "action")
            session.pub = declare_action_publisher(self.z, key)
            session.pub_batched = declare_action_publisher(self.z, key, express=False)
            if self.direct is not None:
                session.direct_pub = declare_action_publisher(self.direct.z, key)
            session.reply_dtype, session.reply_max_error, session.reply_model_space = reply_terms(
                req, session.rtc is not None
            )
            self.backend.on_session_open(session.state)
            old = self.registry.add(session)
        if old is not None:
            self._release(old, "replaced")
        self.metrics.opened.inc()
        self.metrics.active.set(self.registry.count())
        log.info("session %s opened for %s (rtc=%s)", session.session_id, req.client_uuid, bool(session.rtc))
        return SessionAck(
            True,
            Refusal.OK,
            "",
            session.session_id,
            rtc_active=session.rtc is not None,
            schema_version=verdict.schema_version,
            warnings=verdict.warnings,
            active_sessions=self.registry.count(),
            action_names_checked=verdict.names_checked,
            reply_dtype=session.reply_dtype,
            reply_model_space=session.reply_model_space,
            **base,
        )

    def _reclaim_idle_seat(self) -> bool:
        """Full (shared mode; an exclusive robot keeps its seat): free the seat of the longest-idle session if its
        robot sent nothing for `reclaim_idle_s`.

        A robot whose link flapped may re-handshake on another replica while its token comes back here, so its
        old session is never collected: such ghosts filled replicas and kept waiting robots out (48 robots of 1,000
        in `lerobot-fleet simulate`). A paused robot that loses its seat this way is told `unknown_session` on its
        next observation and re-handshakes."""
        limit = self.manifest.reclaim_idle_s
        now = time.monotonic()
        idle = max(self.registry.all(), key=lambda s: now - s.last_obs, default=None)
        if limit <= 0 or idle is None or now - idle.last_obs < limit:
            return False
        log.info(
            "replica full: session of %s idle for %.0f s gives its seat to a robot asking for one",
            idle.client_uuid,
            now - idle.last_obs,
        )
        self.close(idle, "idle_reclaimed")
        return True

    def close(self, s: Session, reason: str) -> None:
        """Remove `s` if it is still this client's session, then release it (GC, reclaim, stop)."""
        if self.registry.remove(s.client_uuid) is s:
            self._release(s, reason)
            self.metrics.active.set(self.registry.count())

    def _release(self, s: Session, reason: str) -> None:
        s.closed = True
        s.mailbox.clear()
        self.metrics.closed.labels(reason).inc()
        self.metrics.forget_client(s.client_uuid)
        for pub in (s.pub, s.pub_batched, s.direct_pub):
            if pub is None:
                continue
            try:
                pub.undeclare()
            except Exception as exc:  # the session is closing or closed: the publisher goes with it
                log.debug("publisher undeclare for %s failed: %s", s.client_uuid, exc)
        log.info("session %s of %s closed (%s)", s.session_id, s.client_uuid, reason)
