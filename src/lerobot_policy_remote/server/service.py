"""PolicyServer: the zenoh control plane, the data plane, the worker and housekeeping threads.

Threads and what they may do:
- zenoh callbacks (obs subscriber, liveliness subscriber, queryables): deposit or validate-and-reply
  in pure CPU, never inference, never waiting on another thread;
- the inference worker (one): decode, pre/post-process, predict, publish the chunk, audit;
- housekeeping (one): liveliness GC after a grace period, unknown-session replies, load gauge, drain.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import zenoh

from ..wire.codec import decode, encode
from ..wire.data import ActionChunkMsg, decode_observation, encode_chunk
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.limits import WireLimits
from ..wire.messages import (
    SCHEMA_VERSION,
    AuditLine,
    DrainAck,
    DrainRequest,
    EventMsg,
    ResetAck,
    ResetRequest,
    ServerStatus,
    SessionAck,
    SessionOpen,
)
from ..zenoh_config import open_session
from .audit import Auditor, DebugCapture, now_iso
from .backend import Backend, LerobotBackend, ObsContractError
from .capabilities import check_open
from .manifest import Manifest
from .metrics import HealthServer, ServerMetrics
from .scheduler import RoundRobin, Scheduler
from .sessions import Mail, Registry, Session, new_session_id

log = logging.getLogger("lerobot.policy_server")

UNKNOWN_REPLY_INTERVAL_S = 1.0  # at most one unknown_session event per robot per second


def _reason(exc: WireError) -> str:
    """Bounded label values for errors_total{reason}."""
    field, problem = exc.field.lower(), exc.problem.lower()
    if field.startswith("header"):
        return "bad_header"
    if "exceeds the limit" in problem or "too large" in problem or "exceeds" in problem:
        return "oversize"
    if "nan" in problem or "finite" in problem or "inf" in problem:
        return "non_finite"
    if "dtype" in problem or "dtype" in field:
        return "bad_dtype"
    if "shape" in problem or "shape" in field:
        return "bad_shape"
    if "msgpack" in problem or field == "observationmsg":
        return "malformed"
    return "bad_observation"


class PolicyServer:
    """One model, many robot sessions. `start()` returns once it serves; `drain()`/`stop()` end it."""

    def __init__(self, manifest: Manifest, backend: Backend | None = None, *, scheduler: Scheduler | None = None,
                 progress: Callable[[str], None] = print) -> None:
        manifest.validate()
        self.manifest = manifest
        self.progress = progress
        self.backend: Backend = backend if backend is not None else LerobotBackend(manifest, progress)
        self.caps = self.backend.caps
        self.keys = manifest.keys()
        self.replica = manifest.replica()
        self.scheduler: Scheduler = scheduler or RoundRobin()
        self.registry = Registry()
        self.metrics = ServerMetrics(self.replica)
        self.limits = WireLimits(max_payload_bytes=manifest.max_obs_bytes)
        self.draining = threading.Event()
        self.drained = threading.Event()
        self.stopped = threading.Event()
        self._work = threading.Event()
        self._unknown: collections.deque[str] = collections.deque(maxlen=256)
        self._unknown_last: dict[str, float] = {}
        self._alive_robots: set[str] = set()
        self._alive_lock = threading.Lock()
        self._busy_s = 0.0
        self._load = 0.0
        self._inference_ms: collections.deque[float] = collections.deque(maxlen=64)
        self._in_flight = 0
        self._drain_started = 0.0
        self.warmed_up = False
        self.worker_error: str = ""
        self.z: Any = None
        self.health: HealthServer | None = None
        self.capture = DebugCapture(manifest.debug.capture_dir, manifest.debug.capture_max) if manifest.debug.capture_dir else None
        self.auditor = Auditor(None)
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
        if hasattr(self.backend, "warmup") and m.warmup_inferences:
            self.progress(f"Warming up ({m.warmup_inferences} inferences)...")
            self.backend.warmup(m.warmup_inferences, self.progress)
        self.warmed_up = True
        self.metrics.max_sessions.set(self.caps.max_sessions)
        self.metrics.info.labels(self.replica, self.caps.policy_type, self.caps.fingerprint[:16], self.caps.serving_mode).set(1)
        if m.health_port:
            self.health = HealthServer(m.health_host, m.health_port, self.metrics, self.healthy).start()
        self.progress(f"Connecting to zenoh ({m.zenoh.mode}: {', '.join(m.zenoh.connect_endpoints or m.zenoh.listen_endpoints)})...")
        self.z = open_session(m.zenoh)
        audit_key = self.keys.server(self.replica, "audit")
        self.auditor = Auditor(lambda text: self.z.put(audit_key, text, congestion_control=zenoh.CongestionControl.DROP,
                                                       priority=zenoh.Priority.BACKGROUND))
        k, r = self.keys, self.replica
        self._decls += [
            self.z.declare_queryable(k.server(r, "status"), self._on_status),
            self.z.declare_queryable(k.server(r, "session"), self._on_session),
            self.z.declare_queryable(k.server(r, "reset"), self._on_reset),
            self.z.declare_queryable(k.server(r, "drain"), self._on_drain),
            self.z.declare_subscriber(k.obs(r, "*"), self._on_obs),
            self.z.liveliness().declare_subscriber(k.robot("*", "alive"), self._on_robot_alive, history=True),
        ]
        self._token = self.z.liveliness().declare_token(k.server(r, "alive"))
        for target, name in ((self._worker_loop, "inference-worker"), (self._housekeeping_loop, "housekeeping")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        self.metrics.worker_alive.set(1)
        self.progress(
            f"Policy server up: {self.service_key} replica={self.replica} model={self.backend.model_info.repo_or_path} "
            f"type={self.caps.policy_type} mode={self.caps.serving_mode} max_sessions={self.caps.max_sessions} "
            f"fingerprint={self.caps.fingerprint[:16]} rtc={self.caps.supports_rtc}"
            + (f" metrics=http://{m.health_host}:{self.health_port}/metrics" if self.health else "")
        )
        return self

    def healthy(self) -> tuple[bool, str]:
        if self.draining.is_set():
            return False, "draining"
        worker = self._threads[0] if self._threads else None
        if worker is None or not worker.is_alive():
            return False, "inference worker is not running" + (f": {self.worker_error}" if self.worker_error else "")
        return True, "ok"

    def metrics_url(self) -> str:
        if not self.health:
            return ""
        host = self.manifest.advertise_host or self.manifest.health_host
        return f"http://{host}:{self.health_port}/metrics"

    def drain(self, reason: str = "") -> DrainAck:
        """Stop accepting sessions, tell robots, drop the token; the housekeeping thread finishes the rest."""
        first = not self.draining.is_set()
        self.draining.set()
        self.metrics.draining.set(1)
        sessions = self.registry.all()
        pending = sum(1 for s in sessions if s.mailbox.pending()) + self._in_flight
        if first:
            self.progress(f"Draining ({reason or 'requested'}): {len(sessions)} session(s), {pending} pending request(s)")
            self._drop_token()  # robots see the replica leave at once and ride their buffers
            for s in sessions:
                self._event(s, "draining", "server is draining: re-handshake with another replica", None)
            self._drain_started = time.monotonic()
            self._work.set()
        return DrainAck(True, "draining" if first else "already draining", [s.session_id for s in sessions], pending)

    def wait(self, timeout: float | None = None) -> bool:
        return self.drained.wait(timeout)

    def stop(self) -> None:
        """Tear everything down (idempotent). After a drain this is the clean exit."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        self._work.set()
        for t in self._threads:
            t.join(timeout=10)
        self.metrics.worker_alive.set(0)
        for d in self._decls:
            try:
                d.undeclare()
            except Exception:
                pass
        self._decls.clear()
        self._drop_token()
        sessions = self.registry.all()
        for s in sessions:
            self._close(s, "shutdown")
        if self.z is not None:
            if sessions:
                time.sleep(0.2)  # let the last chunks/events leave before the transport closes
            try:
                self.z.close()
            except Exception:
                pass
        if self.health:
            self.health.stop()
        if self.capture:
            self.capture.close()

    def _drop_token(self) -> None:
        if self._token is not None:
            try:
                self._token.undeclare()
            except Exception:
                pass
            self._token = None

    # ================================================================== control plane (callbacks)
    def status(self) -> ServerStatus:
        c = self.caps
        p50 = sorted(self._inference_ms)[len(self._inference_ms) // 2] if self._inference_ms else 0.0
        return ServerStatus(
            replica=self.replica, model=self.backend.model_info, service=self.manifest.service,
            default_task=self.manifest.default_task, pin_task=self.manifest.pin_task, serving_mode=c.serving_mode,
            max_sessions=c.max_sessions, active_sessions=self.registry.count(), load=self._load,
            supports_rtc=c.supports_rtc, chunk_size=c.chunk_size, trained_fps=c.trained_fps, inference_ms_p50=p50,
            action_names=list(c.action_names), image_features=list(c.image_keys), state_dim=c.state_dim,
            schema_min=c.schema_min, schema_max=c.schema_max, metrics_url=self.metrics_url(),
            draining=self.draining.is_set(), warmed_up=self.warmed_up, sessions=[s.info() for s in self.registry.all()],
        )

    def _on_status(self, query: Any) -> None:
        with query:
            query.reply(self.keys.server(self.replica, "status"), encode(self.status()))

    def _on_session(self, query: Any) -> None:
        with query:
            try:
                ack = self.open_session(decode(SessionOpen, query.payload.to_bytes() if query.payload is not None else None))
            except WireError as exc:
                self.metrics.errors.labels("bad_session_open").inc()
                self.metrics.rejected.labels("bad_request").inc()
                ack = SessionAck(False, "bad_request", f"malformed session open: {exc}", replica=self.replica)
            except Exception as exc:  # never let a callback die silently
                log.exception("session open failed")
                ack = SessionAck(False, "bad_request", f"session open failed: {exc}", replica=self.replica)
            query.reply(self.keys.server(self.replica, "session"), encode(ack))

    def open_session(self, req: SessionOpen) -> SessionAck:
        """Validate (pure CPU) and register; re-open by the same client replaces its session."""
        from ..wire.keys import check_id

        check_id(req.client_uuid, "client_uuid")
        c = self.caps
        with self.registry.lock:
            same = self.registry._by_client.get(req.client_uuid) is not None
            verdict = check_open(req, c, self.registry.count(), self.draining.is_set(), same)
            base = dict(replica=self.replica, model=self.backend.model_info, action_names=list(c.action_names),
                        chunk_size=c.chunk_size, trained_fps=c.trained_fps, supports_rtc=c.supports_rtc,
                        serving_mode=c.serving_mode, warmed_up=self.warmed_up, max_sessions=c.max_sessions)
            if not verdict.ok:
                self.metrics.rejected.labels(verdict.code).inc()
                log.info("session refused for %s: %s %s", req.client_uuid, verdict.code, verdict.message)
                return SessionAck(False, verdict.code, verdict.message, warnings=verdict.warnings,
                                  active_sessions=self.registry.count(), **base)
            if req.dry_run:  # doctor: every check passed; nothing is registered, nothing to close
                return SessionAck(True, "ok", "dry run: this robot would be accepted (no session opened)",
                                  warnings=verdict.warnings, active_sessions=self.registry.count(), **base)
            session = Session(new_session_id(), req.client_uuid, self.backend.new_session_state(),
                              req.rtc if verdict.rtc_active else None, verdict.schema_version, req.task, dict(req.tags))
            session.pub = self.z.declare_publisher(
                self.keys.robot(req.client_uuid, "action"), congestion_control=zenoh.CongestionControl.DROP,
                priority=zenoh.Priority.INTERACTIVE_HIGH, express=True, reliability=zenoh.Reliability.RELIABLE)
            self.backend.on_session_open(session.state)
            old = self.registry.add(session)
        if old is not None:
            self._release(old, "replaced")
        self.metrics.opened.inc()
        self.metrics.active.set(self.registry.count())
        log.info("session %s opened for %s (rtc=%s)", session.session_id, req.client_uuid, bool(session.rtc))
        return SessionAck(True, "ok", "", session.session_id, rtc_active=session.rtc is not None,
                          schema_version=verdict.schema_version, warnings=verdict.warnings,
                          active_sessions=self.registry.count(), **base)

    def _on_reset(self, query: Any) -> None:
        with query:
            try:
                req = decode(ResetRequest, query.payload.to_bytes() if query.payload is not None else None)
                s = self.registry.by_session_id(req.session_id)
                if s is None:
                    ack = ResetAck(False, req.episode_id, "unknown session: re-open the session")
                else:
                    s.mailbox.clear()
                    s.pending_reset = req.episode_id  # applied by the worker before the next inference
                    self._work.set()
                    ack = ResetAck(True, req.episode_id, "")
            except WireError as exc:
                self.metrics.errors.labels("bad_reset").inc()
                ack = ResetAck(False, 0, f"malformed reset: {exc}")
            query.reply(self.keys.server(self.replica, "reset"), encode(ack))

    def _on_drain(self, query: Any) -> None:
        with query:
            try:
                req = decode(DrainRequest, query.payload.to_bytes() if query.payload is not None else b"\x80")
                ack = self.drain(f"{req.reason} (by {req.requested_by or 'operator'})")
            except WireError as exc:
                ack = DrainAck(False, f"malformed drain request: {exc}")
            query.reply(self.keys.server(self.replica, "drain"), encode(ack))

    # ================================================================== data plane (callbacks deposit only)
    def _on_obs(self, sample: Any) -> None:
        client = str(sample.key_expr).rsplit("/", 1)[-1]
        if self.draining.is_set():
            return  # robots were told to move; only work deposited before the drain is finished
        session = self.registry.get(client)
        if session is None or session.closed:
            self._unknown.append(client)
            return
        size = len(sample.payload)
        payload = sample.payload.to_bytes() if size <= self.manifest.max_obs_bytes else b""
        att = sample.attachment.to_bytes() if sample.attachment is not None else None
        mail = Mail(payload, att, time.perf_counter(), size)
        if session.mailbox.deposit(mail):
            self.metrics.superseded.labels(client).inc()
        self._work.set()

    def _on_robot_alive(self, sample: Any) -> None:
        try:
            client = str(sample.key_expr).split("/")[-2]
        except Exception:
            return
        with self._alive_lock:
            if sample.kind == zenoh.SampleKind.PUT:
                self._alive_robots.add(client)
            else:
                self._alive_robots.discard(client)

    # ================================================================== worker
    def _worker_loop(self) -> None:
        try:
            while not self.stopped.is_set():
                ready = self.registry.ready_in_ring_order()
                if not ready:
                    if self.draining.is_set():
                        self._finish_drain()
                        return
                    self._work.wait(0.1)
                    self._work.clear()
                    continue
                for s in self.scheduler.select(ready):
                    self._serve(s)
        except BaseException as exc:  # the health endpoint must show this
            self.worker_error = f"{type(exc).__name__}: {exc}"
            log.error("inference worker died:\n%s", traceback.format_exc())
            self.metrics.worker_alive.set(0)

    def _event(self, s: Session, event: str, message: str, header: Header | None) -> None:
        h = Header(s.schema_version, MsgType.EVENT, header.seq_id if header else 0, header.episode_id if header else s.episode_id,
                   header.client_mono_ns if header else 0, header.session_epoch if header else 0)
        try:
            s.pub.put(encode(EventMsg(event, message, s.session_id, h.seq_id)), attachment=h.pack())
        except Exception:
            log.debug("event publish failed (session closed?)", exc_info=True)

    def _serve(self, s: Session) -> None:
        mail, superseded = s.mailbox.take()
        self.registry.served(s)
        if mail is None:
            return
        self._in_flight += 1
        try:
            self._serve_mail(s, mail, superseded)
        finally:
            self._in_flight -= 1

    def _refuse(self, s: Session, reason: str, message: str, header: Header | None) -> None:
        s.errors += 1
        self.metrics.errors.labels(reason).inc()
        self._event(s, "bad_request", message, header)
        self.auditor.emit(AuditLine(now_iso(), s.session_id, s.client_uuid, header.seq_id if header else 0,
                                    header.episode_id if header else s.episode_id, 0.0, 0.0, [], 0, "bad_request",
                                    self.replica, message[:300]))

    def _serve_mail(self, s: Session, mail: Mail, superseded: int) -> None:
        t0 = time.perf_counter()
        queue_wait = t0 - mail.t_arrival
        self._apply_pending_reset(s)
        try:
            header = Header.unpack(mail.attachment, expect=MsgType.OBS)
        except WireError as exc:
            return self._refuse(s, "bad_header", f"bad observation header: {exc}", None)
        if header.schema_version != s.schema_version:
            return self._refuse(s, "schema_mismatch",
                                f"header.schema_version: {header.schema_version}, but this session speaks {s.schema_version}", header)
        size = mail.size or len(mail.payload)
        if size > self.manifest.max_obs_bytes:
            return self._refuse(s, "oversize", f"observation of {size} bytes exceeds the limit {self.manifest.max_obs_bytes}", header)
        try:
            obs = decode_observation(mail.payload, self.limits)
            self.backend.validate_obs(obs)
        except WireError as exc:
            return self._refuse(s, _reason(exc), f"bad observation: {exc}", header)
        except ObsContractError as exc:
            return self._refuse(s, "contract", f"observation does not fit the policy: {exc}", header)
        if header.episode_id != s.episode_id:
            if obs.episode_start or header.episode_id > s.episode_id:
                self.backend.reset_session(s.state)
                s.episode_id = header.episode_id
        t1 = time.perf_counter()
        try:
            chunk_model, chunk_robot = self.backend.infer(s.state, obs, s.rtc)
        except Exception as exc:
            log.exception("inference failed for %s", s.client_uuid)
            s.errors += 1
            self.metrics.errors.labels("inference_error").inc()
            self._event(s, "error", f"inference failed: {type(exc).__name__}: {exc}", header)
            self.auditor.emit(AuditLine(now_iso(), s.session_id, s.client_uuid, header.seq_id, header.episode_id,
                                        queue_wait * 1e3, 0.0, [], superseded, "error", self.replica, str(exc)[:300]))
            return
        infer_s = time.perf_counter() - t1
        self._busy_s += time.perf_counter() - t0
        self._inference_ms.append(infer_s * 1e3)
        msg = ActionChunkMsg(chunk_model, chunk_robot, s.session_id, header.seq_id, header.client_mono_ns,
                             queue_wait * 1e3, infer_s * 1e3, superseded, self._load)
        reply = Header(s.schema_version, MsgType.CHUNK, header.seq_id, header.episode_id, header.client_mono_ns, header.session_epoch)
        try:
            s.pub.put(encode_chunk(msg), attachment=reply.pack())
            outcome = "ok"
        except Exception as exc:
            outcome = "publish_failed"
            self.metrics.errors.labels("publish_failed").inc()
            log.warning("chunk publish to %s failed: %s", s.client_uuid, exc)
        s.requests += 1
        self.metrics.requests.labels(s.client_uuid).inc()
        self.metrics.queue_wait.observe(queue_wait)
        self.metrics.inference.observe(infer_s)
        self.auditor.emit(AuditLine(now_iso(), s.session_id, s.client_uuid, header.seq_id, header.episode_id,
                                    round(queue_wait * 1e3, 3), round(infer_s * 1e3, 3), [0, int(chunk_robot.shape[0])],
                                    superseded, outcome, self.replica))
        if self.capture is not None:
            self.capture.submit(f"{s.client_uuid}-{header.episode_id}-{header.seq_id}",
                                {"chunk_model": chunk_model, "chunk_robot": chunk_robot,
                                 **{f"state.{k}": v for k, v in obs.state.items()}, **{f"images.{k}": v for k, v in obs.images.items()}},
                                {"session_id": s.session_id, "task": obs.task, "delay": str(obs.inference_delay_steps)})

    def _apply_pending_reset(self, s: Session) -> None:
        ep = s.pending_reset
        if ep is not None:
            s.pending_reset = None
            self.backend.reset_session(s.state)
            s.episode_id = ep

    def _finish_drain(self) -> None:
        """Worker side of a drain: nothing is pending any more."""
        self.progress("Drain complete: all pending requests served")
        self.drained.set()

    # ================================================================== housekeeping
    def _housekeeping_loop(self) -> None:
        last_busy, last_t = 0.0, time.perf_counter()
        while not self.stopped.wait(0.1):
            now = time.perf_counter()
            if now - last_t >= 1.0:
                busy = self._busy_s
                self._load = min(1.0, (busy - last_busy) / (now - last_t))
                self.metrics.load.set(self._load)
                last_busy, last_t = busy, now
            self._reply_unknown()
            self._collect_gone()
            self.metrics.active.set(self.registry.count())
            if self.draining.is_set() and not self.drained.is_set():
                if not self._threads[0].is_alive():
                    self.drained.set()
                elif time.monotonic() - self._drain_started > self.manifest.drain_timeout_s:
                    self.progress("Drain timeout reached; exiting with work still pending")
                    self.drained.set()

    def _reply_unknown(self) -> None:
        now = time.monotonic()
        while self._unknown:
            client = self._unknown.popleft()
            self.metrics.unknown.inc()
            if now - self._unknown_last.get(client, -1e9) < UNKNOWN_REPLY_INTERVAL_S:
                continue
            if len(self._unknown_last) > 4096:
                self._unknown_last.clear()
            self._unknown_last[client] = now
            try:
                key = self.keys.robot(client, "action")
            except WireError:
                continue
            h = Header(SCHEMA_VERSION, MsgType.EVENT, 0, 0, 0, 0)
            self.z.put(key, encode(EventMsg("unknown_session", "no session for this robot on this replica: re-handshake")),
                       attachment=h.pack(), congestion_control=zenoh.CongestionControl.DROP, priority=zenoh.Priority.INTERACTIVE_HIGH,
                       express=True)

    def _collect_gone(self) -> None:
        """GC sessions whose robot token has been gone for session_grace_s (never merely idle ones)."""
        now = time.monotonic()
        with self._alive_lock:
            alive = set(self._alive_robots)
        for s in self.registry.all():
            if s.client_uuid in alive:
                s.gone_since = None
            elif s.gone_since is None:
                s.gone_since = now
            elif now - s.gone_since >= self.manifest.session_grace_s:
                self._close(s, "liveliness_lost")

    def _close(self, s: Session, reason: str) -> None:
        if self.registry.remove(s.client_uuid) is s:
            self._release(s, reason)
            self.metrics.active.set(self.registry.count())

    def _release(self, s: Session, reason: str) -> None:
        s.closed = True
        s.mailbox.clear()
        self.metrics.closed.labels(reason).inc()
        self.metrics.forget_client(s.client_uuid)
        pub = getattr(s, "pub", None)
        if pub is not None:
            try:
                pub.undeclare()
            except Exception:
                pass
        log.info("session %s of %s closed (%s)", s.session_id, s.client_uuid, reason)
