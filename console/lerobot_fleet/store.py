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

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry, ServerStatus
from lerobot_policy_remote.wire.text import printable

from .aggregates import ReplicaRtts
from .capacity import AUDIT_RATE_WINDOW_S, Capacity, capacity, request_rate
from .model import (
    AuditEntry,
    EventLog,
    FleetEvent,
    FleetSnapshot,
    NamespaceSpill,
    RobotDetail,
    RobotRow,
    RobotState,
    RouterInfo,
    ServerDetail,
    ServerRow,
    SessionEntry,
    make_robot_row,
    robot_key,
    split_robot_key,
)
from .ui_gate import UiGate

NO_NAMESPACE = Namespace("", "", "")  # not learnt from a key yet
METRIC_PREFIX = "lerobot_policy_server_"
STATUS_STALE_S = 6.0  # a server whose status has not answered for this long shows as "stale"
RECONNECT_GRACE_S = 3.0  # after the router link comes back, wait this long before calling tokens gone
LINK_LOSS_MARGIN_S = 0.5  # token deletions this close before we noticed the link loss are blamed on the link
RECENT_STALENESS = 5  # staleness samples a robot row carries for the alert rule (its persistence)
TREND_SAMPLES = 180  # per-robot trend length: about 3 minutes of 1 Hz telemetry
WAITING_STATES = (RobotState.RECONNECTING, RobotState.CONNECTING)  # robots that may be waiting for a replica with room
EVENT_HISTORY = 2000  # fleet event log lines kept (oldest dropped)


@dataclass
class _Robot:
    robot_id: str
    ns: Namespace = NO_NAMESPACE
    key: str = ""
    telemetry: RobotTelemetry | None = None
    ver: int = 0  # bumped by every change; the cached row below is valid for (ver, gone)
    row: RobotRow | None = None
    row_ver: tuple[int, bool] = (-1, False)
    seen_at: float | None = None
    alive: bool | None = None
    gone_at: float | None = None
    history: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=40))
    rtt: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    staleness: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    queue: deque[float] = field(default_factory=lambda: deque(maxlen=TREND_SAMPLES))
    audit: deque[AuditEntry] = field(default_factory=lambda: deque(maxlen=50))
    audit_at: deque[float] = field(default_factory=lambda: deque(maxlen=50))


