"""FleetStore: the one place sources write to and the UI reads from.

Sources (zenoh callbacks' drain thread, the status poller, the metrics scraper, fake/replay) call the
`on_*` methods from any thread; each does O(1) work under one lock. The UI calls `snapshot()` on its
timer and gets immutable rows. Time comes from an injected monotonic `clock` (frozen in tests).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry, ServerStatus

from .model import (
    AuditEntry,
    FleetSnapshot,
    RobotDetail,
    RobotRow,
    RobotState,
    RouterInfo,
    ServerDetail,
    ServerRow,
    SessionEntry,
    n_max,
)

Namespace = tuple[str, str, str]  # (model_id, revision, service), decoded
METRIC_PREFIX = "lerobot_policy_server_"
STATUS_STALE_S = 6.0  # a server whose status has not answered for this long shows as "stale"
RECONNECT_GRACE_S = 3.0  # after the router link comes back, wait this long before calling tokens gone
LINK_LOSS_MARGIN_S = 0.5  # token deletions this close before we noticed the link loss are blamed on the link
AUDIT_RATE_WINDOW_S = 10.0
DEFAULT_REQUEST_HZ = 1.0  # N_max's r when no request rate is observed yet (the spec's 1 Hz example)


@dataclass
class _Robot:
    robot_id: str
    ns: Namespace = ("", "", "")
    telemetry: RobotTelemetry | None = None
    seen_at: float | None = None
    alive: bool | None = None
    gone_at: float | None = None
    history: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=40))
    rtt: deque[float] = field(default_factory=lambda: deque(maxlen=120))
    audit: deque[AuditEntry] = field(default_factory=lambda: deque(maxlen=50))
    audit_at: deque[float] = field(default_factory=lambda: deque(maxlen=50))


@dataclass
class _Server:
    replica: str
    ns: Namespace = ("", "", "")
    status: ServerStatus | None = None
    status_at: float | None = None
    alive: bool | None = None
    gone_at: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    metrics_at: float | None = None
    metrics_prev: tuple[float, float] | None = None  # (t, requests_total) of the scrape before
    requests_per_s: float | None = None
    metrics_error: str = ""
    audit: deque[tuple[float, AuditEntry]] = field(default_factory=lambda: deque(maxlen=50))
    audit_times: deque[float] = field(default_factory=lambda: deque(maxlen=5000))
    audit_errors: int = 0
    audit_superseded: int = 0


class FleetStore:
    """Thread-safe aggregation of everything the console knows about the fleet."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, router: str = "", connection: str = "connecting") -> None:
        self.clock = clock
        self.router = router
        self._lock = threading.Lock()
        self._robots: dict[str, _Robot] = {}
        self._servers: dict[str, _Server] = {}
        self._connection = connection
        self._link_down_at: float | None = None
        self._link_up_at: float | None = None
        self._last_data_at: float | None = None
        self._notes: deque[str] = deque(maxlen=5)
        self.dropped = 0  # samples the source had to drop (bounded queue overflow)
        self._routers: tuple[RouterInfo, ...] = ()

    # ------------------------------------------------------------ writers (any thread)

    def set_connection(self, state: str) -> None:
        """connecting | connected | disconnected (or a fixed label such as replay/fake)."""
        with self._lock:
            now = self.clock()
            if state == self._connection:
                return
            if state == "connected":
                self._link_up_at = now
            elif self._connection == "connected":
                self._link_down_at = now
            self._connection = state

    def set_routers(self, routers: tuple[RouterInfo, ...]) -> None:
        """The routers of the mesh as last read from the admin space."""
        with self._lock:
            self._routers = tuple(sorted(routers, key=lambda r: (not r.connected, r.zid)))

    def note(self, text: str) -> None:
        """A short operator-facing message from a source (e.g. a failed scrape); newest last."""
        with self._lock:
            if not self._notes or self._notes[-1] != text:
                self._notes.append(text)

    def on_robot_alive(self, robot_id: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            r = self._robot(robot_id, ns)
            if alive:
                r.gone_at = None
            elif r.alive is not False:  # a repeated DELETE keeps the first vanishing time
                r.gone_at = now
            r.alive = alive

    def on_server_alive(self, replica: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            s = self._server(replica, ns)
            if alive:
                s.gone_at = None
            elif s.alive is not False:
                s.gone_at = now
            s.alive = alive

    def on_telemetry(self, t: RobotTelemetry, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            r = self._robot(t.client_uuid, ns)
            state = RobotState.parse(t.state).name
            if not r.history or r.history[-1][1] != state:
                r.history.append((now, state))
            if t.rtt_p50_ms > 0 and (r.telemetry is None or t.seq != r.telemetry.seq or t.rtt_p50_ms != r.telemetry.rtt_p50_ms):
                r.rtt.append(t.rtt_p50_ms)
            r.telemetry = t
            r.seen_at = now
            self._last_data_at = now

    def on_audit(self, line: AuditLine, replica: str, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            replica = line.replica or replica
            entry = AuditEntry(
                age_s=0.0,
                replica=replica,
                client_uuid=line.client_uuid,
                session_id=line.session_id,
                seq_id=line.seq_id,
                episode_id=line.episode_id,
                queue_wait_ms=line.queue_wait_ms,
                inference_ms=line.inference_ms,
                superseded=line.superseded,
                outcome=line.outcome,
                error=line.error,
            )
            s = self._server(replica, ns)
            s.audit.append((now, entry))
            s.audit_times.append(now)
            s.audit_superseded += line.superseded
            if line.outcome not in ("ok", "superseded"):
                s.audit_errors += 1
            r = self._robots.get(line.client_uuid)
            if r is not None:
                r.audit.append(entry)
                r.audit_at.append(now)
            self._last_data_at = now

    def on_status(self, status: ServerStatus, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            s = self._server(status.replica, ns)
            s.status = status
            s.status_at = now
            if s.alive is None:
                s.alive = True  # it answered, so it exists even if its token has not reached us yet
            self._last_data_at = now

    def on_metrics(self, replica: str, values: dict[str, float] | None, error: str = "") -> None:
        """Counters summed over label sets, names without the `lerobot_policy_server_` prefix."""
        with self._lock:
            now = self.clock()
            s = self._servers.get(replica)
            if s is None:
                return
            if values is None:
                s.metrics_error = error or "scrape failed"
                return
            s.metrics_error = ""
            total = values.get("requests_total")
            if total is not None:
                if s.metrics_prev is not None and now > s.metrics_prev[0] and total >= s.metrics_prev[1]:
                    s.requests_per_s = (total - s.metrics_prev[1]) / (now - s.metrics_prev[0])
                s.metrics_prev = (now, total)
            s.metrics = dict(values)
            s.metrics_at = now

    # ------------------------------------------------------------ readers (UI thread)

    def snapshot(self) -> FleetSnapshot:
        with self._lock:
            now = self.clock()
            robots = tuple(self._robot_row(r, now) for r in self._robots.values())
            servers = tuple(self._server_row(s, now) for s in self._servers.values())
            age = None if self._last_data_at is None else max(0.0, now - self._last_data_at)
            return FleetSnapshot(
                router=self.router,
                connection=self._connection,
                data_age_s=age,
                robots=robots,
                servers=servers,
                notes=tuple(self._notes),
                routers=self._routers,
            )

    def robot_detail(self, robot_id: str) -> RobotDetail | None:
        with self._lock:
            r = self._robots.get(robot_id)
            if r is None:
                return None
            now = self.clock()
            audit = tuple(_aged(e, now - t) for e, t in zip(r.audit, r.audit_at, strict=True))
            return RobotDetail(
                row=self._robot_row(r, now),
                history=tuple((max(0.0, now - t), st) for t, st in r.history),
                rtt_history=tuple(r.rtt),
                audit=audit,
            )

    def server_detail(self, replica: str) -> ServerDetail | None:
        with self._lock:
            s = self._servers.get(replica)
            if s is None:
                return None
            now = self.clock()
            sessions = ()
            if s.status is not None:
                sessions = tuple(
                    SessionEntry(x.session_id, x.client_uuid, x.episode_id, x.requests, x.superseded, x.errors) for x in s.status.sessions
                )
            notes = (f"metrics: {s.metrics_error}",) if s.metrics_error else ()
            return ServerDetail(
                row=self._server_row(s, now),
                sessions=sessions,
                metrics=tuple(sorted(s.metrics.items())),
                audit=tuple(_aged(e, now - t) for t, e in s.audit),
                capacity_inputs=tuple(self._capacity_inputs(s, now)[1]),
                notes=notes,
            )

    # ------------------------------------------------------------ internals (lock held)

    def _robot(self, robot_id: str, ns: Namespace) -> _Robot:
        r = self._robots.get(robot_id)
        if r is None:
            r = self._robots[robot_id] = _Robot(robot_id, ns)
        elif ns != ("", "", ""):
            r.ns = ns
        return r

    def _server(self, replica: str, ns: Namespace) -> _Server:
        s = self._servers.get(replica)
        if s is None:
            s = self._servers[replica] = _Server(replica, ns)
        elif ns != ("", "", ""):
            s.ns = ns
        return s

    def _token_gone(self, alive: bool | None, gone_at: float | None, now: float) -> bool:
        """A vanished token means gone only if the console's own link was up when it vanished.

        When the router goes away every token is reported deleted; those robots are not gone, the
        console is blind (the header says so). After a reconnect, tokens are re-announced with
        history; give them RECONNECT_GRACE_S before calling the missing ones gone.
        """
        if alive is not False or gone_at is None:
            return False
        if self._connection != "connected":
            return self._link_down_at is None or gone_at < self._link_down_at - LINK_LOSS_MARGIN_S
        if self._link_up_at is None or gone_at > self._link_up_at:
            return True
        return now - self._link_up_at > RECONNECT_GRACE_S

    def _robot_row(self, r: _Robot, now: float) -> RobotRow:
        t = r.telemetry
        seen = None if r.seen_at is None else max(0.0, now - r.seen_at)
        if self._token_gone(r.alive, r.gone_at, now):
            state = RobotState.GONE
        elif t is None:
            state = RobotState.UNKNOWN
        else:
            state = RobotState.parse(t.state)
        model, rev, service = r.ns
        if t is None:
            return RobotRow(r.robot_id, state, "", model, rev, service, alive=r.alive, seen_age_s=seen)
        return RobotRow(
            robot_id=r.robot_id,
            state=state,
            reported_state=t.state,
            model_id=t.model_id or model,
            revision=rev,
            service=service,
            session_id=t.session_id,
            replica=t.replica,
            episode_id=t.episode_id,
            staleness_s=t.staleness_s,
            queue_s=t.queue_s,
            rtt_p50_ms=t.rtt_p50_ms,
            rtt_p95_ms=t.rtt_p95_ms,
            delay_steps=t.delay_steps,
            requests=t.requests,
            superseded=t.superseded,
            errors=t.errors,
            fallback_count=t.fallback_count,
            last_outcome=t.last_outcome,
            fps=t.fps,
            alive=r.alive,
            seen_age_s=seen,
        )

    def _capacity_inputs(self, s: _Server, now: float) -> tuple[float | None, list[tuple[str, str]]]:
        """N_max for one replica, and the inputs used (shown in the server detail screen)."""
        st = s.status
        if st is None:
            return None, [("status", "not received yet")]
        t_s = st.inference_ms_p50 / 1000.0
        active = st.active_sessions
        rate = s.requests_per_s if s.requests_per_s is not None else self._audit_rate(s, now)
        if rate is not None and rate > 0 and active > 0:
            r_hz, r_src = rate / active, "observed requests/s ÷ active sessions"
        else:
            r_hz, r_src = DEFAULT_REQUEST_HZ, "default (no traffic observed)"
        horizon = float(st.chunk_size)
        dt = 1.0 / st.trained_fps if st.trained_fps > 0 else 0.0
        rtts = sorted(
            max(0.0, r.telemetry.rtt_p50_ms - st.inference_ms_p50)
            for r in self._robots.values()
            if r.telemetry is not None and r.telemetry.replica == s.replica and r.telemetry.rtt_p50_ms > 0
        )
        rtt_ms = rtts[len(rtts) // 2] if rtts else 0.0
        value = n_max(t_s, r_hz, horizon, dt, rtt_ms / 1000.0)
        inputs = [
            ("t (inference p50)", f"{st.inference_ms_p50:.1f} ms"),
            ("r (per-client rate)", f"{r_hz:.2f} Hz — {r_src}"),
            ("H (chunk size)", f"{st.chunk_size} steps"),
            ("dt (1/trained fps)", f"{dt * 1000:.1f} ms" if dt else "unknown"),
            ("RTT (robot rtt p50 − t, median)", f"{rtt_ms:.1f} ms" + ("" if rtts else " (no robots reporting)")),
            ("N_max", "unknown" if value is None else f"{value:.1f}"),
        ]
        return value, inputs

    def _audit_rate(self, s: _Server, now: float) -> float | None:
        if not s.audit_times:
            return None
        i = bisect.bisect_left(s.audit_times, now - AUDIT_RATE_WINDOW_S)
        return (len(s.audit_times) - i) / AUDIT_RATE_WINDOW_S

    def _server_row(self, s: _Server, now: float) -> ServerRow:
        st = s.status
        status_age = None if s.status_at is None else max(0.0, now - s.status_at)
        value, _ = self._capacity_inputs(s, now)
        active = st.active_sessions if st else 0
        if self._token_gone(s.alive, s.gone_at, now):
            health = "gone"
        elif st is None or (status_age is not None and status_age > STATUS_STALE_S and self._connection == "connected"):
            health = "stale"
        elif st.draining:
            health = "draining"
        elif st.max_sessions and active >= st.max_sessions:
            health = "full"
        elif not st.warmed_up:
            health = "cold"
        else:
            health = "ok"
        m = s.metrics
        rate = s.requests_per_s if s.requests_per_s is not None else self._audit_rate(s, now)
        errors = m.get("errors_total") if "errors_total" in m else (float(s.audit_errors) if s.audit_times else None)
        superseded = m.get("superseded_total") if "superseded_total" in m else (float(s.audit_superseded) if s.audit_times else None)
        model, rev, service = s.ns
        return ServerRow(
            replica=s.replica,
            model_id=(st.model.repo_or_path if st and st.model.repo_or_path else model),
            revision=(st.model.revision if st and st.model.revision else rev),
            service=(st.service if st and st.service else service),
            active_sessions=active,
            max_sessions=st.max_sessions if st else 0,
            load=st.load if st else 0.0,
            requests_per_s=rate,
            errors=errors,
            superseded=superseded,
            health=health,
            n_max=value,
            headroom=None if value is None else int(value) - active,
            inference_ms_p50=st.inference_ms_p50 if st else 0.0,
            draining=bool(st and st.draining),
            alive=s.alive,
            status_age_s=status_age,
            metrics_url=st.metrics_url if st else "",
            metrics_error=s.metrics_error,
            session_robots=tuple(sorted(x.client_uuid for x in st.sessions)) if st else (),
        )


def _aged(e: AuditEntry, age: float) -> AuditEntry:
    return AuditEntry(
        max(0.0, age),
        e.replica,
        e.client_uuid,
        e.session_id,
        e.seq_id,
        e.episode_id,
        e.queue_wait_ms,
        e.inference_ms,
        e.superseded,
        e.outcome,
        e.error,
    )
