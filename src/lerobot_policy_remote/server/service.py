"""PolicyServer: the zenoh control plane, the data plane, the worker and housekeeping threads.

Threads and what they may do:
- zenoh callbacks (obs subscriber, liveliness subscriber, queryables): deposit or validate-and-reply
  in pure CPU, never inference, never waiting on another thread;
- the inference worker (one, worker.py): decode, pre/post-process, predict (alone or batched), publish, audit;
- housekeeping (one, housekeeping.py): liveliness GC after a grace period, unknown-session replies, load gauge, drain.
This module builds the collaborators and wires them together (the worker and the housekeeper get
exactly what they use, never this object); it holds start/drain/stop, the control-plane queryables
and the observation callback. Serving / draining / drained / stopped live in `Lifecycle` alone.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

from ..shared_memory import shm_zids
from ..wire.codec import decode, encode
from ..wire.codes import EventKind, Refusal
from ..wire.errors import Reason, WireError
from ..wire.header import HEADER_SIZE, peek_epoch
from ..wire.keys import BRIEF_STATUS, check_id, parse_key
from ..wire.limits import WireLimits
from ..wire.messages import (
    CordonAck,
    DrainAck,
    DrainRequest,
    ResetAck,
    ResetRequest,
    ServerStatus,
    SessionAck,
    SessionOpen,
)
from ..wire.text import printable
from ..zenoh_config import OBS_SLACK_BYTES, ZenohSettings, open_session
from .audit import Auditor, DebugCapture
from .backend import Backend, LerobotBackend
from .capabilities import check_open
from .cordon import Cordon
from .decode_pool import DecodePool
from .direct import DirectListener, eligible
from .housekeeping import Housekeeper
from .lifecycle import Lifecycle
from .load import LoadGauge
from .manifest import Manifest
from .metrics import HealthServer, ServerMetrics
from .rate import RequestRate
from .scheduler import Scheduler, scheduler_for
from .sessions import Mail, Registry, Session, declare_action_publisher, new_session_id, reply_terms
from .worker import Worker

log = logging.getLogger("lerobot.policy_server")


def zenoh_where(z: ZenohSettings) -> str:
    """`connect=a,b listen=c`: the endpoints this session dials and listens on (no spaces inside a value)."""
    parts = ([f"connect={','.join(z.connect_endpoints)}"] if z.connect_endpoints else []) + \
            ([f"listen={','.join(z.listen_endpoints)}"] if z.listen_endpoints else [])
    return " ".join(parts)


class PolicyServer:
    """One model, many robot sessions. `start()` returns once it serves; `drain()`/`stop()` end it."""

    def __init__(self, manifest: Manifest, backend: Backend | None = None, *, scheduler: Scheduler | None = None,
                 progress: Callable[[str], None] = print, audit_where: str = "",
                 settle: Callable[[], object] | None = None) -> None:
        manifest.validate()
        self.audit_where = audit_where  # the CLI's --audit_log, for the start line
        # Run after warm-up, before any robot can find this replica: the CLI's full collection + gc.freeze holds
        # the GIL for ~0.25 s with a model loaded, which would delay the first handshake (a drain's spare).
        self._settle = settle
        self.manifest = manifest
        self.progress = progress
        self.backend: Backend = backend if backend is not None else LerobotBackend(manifest, progress)
        self.caps = self.backend.caps
        self.keys = manifest.keys()
        self.replica = manifest.replica()
        self.batch_limit = manifest.batching.limit(self.caps.serving_mode != "exclusive" and self.backend.batches)
        self.scheduler: Scheduler = scheduler or scheduler_for(self.batch_limit)
        self.registry = Registry()
        self.metrics = ServerMetrics(self.replica)
        self.limits = WireLimits(max_payload_bytes=manifest.max_obs_bytes)
        self.lifecycle = Lifecycle()
        self.load = LoadGauge()
        self.requests_rate = RequestRate(self.metrics.requests_served)  # ServerStatus.requests_per_s (rate.py)
        self.cordon = Cordon(self.replica, progress)  # admits no new sessions while on (cordon.py)
        self.z: Any = None
        self.direct: DirectListener | None = None  # the loopback link for robots on this host (direct.py)
        self.capture = DebugCapture(manifest.debug.capture_dir, manifest.debug.capture_max, manifest) if manifest.debug.capture_dir else None
        self.auditor = Auditor(self._publish_audit)  # logs only until zenoh is open
        self.worker = Worker(
            lifecycle=self.lifecycle, load=self.load, registry=self.registry, scheduler=self.scheduler, backend=self.backend,
            metrics=self.metrics, auditor=self.auditor, replica=self.replica, limits=self.limits, batch_limit=self.batch_limit,
            max_wait_s=None if manifest.batching.max_wait_ms is None else manifest.batching.max_wait_ms / 1e3, capture=self.capture, progress=progress,
        )
        self.decoder = DecodePool(self.worker.decode, manifest.max_obs_bytes)  # decodes off the worker (decode_pool.py)
        self.worker.prefetch = self.decoder.submit
        self.housekeeper = Housekeeper(
            lifecycle=self.lifecycle, load=self.load, registry=self.registry, metrics=self.metrics, keys=self.keys,
            publish=self._publish_event, close_session=self.close_session, worker_alive=self.worker_alive,
            session_grace_s=manifest.session_grace_s, drain_timeout_s=manifest.drain_timeout_s, progress=progress,
            rate=self.requests_rate,
        )
        self.warmed_up = False
        self.router_refusal = ""  # the router's access control refuses this replica (router_check.py): /healthz fails
        self.health: HealthServer | None = None
        self._audit_key = self.keys.server(self.replica, "audit")
        self._audit_pub: Any = None  # declared once zenoh is open: a session put resolved the key on every line
        self._decls: list[Any] = []
        self._token: Any = None
        self._threads: list[threading.Thread] = []

    # ================================================================== lifecycle
    @property
    def service_key(self) -> str:
        return self.keys.base

    @property
    def health_port(self) -> int:
        return self.health.port if self.health else 0

    def start(self) -> PolicyServer:
        m = self.manifest
        worker = threading.Thread(target=self.worker.run, args=(self._warm_up,), name="inference-worker", daemon=True)
        worker.start()
        self._threads.append(worker)
        self.worker.ready.wait()
        if self.worker.startup_error is not None:
            raise self.worker.startup_error
        if self._settle is not None:
            self._settle()
        self.warmed_up = True
        self.metrics.max_sessions.set(self.caps.max_sessions)
        self.metrics.info.labels(self.replica, self.caps.policy_type, self.caps.fingerprint[:16], self.caps.serving_mode).set(1)
        if m.health_port:
            self.health = HealthServer(m.health_host, m.health_port, self.metrics, self.healthy).start()
        settings = self._zenoh_settings()
        self.progress(f"Connecting to zenoh ({settings.mode} {zenoh_where(settings)})...")
        self.z = open_session(settings)
        k, r = self.keys, self.replica
        self._decls += [
            self.z.declare_queryable(k.server(r, "status"), self._on_status),
            self.z.declare_queryable(k.session(r, "*"), self._on_session),
            self.z.declare_queryable(k.reset(r, "*"), self._on_reset),
            self.z.declare_queryable(k.server(r, "drain"), self._on_drain),
            self.z.declare_queryable(k.server(r, "cordon"), self._on_cordon),
            self.z.declare_subscriber(k.obs(r, "*"), self._on_obs),
            self.z.liveliness().declare_subscriber(k.robot("*", "alive"), self.housekeeper.on_robot_alive, history=True),
        ]
        if self.manifest.direct_link and eligible(settings):
            try:
                self.direct = DirectListener(settings, k.obs(r, "*"), self._on_direct_obs).start()
            except Exception as exc:  # robots on this host then use the router, as every other robot does
                log.warning("no direct link for robots on this host (%s): they go through the router", exc)
        self._audit_pub = self.z.declare_publisher(self._audit_key, congestion_control=zenoh.CongestionControl.DROP,
                                                   priority=zenoh.Priority.BACKGROUND)
        self._token = self.z.liveliness().declare_token(k.server(r, "alive"))
        self.decoder.start()
        housekeeping = threading.Thread(target=self.housekeeper.run, name="housekeeping", daemon=True)
        housekeeping.start()
        self._threads.append(housekeeping)
        self.metrics.worker_alive.set(1)
        self.progress(
            f"Policy server up: {self.service_key} replica={self.replica} model={self.backend.model_info.repo_or_path} "
            f"type={self.caps.policy_type} mode={self.caps.serving_mode} max_sessions={self.caps.max_sessions} "
            f"fingerprint={self.caps.fingerprint[:16]} rtc={self.caps.supports_rtc} max_batch={self.batch_limit} "
            f"zenoh={settings.mode} {zenoh_where(settings)} {self.endpoints_line()}"
            + (f" direct={self.direct.endpoint}" if self.direct is not None else "")
            + (f" {self.audit_where}" if self.audit_where else "")
        )
        return self

    def _warm_up(self) -> None:
        """Throwaway passes on the inference thread (Worker.run calls this there), before any robot can connect."""
        n = self.manifest.warmup_inferences
        if n:
            self.progress(f"Warming up ({n} inferences) on the inference thread...")
            self.backend.warmup(n, self.progress)

    def endpoints_line(self) -> str:
        """Where /healthz and /metrics listen, in the start line (and whether only this machine can reach them)."""
        if not self.health:
            return "healthz=off metrics=off (health_port=0)"
        host = self.manifest.health_host
        base = f"http://{host}:{self.health_port}"
        scope = " (this machine only: health_host=0.0.0.0 to scrape from elsewhere)" if host in ("127.0.0.1", "localhost", "::1") else ""
        return f"healthz={base}/healthz metrics={base}/metrics{scope}"

    def _publish_audit(self, text: str) -> None:
        """The auditor's sink: the audit key, droppable and at background priority (only while zenoh is open)."""
        pub = self._audit_pub
        if pub is not None:
            pub.put(text)

    def _publish_event(self, key: str, payload: bytes, attachment: bytes) -> None:
        """The housekeeper's sink: an event to a robot outside any session (same QoS as a session's publisher)."""
        if self.z is not None:
            self.z.put(key, payload, attachment=attachment, congestion_control=zenoh.CongestionControl.DROP,
                       priority=zenoh.Priority.INTERACTIVE_HIGH, express=True)

    def worker_alive(self) -> bool:
        return bool(self._threads) and self._threads[0].is_alive()

    def _zenoh_settings(self) -> ZenohSettings:
        """A batching server publishes a burst of chunks per pass: deepen the chunk priority's TX queue (unless set).
        No message larger than an observation `max_obs_bytes` allows is reassembled (unless set)."""
        z = self.manifest.zenoh_settings()
        if not z.max_message_bytes:
            z = dataclasses.replace(z, max_message_bytes=self.manifest.max_obs_bytes + OBS_SLACK_BYTES)
        if self.batch_limit > 1 and not z.tx_queue_interactive_high:
            return dataclasses.replace(z, tx_queue_interactive_high=16)
        return z

    def healthy(self) -> tuple[bool, str]:
        if self.lifecycle.draining:
            return False, "draining"
        if self.router_refusal:
            return False, self.router_refusal
        if not self.worker_alive():
            err = self.worker.error
            return False, "inference worker is not running" + (f": {err}" if err else "")
        return True, "ok"

    def metrics_url(self) -> str:
        if not self.health:
            return ""
        host = self.manifest.advertise_host or self.manifest.health_host
        return f"http://{host}:{self.health_port}/metrics"

    def drain(self, reason: str = "") -> DrainAck:
        """Stop accepting sessions, tell robots, drop the token; the housekeeping thread finishes the rest."""
        first = self.lifecycle.begin_drain()
        self.metrics.draining.set(1)
        sessions = self.registry.all()
        pending = sum(1 for s in sessions if s.mailbox.pending()) + self.worker.in_flight
        if first:
            self.progress(f"Draining ({reason or 'requested'}): {len(sessions)} session(s), {pending} pending request(s)")
            self._announce_drain(sessions)
            self.worker.wake.set()
        return DrainAck(True, "draining" if first else "already draining", [s.session_id for s in sessions], pending)

    def _announce_drain(self, sessions: list[Session]) -> None:
        """Every robot hears the drain, then the token goes (robots that missed a notice see the replica leave).

        The notices go batched (not express): sent express on each session's publisher, a burst of 250 overflowed the
        TX queue and most robots never heard it; they waited out the token grace before moving (2.2 s instead of
        about 1 s in `lerobot-fleet simulate`). Still droppable: a callback never blocks, and the token is the fallback."""
        for s in sessions:
            payload, attachment = s.event_message(EventKind.DRAINING, "server is draining: re-handshake with another replica", None)
            try:
                self.z.put(self.keys.robot(s.client_uuid, "action"), payload, attachment=attachment,
                           congestion_control=zenoh.CongestionControl.DROP, priority=zenoh.Priority.INTERACTIVE_HIGH, express=False)
            except Exception:  # the session is closing, or zenoh is: the token still goes
                log.debug("drain notice to %s failed", s.client_uuid, exc_info=True)
        self._drop_token()  # robots see the replica leave and ride their buffers

    def wait(self, timeout: float | None = None) -> bool:
        """True once drained (all pending work served, or the drain deadline passed)."""
        return self.lifecycle.wait_drained(timeout)

    def stop(self) -> None:
        """Tear everything down (idempotent). After a drain this is the clean exit."""
        if not self.lifecycle.stop():
            return
        self.worker.wake.set()
        for t in self._threads:
            t.join(timeout=10)
        self.decoder.stop()
        self.metrics.worker_alive.set(0)
        for d in self._decls:
            try:
                d.undeclare()
            except Exception as exc:  # teardown goes on: the session closes below anyway
                log.debug("undeclare at stop failed: %s", exc)
        self._decls.clear()
        pub, self._audit_pub = self._audit_pub, None
        if pub is not None:
            try:
                pub.undeclare()
            except Exception as exc:  # the session is closing or closed: the publisher goes with it
                log.debug("audit publisher undeclare at stop failed: %s", exc)
        self._drop_token()
        sessions = self.registry.all()
        for s in sessions:
            self.close_session(s, "shutdown")
        if sessions and (self.z is not None or self.direct is not None):
            time.sleep(0.2)  # let the last chunks/events leave before the transports close
        if self.direct is not None:
            self.direct.close()
        if self.z is not None:
            try:
                self.z.close()
            except Exception as exc:  # already closed by zenoh (router gone): nothing left to release
                log.debug("zenoh session close at stop failed: %s", exc)
        if self.health:
            self.health.stop()
        if self.capture:
            self.capture.close()

    def _drop_token(self) -> None:
        token, self._token = self._token, None  # a drain (zenoh callback or SIGTERM) and stop() may both get here
        if token is not None:
            try:
                token.undeclare()
            except Exception as exc:  # the session is closing or closed: the router drops the token with it
                log.debug("liveliness token undeclare failed: %s", exc)

    # ================================================================== control plane (callbacks)
    def status(self, sessions: bool = True) -> ServerStatus:
        """`sessions=False`: without the session list (a robot's discovery asks so: `wire.keys.BRIEF_STATUS`)."""
        c = self.caps
        stats = self.worker.stats
        return ServerStatus(
            replica=self.replica, model=self.backend.model_info, service=self.manifest.service,
            default_task=self.manifest.default_task, pin_task=self.manifest.pin_task, serving_mode=c.serving_mode,
            max_sessions=c.max_sessions, active_sessions=self.registry.count(), load=self.load.value,
            supports_rtc=c.supports_rtc, chunk_size=c.chunk_size, trained_fps=c.trained_fps, inference_ms_p50=stats.pass_ms_p50(),
            action_names=list(c.action_names), image_features=list(c.image_keys), state_dim=c.state_dim,
            schema_min=c.schema_min, schema_max=c.schema_max, metrics_url=self.metrics_url(),
            draining=self.lifecycle.draining, warmed_up=self.warmed_up, sessions=[s.info() for s in self.registry.all()] if sessions else [],
            max_batch=self.batch_limit, batch_size_mean=stats.mean_batch(), chunks_per_s=stats.chunks_per_s(),
            requests_per_s=round(self.requests_rate.value, 3), cordoned=self.cordon.on,
        )

    def _on_status(self, query: Any) -> None:
        with query:
            brief = BRIEF_STATUS in str(query.parameters).replace("&", ";").split(";")
            query.reply(self.keys.server(self.replica, "status"), encode(self.status(sessions=not brief)))

    def _key_robot(self, query: Any) -> str:
        """The robot a session/reset query speaks for: the id in its key (the router's ACL vouches for it)."""
        robot = parse_key(str(query.key_expr)).robot
        if robot is None:
            raise WireError("key", f"{query.key_expr} names no robot")
        return robot

    def _on_session(self, query: Any) -> None:
        with query:
            reply_key = self.keys.session(self.replica, "*")
            try:
                robot = self._key_robot(query)
                reply_key = self.keys.session(self.replica, robot)
                req = decode(SessionOpen, query_bytes(query))
                if req.client_uuid != robot:
                    ack = self._identity_refusal(robot, req.client_uuid)
                else:
                    ack = self.open_session(req)
            except WireError as exc:
                self.metrics.errors.labels(Reason.BAD_SESSION_OPEN.value).inc()
                self.metrics.rejected.labels(Refusal.BAD_REQUEST).inc()
                ack = SessionAck(False, Refusal.BAD_REQUEST, f"malformed session open: {exc}", replica=self.replica)
            except Exception as exc:  # never let a callback die silently
                log.exception("session open failed")
                ack = SessionAck(False, Refusal.BAD_REQUEST, f"session open failed: {exc}", replica=self.replica)
            query.reply(reply_key, encode(ack))

    def _identity_refusal(self, key_robot: str, body_robot: str) -> SessionAck:
        """A session open for another robot than the key it came on: refused, counted, the other robot untouched."""
        self.metrics.errors.labels(Reason.IDENTITY_MISMATCH.value).inc()
        self.metrics.rejected.labels(Refusal.IDENTITY_MISMATCH).inc()
        log.warning("session open on robot %s's key names client_uuid %s: refused (one robot cannot open a session for another)",
                    key_robot, printable(body_robot, 80))
        return SessionAck(False, Refusal.IDENTITY_MISMATCH,
                          f"this session open came on robot {key_robot}'s key but names client_uuid {printable(body_robot, 80)}",
                          replica=self.replica)

    def open_session(self, req: SessionOpen) -> SessionAck:
        """Validate (pure CPU) and register; re-open by the same client replaces its session."""
        check_id(req.client_uuid, "client_uuid")
        c = self.caps
        with self.registry.lock:
            same = self.registry.get(req.client_uuid) is not None
            verdict = self.cordon.admit(check_open(req, c, self.registry.count(), self.lifecycle.draining, same), same)
            if verdict.code == Refusal.SERVER_FULL and c.serving_mode == "shared" and not req.dry_run and self._reclaim_idle_seat():
                verdict = check_open(req, c, self.registry.count(), self.lifecycle.draining, same)
            base = dict(replica=self.replica, model=self.backend.model_info, action_names=list(c.action_names),
                        chunk_size=c.chunk_size, trained_fps=c.trained_fps, supports_rtc=c.supports_rtc,
                        serving_mode=c.serving_mode, warmed_up=self.warmed_up, max_sessions=c.max_sessions,
                        image_sizes={k: [int(v[-2]), int(v[-1])] for k, v in c.image_shapes.items() if len(v) >= 2},
                        shm_zids=shm_zids(self.z), direct_endpoints=self.direct.endpoints if self.direct is not None else [])
            if not verdict.ok:
                self.metrics.rejected.labels(verdict.code).inc()
                log.info("session refused for %s: %s %s", req.client_uuid, verdict.code, printable(verdict.message, 300))
                return SessionAck(False, verdict.code, verdict.message, warnings=verdict.warnings,
                                  active_sessions=self.registry.count(), **base)
            if req.dry_run:  # doctor: every check passed; nothing is registered, nothing to close
                return SessionAck(True, Refusal.OK, "dry run: this robot would be accepted (no session opened)",
                                  warnings=verdict.warnings, active_sessions=self.registry.count(),
                                  action_names_checked=verdict.names_checked, **base)
            session = Session(new_session_id(), req.client_uuid, self.backend.new_session_state(),
                              req.rtc if verdict.rtc_active else None, verdict.schema_version, req.task, dict(req.tags))
            session.pub = declare_action_publisher(self.z, self.keys.robot(req.client_uuid, "action"))
            session.pub_batched = declare_action_publisher(self.z, self.keys.robot(req.client_uuid, "action"), express=False)
            if self.direct is not None:
                session.direct_pub = declare_action_publisher(self.direct.z, self.keys.robot(req.client_uuid, "action"))
            session.reply_dtype, session.reply_max_error, session.reply_model_space = reply_terms(req, session.rtc is not None)
            self.backend.on_session_open(session.state)
            old = self.registry.add(session)
        if old is not None:
            self._release(old, "replaced")
        self.metrics.opened.inc()
        self.metrics.active.set(self.registry.count())
        log.info("session %s opened for %s (rtc=%s)", session.session_id, req.client_uuid, bool(session.rtc))
        return SessionAck(True, Refusal.OK, "", session.session_id, rtc_active=session.rtc is not None,
                          schema_version=verdict.schema_version, warnings=verdict.warnings,
                          active_sessions=self.registry.count(), action_names_checked=verdict.names_checked,
                          reply_dtype=session.reply_dtype, reply_model_space=session.reply_model_space, **base)

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
        log.info("replica full: session of %s idle for %.0f s gives its seat to a robot asking for one", idle.client_uuid,
                 now - idle.last_obs)
        self.close_session(idle, "idle_reclaimed")
        return True

    def _on_reset(self, query: Any) -> None:
        with query:
            reply_key = self.keys.reset(self.replica, "*")
            try:
                robot = self._key_robot(query)
                reply_key = self.keys.reset(self.replica, robot)
                req = decode(ResetRequest, query_bytes(query))
                s = self.registry.by_session_id(req.session_id)
                if s is not None and s.client_uuid != robot:  # another robot's session id: act as if unknown
                    self.metrics.errors.labels(Reason.IDENTITY_MISMATCH.value).inc()
                    log.warning("reset on robot %s's key names a session of %s: refused", robot, s.client_uuid)
                    s = None
                if s is None:
                    ack = ResetAck(False, req.episode_id, "unknown session: re-open the session")
                else:
                    s.mailbox.clear()
                    s.pending_reset = req.episode_id  # applied by the worker before the next inference
                    self.worker.wake.set()
                    ack = ResetAck(True, req.episode_id, "")
            except WireError as exc:
                self.metrics.errors.labels(Reason.BAD_RESET.value).inc()
                ack = ResetAck(False, 0, f"malformed reset: {exc}")
            query.reply(reply_key, encode(ack))

    def _on_drain(self, query: Any) -> None:
        with query:
            try:
                req = decode(DrainRequest, query_bytes(query) if query.payload is not None else b"\x80")
                ack = self.drain(f"{req.reason} (by {req.requested_by or 'operator'})")
            except WireError as exc:
                ack = DrainAck(False, f"malformed drain request: {exc}")
            query.reply(self.keys.server(self.replica, "drain"), encode(ack))

    def _on_cordon(self, query: Any) -> None:
        with query:
            try:
                ack = self.cordon.answer(query_bytes(query), [s.session_id for s in self.registry.all()])
            except WireError as exc:
                ack = CordonAck(False, self.cordon.on, f"malformed cordon request: {exc}")
            self.metrics.cordoned.set(1 if self.cordon.on else 0)
            query.reply(self.keys.server(self.replica, "cordon"), encode(ack))

    # ================================================================== data plane (callbacks deposit only)
    def _on_direct_obs(self, sample: Any) -> None:
        self._on_obs(sample, direct=True)

    def _on_obs(self, sample: Any, direct: bool = False) -> None:
        """An observation (router or direct link): the session's replies go back the way the latest one came."""
        if self.lifecycle.draining:
            return  # robots were told to move; only work deposited before the drain is finished
        try:
            client = parse_key(str(sample.key_expr)).robot
        except WireError:
            return  # cannot happen under our own obs wildcard; never let a callback raise
        session = self.registry.get(client)
        if session is None or session.closed:
            self.housekeeper.unknown.append((client, peek_epoch(sample.attachment)))
            return
        size = len(sample.payload)
        payload = sample.payload.to_bytes() if size <= self.manifest.max_obs_bytes else b""
        att = sample.attachment
        att = att.to_bytes() if att is not None and len(att) == HEADER_SIZE else None  # sized before any copy
        mail = Mail(payload, att, time.perf_counter(), size)
        session.last_obs = time.monotonic()
        session.via_direct = direct
        if session.mailbox.deposit(mail):
            self.metrics.superseded.labels(client).inc()  # a robot outrunning the worker: the worker decodes its newest
        elif not self.worker.idle:  # an idle worker decodes it at once itself (worker.py `idle`)
            self.decoder.submit(mail)  # a non-blocking put: a decoder thread decodes it while the worker runs the model
        self.worker.wake.set()

    # ================================================================== session teardown
    def close_session(self, s: Session, reason: str) -> None:
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


MAX_CONTROL_BYTES = 256 * 1024  # a session open, reset or drain request is a few KiB; never copy more


def query_bytes(query: Any) -> bytes | None:
    """A control query's payload, sized before it is copied (a hostile peer cannot make us copy a huge body)."""
    payload = query.payload
    if payload is None:
        return None
    if len(payload) > MAX_CONTROL_BYTES:
        raise WireError("payload", f"{len(payload)} bytes is over the {MAX_CONTROL_BYTES}-byte limit for a control message",
                        Reason.OVERSIZE)
    return payload.to_bytes()
