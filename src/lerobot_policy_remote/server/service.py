"""PolicyServer: the zenoh control plane, the data plane, the worker and housekeeping threads.

Threads and what they may do:
- zenoh callbacks (obs subscriber, liveliness subscriber, queryables): deposit or validate-and-reply
  in pure CPU, never inference, never waiting on another thread;
- the inference worker (one, worker.py): decode, pre/post-process, predict (alone or batched), publish, audit;
- housekeeping (one, housekeeping.py): liveliness GC after a grace period, unknown-session replies, load gauge, drain;
- the audit flusher (one, audit.py): publishes the buffered audit lines once the oldest is due.
This module builds the collaborators and wires them together (the worker, the housekeeper, the seats and the
control plane get exactly what they use, never this object); it holds start/drain/stop and the observation
callback. Serving / draining / drained / stopped live in `Lifecycle` alone; sessions open and close in `Seats`
(admission.py), the queryables answer in `ControlPlane` (control.py), the status and health verdict are status.py,
the zenoh settings a replica serves with serving_zenoh.py.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

from ..wire.codes import EventKind
from ..wire.errors import WireError
from ..wire.header import HEADER_SIZE, peek_epoch
from ..wire.keys import parse_key
from ..wire.limits import WireLimits
from ..wire.messages import DrainAck, SessionAck, SessionOpen
from ..zenoh_config import open_session
from .admission import Seats
from .audit import Auditor, DebugCapture
from .backend import LerobotBackend
from .backend_base import Backend
from .control import ControlPlane
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
from .serving_zenoh import serving_zenoh_settings, zenoh_where
from .sessions import Mail, Registry, Session
from .status import StatusReports
from .worker import Worker

log = logging.getLogger("lerobot.policy_server")


class PolicyServer(StatusReports):
    """One model, many robot sessions. `start()` returns once it serves; `drain()`/`stop()` end it. What it reports
    about itself (status, health, endpoints) is `status.StatusReports`."""

    def __init__(
        self,
        manifest: Manifest,
        backend: Backend | None = None,
        *,
        scheduler: Scheduler | None = None,
        progress: Callable[[str], None] = print,
        audit_where: str = "",
        settle: Callable[[], object] | None = None,
    ) -> None:
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
        self.metrics.watch_engine(self.backend.engine_stats)
        self.limits = WireLimits(max_payload_bytes=manifest.max_obs_bytes)
        self.lifecycle = Lifecycle()
        self.load = LoadGauge()
        self.requests_rate = RequestRate(self.metrics.requests_served)  # ServerStatus.requests_per_s (rate.py)
        self.cordon = Cordon(self.replica, progress)  # admits no new sessions while on (cordon.py)
        self.z: Any = None
        self.direct: DirectListener | None = None  # the loopback link for robots on this host (direct.py)
        self.capture = (
            DebugCapture(manifest.debug.capture_dir, manifest.debug.capture_max, manifest)
            if manifest.debug.capture_dir
            else None
        )
        self.auditor = Auditor(self._publish_audit)  # logs only until zenoh is open; publishes in batches
        self.worker = Worker(
            lifecycle=self.lifecycle,
            load=self.load,
            registry=self.registry,
            scheduler=self.scheduler,
            backend=self.backend,
            metrics=self.metrics,
            auditor=self.auditor,
            replica=self.replica,
            limits=self.limits,
            batch_limit=self.batch_limit,
            max_wait_s=None if manifest.batching.max_wait_ms is None else manifest.batching.max_wait_ms / 1e3,
            capture=self.capture,
            progress=progress,
        )
        self.decoder = DecodePool(self.worker.decode, manifest.max_obs_bytes)  # decodes off the worker (decode_pool.py)
        self.worker.prefetch = self.decoder.submit
        self.seats = Seats(
            manifest=manifest,
            caps=self.caps,
            backend=self.backend,
            registry=self.registry,
            lifecycle=self.lifecycle,
            cordon=self.cordon,
            metrics=self.metrics,
            keys=self.keys,
            replica=self.replica,
        )
        # Observations of robots without a session here: deposited by `_on_obs`, answered by the housekeeper.
        self.unknown: collections.deque[tuple[str, int]] = collections.deque(maxlen=256)
        self.housekeeper = Housekeeper(
            lifecycle=self.lifecycle,
            load=self.load,
            registry=self.registry,
            metrics=self.metrics,
            keys=self.keys,
            publish=self._publish_event,
            close_session=self.seats.close,
            worker_alive=self.worker.alive,
            session_grace_s=manifest.session_grace_s,
            drain_timeout_s=manifest.drain_timeout_s,
            progress=progress,
            rate=self.requests_rate,
            unknown=self.unknown,
        )
        self.control = ControlPlane(
            keys=self.keys,
            replica=self.replica,
            metrics=self.metrics,
            registry=self.registry,
            seats=self.seats,
            cordon=self.cordon,
            status=self.status,
            drain=self.drain,
            wake=self.worker.wake_up,
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
        self.warmed_up = self.seats.warmed_up = True
        self.metrics.max_sessions.set(self.caps.max_sessions)
        self.metrics.info.labels(
            self.replica, self.caps.policy_type, self.caps.fingerprint[:16], self.caps.serving_mode
        ).set(1)
        if m.health_port:
            self.health = HealthServer(m.health_host, m.health_port, self.metrics, self.healthy).start()
        settings = serving_zenoh_settings(self.manifest, self.batch_limit)
        self.progress(f"Connecting to zenoh ({settings.mode} {zenoh_where(settings)})...")
        self.z = self.seats.z = open_session(settings)
        k, r = self.keys, self.replica
        self._decls += [
            *self.control.declare(self.z),
            self.z.declare_subscriber(k.obs(r, "*"), self._on_obs),
            self.z.liveliness().declare_subscriber(
                k.robot("*", "alive"), self.housekeeper.on_robot_alive, history=True
            ),
        ]
        if self.manifest.direct_link and eligible(settings):
            try:
                self.direct = self.seats.direct = DirectListener(settings, k.obs(r, "*"), self._on_direct_obs).start()
            except Exception as exc:  # robots on this host then use the router, as every other robot does
                log.warning("no direct link for robots on this host (%s): they go through the router", exc)
        self._audit_pub = self.z.declare_publisher(
            self._audit_key, congestion_control=zenoh.CongestionControl.DROP, priority=zenoh.Priority.BACKGROUND
        )
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
            f"engine={self.backend.engine_stats().path} "
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
        self.backend.compile_engine(self.batch_limit, self.progress)

    def _publish_audit(self, text: str) -> None:
        """The auditor's sink: a batch of lines on the audit key, droppable and at background priority (only while
        zenoh is open; called on whichever thread flushes the batch: the auditor's flusher, the worker, stop())."""
        pub = self._audit_pub
        if pub is not None:
            pub.put(text)

    def _publish_event(self, key: str, payload: bytes, attachment: bytes) -> None:
        """The housekeeper's sink: an event to a robot outside any session (same QoS as a session's publisher)."""
        if self.z is not None:
            self.z.put(
                key,
                payload,
                attachment=attachment,
                congestion_control=zenoh.CongestionControl.DROP,
                priority=zenoh.Priority.INTERACTIVE_HIGH,
                express=True,
            )

    def drain(self, reason: str = "") -> DrainAck:
        """Stop accepting sessions, tell robots, drop the token; the housekeeping thread finishes the rest."""
        first = self.lifecycle.begin_drain()
        self.metrics.draining.set(1)
        sessions = self.registry.all()
        pending = sum(1 for s in sessions if s.mailbox.pending()) + self.worker.in_flight
        if first:
            self.progress(
                f"Draining ({reason or 'requested'}): {len(sessions)} session(s), {pending} pending request(s)"
            )
            self._announce_drain(sessions)
            self.worker.wake.set()
        return DrainAck(True, "draining" if first else "already draining", [s.session_id for s in sessions], pending)

    def _announce_drain(self, sessions: list[Session]) -> None:
        """Every robot hears the drain, then the token goes (robots that missed a notice see the replica leave).

        The notices go batched (not express): sent express on each session's publisher, a burst of 250 overflowed the
        TX queue and most robots never heard it; they waited out the token grace before moving (2.2 s instead of
        about 1 s in `lerobot-fleet simulate`). Still droppable: a callback never blocks, and the token is the
        fallback."""
        for s in sessions:
            payload, attachment = s.event_message(
                EventKind.DRAINING, "server is draining: re-handshake with another replica", None
            )
            try:
                self.z.put(
                    self.keys.robot(s.client_uuid, "action"),
                    payload,
                    attachment=attachment,
                    congestion_control=zenoh.CongestionControl.DROP,
                    priority=zenoh.Priority.INTERACTIVE_HIGH,
                    express=False,
                )
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
        self.auditor.close()  # the worker has stopped: its last lines (a drain's) leave before the publisher goes
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
    def open_session(self, req: SessionOpen) -> SessionAck:
        """Validate and register a session (the session queryable's work; admission.py)."""
        return self.seats.open(req)

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
        if client is None:
            return  # nor can this: an observation key names its robot
        session = self.registry.get(client)
        if session is None or session.closed:
            self.unknown.append((client, peek_epoch(sample.attachment)))
            return
        size = len(sample.payload)
        payload = sample.payload.to_bytes() if size <= self.manifest.max_obs_bytes else b""
        att = sample.attachment
        att = att.to_bytes() if att is not None and len(att) == HEADER_SIZE else None  # sized before any copy
        session.last_obs = time.monotonic()
        session.via_direct = direct
        self.deliver(session, Mail(payload, att, time.perf_counter(), size))

    def deliver(self, session: Session, mail: Mail) -> None:
        """An observation into its session's mailbox, its decode handed to the pool when the worker is busy, and the
        worker woken: the one path every transport (router, direct link, in-process benches) deposits through."""
        if session.mailbox.deposit(mail):  # a robot outrunning the worker: the worker decodes its newest
            self.metrics.superseded.labels(session.client_uuid).inc()
        elif not self.worker.idle:  # an idle worker decodes it at once itself (worker.py `idle`)
            self.decoder.submit(mail)  # a non-blocking put: a decoder thread decodes it while the worker runs the model
        self.worker.wake.set()

    # ================================================================== session teardown
    def close_session(self, s: Session, reason: str) -> None:
        """Remove and release `s` (admission.py `Seats.close`)."""
        self.seats.close(s, reason)
