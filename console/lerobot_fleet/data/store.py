"""FleetStore: the one place sources write to; the UI reads captures of it.

Sources (the zenoh decoder thread, the status poller, the metrics scraper, fake/replay) call the `on_*`
methods from any thread; each does O(1) work under one lock. Readers take a `Capture` (raw records,
copied under the lock) and derive rows from it outside the lock (`derive.py`). Time comes from an
injected monotonic `clock` (frozen in tests). Nothing here knows about the UI.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import AuditLine, RobotTelemetry, ServerStatus
from lerobot_policy_remote.wire.rollout import RolloutStatus
from lerobot_policy_remote.wire.text import printable

from .aggregates import ReplicaRtts
from .capture import Capture, Link, RefusedRecord, RobotTrail
from .derive import Derivation, robot_detail
from .derive_servers import (
    LINK_LOSS_MARGIN_S,
    RECONNECT_GRACE_S,
    STATUS_STALE_S,
    refused_detail,
    server_detail,
    waiting_reason,
)
from .model import (
    AuditEntry,
    EventLog,
    FleetEvent,
    FleetSnapshot,
    NamespaceSpill,
    RobotDetail,
    RobotState,
    RouterInfo,
    ServerDetail,
    robot_key,
    split_robot_key,
)
from .records import NO_NAMESPACE, RobotEntry, ServerEntry
from .robot_moves import forget_moved, moved_away
from .rollout_read import RolloutRead, RolloutReads

__all__ = [
    "FleetStore",
    "EVENT_HISTORY",
    "METRIC_PREFIX",
    "STATUS_STALE_S",
    "RECONNECT_GRACE_S",
    "LINK_LOSS_MARGIN_S",
    "waiting_reason",
]

METRIC_PREFIX = "lerobot_policy_server_"
RECENT_STALENESS = 5  # staleness samples a robot row carries for the alert rule (its persistence)
EVENT_HISTORY = 2000  # fleet event log lines kept (oldest dropped)


class FleetStore:
    """Thread-safe aggregation of everything the console knows about the fleet."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, router: str = "", connection: str = "connecting"
    ) -> None:
        self.clock = clock
        self.router = router
        self._lock = threading.Lock()
        self._robots: dict[tuple[Namespace, str], RobotEntry] = {}  # keyed by (namespace, client_uuid)
        self._replica_rtts = ReplicaRtts()  # RTT p50 per replica, updated per sample (not a walk per tick)
        self._servers: dict[str, ServerEntry] = {}
        self._connection = connection
        self._link_down_at: float | None = None
        self._link_up_at: float | None = None
        self._listening_since: float | None = None  # since when audit lines could arrive (the audit rate's window)
        self._last_data_at: float | None = None
        self._notes: deque[str] = deque(maxlen=5)
        self._events: deque[tuple[float, str, str, str, str, str]] = deque(maxlen=EVENT_HISTORY)
        self._dropped = 0  # samples a source had to drop (bounded queue overflow)
        self._derive = Derivation()
        self._routers: tuple[RouterInfo, ...] = ()
        self._refused: dict[tuple[str, str], RefusedRecord] = {}  # (CN, replica): servers the routers refuse
        self._spills: dict[tuple[str, str], tuple[int, int, float]] = {}  # (role, id) -> (dropped, limit, last drop)
        self._ids: dict[str, set[Namespace]] = {}  # robot id -> the namespaces it has a row in
        self._rollout = RolloutReads()  # the fleet router's rollout status as last read (sources/rollout.py)

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

    def set_refused(self, refused: Iterable[tuple[str, str, Namespace, str, float]]) -> None:
        """The servers the routers refuse now, as (certificate CN, replica, namespace, notice, seconds since a router
        last refused it): each is a servers-table row and a note while it lasts, and an event when it first appears.
        A source reads them from the routers' ACL log (sources/refused.py)."""
        with self._lock:
            now = self.clock()
            current: dict[tuple[str, str], RefusedRecord] = {}
            for cn, replica, ns, text, age_s in refused:
                cn, replica = printable(cn, 100), printable(replica, 100)
                ns = Namespace(*(printable(part, 100) for part in ns))
                current[(cn, replica)] = RefusedRecord(replica, cn, ns, printable(text, 400), now - max(0.0, age_s))
            for key, rec in current.items():
                if key not in self._refused:
                    self._events.append((now, "warn", "server", rec.notice, "", rec.replica))
            self._refused = current

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

    def count_dropped(self, n: int = 1) -> None:
        """A source dropped `n` samples (its bounded queue was full)."""
        with self._lock:
            self._dropped += n

    @property
    def dropped(self) -> int:
        """Samples the sources dropped so far."""
        with self._lock:
            return self._dropped

    def on_namespace_spill(self, role: str, ident: str, dropped: int, limit: int) -> None:
        """A sample of `ident` in one namespace more than the `limit` it may have was dropped (`dropped` so far)."""
        with self._lock:
            self._spills[(role, ident)] = (dropped, limit, self.clock())

    def on_robot_alive(self, robot_id: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            r = self._robot(robot_id, ns)
            r.ver += 1
            if moved := forget_moved(self._robots, self._ids, self._replica_rtts, r, alive):
                self._events.append((now, "info", "state", moved, robot_id, ""))
            if (ns, robot_id) not in self._robots:  # its token left for another model of its service: no GONE row
                return
            if alive:
                r.gone_at = None
            elif r.alive is not False:  # a repeated DELETE keeps the first vanishing time
                r.gone_at = now
                if self._connection == "connected":
                    self._events.append((now, "warn", "state", f"{robot_id}: liveliness token gone", robot_id, ""))
            r.alive = alive

    def set_rollout(self, status: RolloutStatus | None, error: str = "") -> None:
        """The rollout status just read (None and why: the read failed), with the time of the read."""
        with self._lock:
            self._rollout.read(status, error, self.clock())

    def rollout(self) -> RolloutRead:
        """The rollout as last read, aged now (old once a read failed or the last good one is 3 s old)."""
        with self._lock:
            return self._rollout.at(self.clock())

    def on_server_alive(self, replica: str, alive: bool, ns: Namespace) -> None:
        with self._lock:
            now = self.clock()
            s = self._server(replica, ns)
            if alive:
                s.gone_at = None
            elif s.alive is not False:
                s.gone_at = now
                if self._connection == "connected":
                    self._events.append(
                        (now, "warn", "server", f"server {replica}: liveliness token gone", "", replica)
                    )
            s.alive = alive

    def on_telemetry(self, t: RobotTelemetry, ns: Namespace) -> None:
        with self._lock:
            if moved_away(self._robots, self._ids, t.client_uuid, ns):
                return  # a late sample from the namespace a rollout moved it out of: no second row
            now = self.clock()
            r = self._robot(t.client_uuid, ns)
            state = RobotState.parse(t.state).name
            if not r.history or r.history[-1][1] != state:
                if r.history:
                    sev = (
                        "error" if state in ("DEAD", "STALLED") else ("warn" if RobotState[state].is_fault else "info")
                    )
                    why = f" ({t.last_outcome})" if t.last_outcome and t.last_outcome != "ok" else ""
                    text = f"{t.client_uuid}: {r.history[-1][1]} → {state}{why}"
                    self._events.append((now, sev, "state", text, t.client_uuid, t.replica))
                r.history.append((now, state))
            if r.telemetry is None or t.seq != r.telemetry.seq or t.rtt_p50_ms != r.telemetry.rtt_p50_ms:
                if t.rtt_p50_ms > 0:
                    r.rtt.append(t.rtt_p50_ms)
                r.staleness.append(t.staleness_s)
                r.queue.append(t.queue_s)
                r.recent = (*r.recent[1 - RECENT_STALENESS :], t.staleness_s)
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
                self._events.append(
                    (
                        now,
                        "warn",
                        "audit",
                        f"{replica} refused {line.client_uuid}: {line.outcome}"
                        + (f" — {line.error}" if line.error else ""),
                        line.client_uuid,
                        replica,
                    )
                )
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
                self._events.append(
                    (
                        now,
                        "warn" if status.draining else "info",
                        "drain",
                        f"server {status.replica}: {'draining' if status.draining else 'accepting sessions again'}",
                        "",
                        status.replica,
                    )
                )
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

    def capture(self) -> Capture:
        """The raw records as they are now (copied under the lock; rows are derived from it outside)."""
        with self._lock:
            now = self.clock()
            return Capture(
                now=now,
                router=self.router,
                link=self._link(),
                last_data_at=self._last_data_at,
                robots=tuple([r.record() for r in self._robots.values()]),
                servers=tuple([s.record(now) for s in self._servers.values()]),
                rtts=self._replica_rtts.lists(),
                notes=tuple(self._notes) + tuple(r.notice for r in self._refused.values()),
                routers=self._routers,
                spills=tuple(
                    NamespaceSpill(role, ident, n, limit, max(0.0, now - at))
                    for (role, ident), (n, limit, at) in sorted(self._spills.items())
                ),
                refused=tuple(self._refused.values()),
            )

    def snapshot(self) -> FleetSnapshot:
        """The fleet's rows now: a capture, derived (`derive.Derivation`) outside the lock."""
        return self._derive.snapshot(self.capture())

    def derive(self, cap: Capture) -> FleetSnapshot:  # a tick derives more than the rows from its one capture
        return self._derive.snapshot(cap)

    def robot_detail(self, key: str) -> RobotDetail | None:
        """By row key (`robot_key`); a bare robot id finds that id in any namespace."""
        with self._lock:
            parsed = split_robot_key(key)
            r = (
                self._robots.get(parsed)
                if parsed
                else next((x for x in self._robots.values() if x.robot_id == key), None)
            )
            if r is None:
                return None
            now = self.clock()
            trail = RobotTrail(
                tuple(r.history), tuple(r.rtt), tuple(r.staleness), tuple(r.queue), tuple(r.audit_at), tuple(r.audit)
            )
            rec, link, rtts = r.record(), self._link(), self._replica_rtts.lists()
            servers = tuple(s.record(now) for s in self._servers.values())
        return robot_detail(rec, trail, link, now, servers, rtts)

    def server_detail(self, replica: str) -> ServerDetail | None:
        """A replica's detail; one the routers refuse, with no fresh word of its own, shows the refusal and its fix."""
        with self._lock:
            s = self._servers.get(replica)
            now = self.clock()
            refused = next((r for r in self._refused.values() if r.replica == replica), None)
            if s is None:
                return None if refused is None else refused_detail(refused, now)
            rec, audit, link, rtts = s.record(now), tuple(s.audit), self._link(), self._replica_rtts.lists()
        detail = server_detail(rec, audit, link, now, rtts)
        return refused_detail(refused, now) if refused is not None and detail.row.is_stale else detail

    # ------------------------------------------------------------ internals (lock held)

    def _link(self) -> Link:
        return Link(self._connection, self._link_down_at, self._link_up_at, self._listening_since)

    def _robot(self, robot_id: str, ns: Namespace) -> RobotEntry:
        r = self._robots.get((ns, robot_id))
        if r is None:
            r = self._robots[(ns, robot_id)] = RobotEntry(robot_id, ns, key=robot_key(ns, robot_id))
            self._ids.setdefault(robot_id, set()).add(ns)
        return r

    def _server(self, replica: str, ns: Namespace) -> ServerEntry:
        s = self._servers.get(replica)
        if s is None:
            s = self._servers[replica] = ServerEntry(replica, ns)
        elif ns != NO_NAMESPACE:
            s.ns = ns
        return s