@dataclass
class _Server:
    replica: str
    ns: Namespace = NO_NAMESPACE
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
        self._robots: dict[tuple[Namespace, str], _Robot] = {}  # keyed by (namespace, client_uuid)
        self._replica_rtts = ReplicaRtts()  # RTT p50 per replica, updated per sample (not a walk per tick)
        self._servers: dict[str, _Server] = {}
        self._connection = connection
        self._link_down_at: float | None = None
        self._link_up_at: float | None = None
        self._listening_since: float | None = None  # since when audit lines could arrive (the audit rate's window)
        self._last_data_at: float | None = None
        self._notes: deque[str] = deque(maxlen=5)
        self._events: deque[tuple[float, str, str, str, str, str]] = deque(maxlen=EVENT_HISTORY)
        self.dropped = 0  # samples the source had to drop (bounded queue overflow)
        self.ui_gate = UiGate()  # sources' ingest threads yield to a UI refresh (ui_gate.py)
        self._routers: tuple[RouterInfo, ...] = ()
        self._spills: dict[tuple[str, str], tuple[int, int, float]] = {}  # (role, id) -> (dropped, limit, last drop)

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
            if self._listening_since is None and state not in ("connecting", "disconnected"):
                self._listening_since = now  # first connected (or a fake/replay feed): audit lines arrive from here on
            self._connection = state

    def set_routers(self, routers: tuple[RouterInfo, ...]) -> None:
        """The routers of the mesh as last read from the admin space."""
        with self._lock:
            self._routers = tuple(sorted(routers, key=lambda r: (not r.connected, r.zid)))

    def note(self, text: str) -> None:
        """A short operator-facing message from a source (e.g. a failed scrape); newest last. Notes quote keys
        and peers' errors, so they are made printable here, the one place they all pass."""
        text = printable(text, 200)
        with self._lock:
            if not self._notes or self._notes[-1] != text:
                self._notes.append(text)

    def event(self, severity: str, kind: str, text: str, robot: str = "", server: str = "") -> None:
        """Add a line to the fleet event log (actions and alerts come from the app; the rest from here)."""
        with self._lock:
            self._events.append((self.clock(), severity, kind, text, robot, server))

    def events(self) -> tuple[FleetEvent, ...]:
        """The event log, newest first, ages relative to now."""
        return self.event_log().events

    def event_log(self) -> EventLog:
        """The event log frozen now (a copy of the records; rows are built when first read)."""
        with self._lock:
            return EventLog(self.clock(), tuple(self._events))

    def on_namespace_spill(self, role: str, ident: str, dropped: int, limit: int) -> None:
        """A sample of `ident` in one namespace more than the `limit` it may have was dropped (`dropped` so far)."""
        with self._lock:
            self._spills[(role, ident)] = (dropped, limit, self.clock())

    def on_robot_alive(self, robot_id: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            r = self._robot(robot_id, ns)
            r.ver += 1
            if alive:
                r.gone_at = None
            elif r.alive is not False:  # a repeated DELETE keeps the first vanishing time
                r.gone_at = now
                if self._connection == "connected":
                    self._events.append((now, "warn", "state", f"{robot_id}: liveliness token gone", robot_id, ""))
            r.alive = alive

    def on_server_alive(self, replica: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            s = self._server(replica, ns)
            if alive:
                s.gone_at = None
            elif s.alive is not False:
                s.gone_at = now
                if self._connection == "connected":
                    self._events.append((now, "warn", "server", f"server {replica}: liveliness token gone", "", replica))
            s.alive = alive

    def on_telemetry(self, t: RobotTelemetry, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            r = self._robot(t.client_uuid, ns)
            state = RobotState.parse(t.state).name
            if not r.history or r.history[-1][1] != state:
                if r.history:
                    sev = "error" if state in ("DEAD", "STALLED") else ("warn" if RobotState[state].is_fault else "info")
                    why = f" ({t.last_outcome})" if t.last_outcome and t.last_outcome != "ok" else ""
                    self._events.append((now, sev, "state", f"{t.client_uuid}: {r.history[-1][1]} → {state}{why}", t.client_uuid, t.replica))
                r.history.append((now, state))
            if r.telemetry is None or t.seq != r.telemetry.seq or t.rtt_p50_ms != r.telemetry.rtt_p50_ms:
                if t.rtt_p50_ms > 0:
                    r.rtt.append(t.rtt_p50_ms)
                r.staleness.append(t.staleness_s)
                r.queue.append(t.queue_s)
            r.telemetry = t
            self._replica_rtts.update(r.key, t.replica, t.rtt_p50_ms)
            r.ver += 1
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
                self._events.append((now, "warn", "audit", f"{replica} refused {line.client_uuid}: {line.outcome}" + (f" — {line.error}" if line.error else ""), line.client_uuid, replica))
            r = self._robots.get((ns, line.client_uuid))
            if r is not None:
                r.audit.append(entry)
                r.audit_at.append(now)
            self._last_data_at = now

    def on_status(self, status: ServerStatus, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            s = self._server(status.replica, ns)
            if s.status is not None and status.draining != s.status.draining:
                self._events.append((now, "warn" if status.draining else "info", "drain",
                                     f"server {status.replica}: {'draining' if status.draining else 'accepting sessions again'}", "", status.replica))
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
            rtts = self._rtts_by_replica()
            servers = tuple(self._server_row(s, now, rtts) for s in self._servers.values())
            robots = tuple(self._robot_row(r, now, servers) for r in self._robots.values())
            age = None if self._last_data_at is None else max(0.0, now - self._last_data_at)
            return FleetSnapshot(
                router=self.router,
                connection=self._connection,
                data_age_s=age,
                robots=robots,
                servers=servers,
                notes=tuple(self._notes),
                routers=self._routers,
                spills=tuple(NamespaceSpill(role, ident, n, limit, max(0.0, now - at))
                             for (role, ident), (n, limit, at) in sorted(self._spills.items())),
            )

    def robot_detail(self, key: str) -> RobotDetail | None:
        """By row key (`robot_key`); a bare robot id finds that id in any namespace."""
        with self._lock:
            parsed = split_robot_key(key)
            r = self._robots.get(parsed) if parsed else next((x for x in self._robots.values() if x.robot_id == key), None)
            if r is None:
                return None
            now = self.clock()
            servers = tuple(self._server_row(s, now) for s in self._servers.values())
            audit = tuple(_aged(e, now - t) for e, t in zip(r.audit, r.audit_at, strict=True))
            return RobotDetail(
                row=self._robot_row(r, now, servers),
                history=tuple((max(0.0, now - t), st) for t, st in r.history),
                rtt_history=tuple(r.rtt),
                staleness_history=tuple(r.staleness),
                queue_history=tuple(r.queue),
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
                capacity_inputs=self._capacity(s, now, explain=True).inputs,
                notes=notes,
            )

    # ------------------------------------------------------------ internals (lock held)

    def _robot(self, robot_id: str, ns: Namespace) -> _Robot:
        r = self._robots.get((ns, robot_id))
        if r is None:
            r = self._robots[(ns, robot_id)] = _Robot(robot_id, ns, key=robot_key(ns, robot_id))
        return r

    def _server(self, replica: str, ns: Namespace) -> _Server:
        s = self._servers.get(replica)
        if s is None:
            s = self._servers[replica] = _Server(replica, ns)
        elif ns != NO_NAMESPACE:
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

    def _robot_row(self, r: _Robot, now: float, servers: tuple[ServerRow, ...] = ()) -> RobotRow:
        """The robot's row. Between changes only its ages move: the row built at the last change is copied
        with new ages (about 30x cheaper than building it; the profile is in docs/decisions.md)."""
        t = r.telemetry
        seen = None if r.seen_at is None else max(0.0, now - r.seen_at)
        state_since = r.history[-1][0] if r.history else None
        gone = self._token_gone(r.alive, r.gone_at, now)
        if gone:
            state_since = r.gone_at
        state_age = None if state_since is None else max(0.0, now - state_since)
        cached = r.row
        if cached is not None and r.row_ver == (r.ver, gone) and cached.state not in WAITING_STATES:  # waiting depends on servers
            row = object.__new__(RobotRow)
            d = row.__dict__
            d.update(cached.__dict__)
            d["seen_age_s"] = seen
            d["state_age_s"] = state_age
            return row
        row = self._build_robot_row(r, t, gone, seen, state_since, now, servers)
        r.row, r.row_ver = row, (r.ver, gone)
        return row

    def _build_robot_row(self, r: _Robot, t: RobotTelemetry | None, gone: bool, seen: float | None, state_since: float | None,
                         now: float, servers: tuple[ServerRow, ...]) -> RobotRow:
        if gone:
            state = RobotState.GONE
        elif t is None:
            state = RobotState.UNKNOWN
        else:
            state = RobotState.parse(t.state)
        model, rev, service = r.ns
        if t is None:
            return make_robot_row(robot_id=r.robot_id, state=state, reported_state="", model_id=model, revision=rev, service=service,
                                  alive=r.alive, seen_age_s=seen, ns=r.ns, row_key=r.key,
                                  state_age_s=None if state_since is None else max(0.0, now - state_since))
        waiting = ""
        if state in WAITING_STATES:  # no working session, whatever its last telemetry still names
            waiting = waiting_reason(r.ns, servers)
        return make_robot_row(
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
            ns=r.ns,
            state_age_s=None if state_since is None else max(0.0, now - state_since),
            waiting=waiting,
            network_ms=t.network_ms_p50 or None,
            queue_wait_ms=t.queue_wait_ms_p50 or None,
            inference_ms=t.inference_ms_p50 or None,
            action_order=t.action_order,
            row_key=r.key,
            max_action_age_s=t.max_action_age_s or None,
            rtc=t.rtc,
            recent_staleness=tuple(r.staleness[i] for i in range(-min(RECENT_STALENESS, len(r.staleness)), 0)),  # O(1) per item at a deque's end
        )

    def _rtts_by_replica(self) -> dict[str, list[float]]:
        """Robot-reported RTT p50 per replica, kept incrementally as telemetry arrives (`aggregates.ReplicaRtts`)."""
        return self._replica_rtts.lists()

    def _capacity(self, s: _Server, now: float, rtts_by_replica: dict[str, list[float]] | None = None,
                  explain: bool = False) -> Capacity:
        """Request rate, N_max and room of one replica (`capacity.py`, the code `status` and `doctor` run too)."""
        st = s.status
        audit_lines = None
        if s.audit_times:
            audit_lines = len(s.audit_times) - bisect.bisect_left(s.audit_times, now - AUDIT_RATE_WINDOW_S)
        heard = None if self._listening_since is None else now - self._listening_since
        rate = request_rate(st.requests_per_s if st else None, s.requests_per_s, audit_lines, heard)
        if rtts_by_replica is None:
            rtts_by_replica = self._rtts_by_replica()
        return capacity(st, rate, rtts_by_replica.get(s.replica, ()), explain)

    def _server_row(self, s: _Server, now: float, rtts: dict[str, list[float]] | None = None) -> ServerRow:
        st = s.status
        status_age = None if s.status_at is None else max(0.0, now - s.status_at)
        cap = self._capacity(s, now, rtts)
        active = st.active_sessions if st else 0
        if self._token_gone(s.alive, s.gone_at, now):
            health = "gone"
        elif st is None or (status_age is not None and status_age > STATUS_STALE_S and self._connection == "connected"):
            health = "stale"
        elif st.draining:
            health = "draining"
        elif st.cordoned:
            health = "cordoned"
        elif st.max_sessions and active >= st.max_sessions:
            health = "full"
        elif not st.warmed_up:
            health = "cold"
        else:
            health = "ok"
        m = s.metrics
        errors = m.get("errors_total") if "errors_total" in m else (float(s.audit_errors) if s.audit_times else None)
        superseded = m.get("superseded_total") if "superseded_total" in m else (float(s.audit_superseded) if s.audit_times else None)
        model, rev, service = s.ns
        gone = health == "gone"
        room_left, room_limit = (None, "") if gone or health == "stale" else (cap.room, cap.room_limit)
        heard = [a for a in (status_age, None if s.gone_at is None else max(0.0, now - s.gone_at)) if a is not None]
        return ServerRow(
            replica=s.replica,
            model_id=(st.model.repo_or_path if st and st.model.repo_or_path else model),
            revision=(st.model.revision if st and st.model.revision else rev),
            service=(st.service if st and st.service else service),
            active_sessions=active,
            max_sessions=st.max_sessions if st else 0,
            load=st.load if st else 0.0,
            requests_per_s=cap.requests_per_s,
            errors=errors,
            superseded=superseded,
            health=health,
            n_max=cap.n_max,
            headroom=room_left,
            room_limit=room_limit,
            inference_ms_p50=st.inference_ms_p50 if st else 0.0,
            draining=bool(st and st.draining),
            alive=s.alive,
            status_age_s=status_age,
            metrics_url=st.metrics_url if st else "",
            metrics_error=s.metrics_error,
            session_robots=tuple(sorted(x.client_uuid for x in st.sessions)) if st else (),
            seen_age_s=min(heard) if heard else None,
            ns=s.ns,
            cordoned=bool(st and st.cordoned),
            rate_source=cap.rate_source,
        )


def waiting_reason(ns: Namespace, servers: tuple[ServerRow, ...]) -> str:
    """Why a robot without a session is not getting one, from the replicas of its service.

    Empty when some replica has room (the robot is simply connecting). Names every replica and what
    stops it taking the robot, so the operator sees what would free it.
    """
    peers = sorted((s for s in servers if s.ns == ns), key=lambda s: s.replica)
    live = [s for s in peers if s.health != "gone"]
    if not live:
        return "waiting: no replica serves this model/service" + (f" ({', '.join(f'{s.replica} gone' for s in peers)})" if peers else "")
    if any(s.headroom is not None and s.headroom > 0 and s.health in ("ok", "cold") for s in live):
        return ""
    why = []
    for s in sorted(peers, key=lambda s: (s.health in ("gone", "stale", "draining", "cordoned"), s.replica)):  # may free up first
        if s.health in ("gone", "stale", "draining", "cordoned"):
            why.append(f"{s.replica} {s.health}")
        elif s.max_sessions and s.active_sessions >= s.max_sessions:
            why.append(f"{s.replica} {s.active_sessions}/{s.max_sessions}")
        else:
            why.append(f"{s.replica} room {s.headroom if s.headroom is not None else '?'} ({s.room_limit or 'unknown'})")
    return f"waiting: no replica with room ({', '.join(why)})"


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
