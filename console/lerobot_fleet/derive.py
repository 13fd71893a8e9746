"""What the store captured -> the rows and aggregates a tick shows (pure: no lock, no clock, no Textual).

`FleetStore.capture()` copies the raw records under its lock; `Derivation.snapshot` turns one capture
into a `FleetSnapshot` outside that lock. A robot's figures are rebuilt only when its record changed
(its version, or whether its token counts as gone); otherwise only its ages are new. Every age is
taken from the capture's `now`, so a row that did not change still shows how old its figures are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from lerobot_policy_remote.wire.keys import Namespace

from .capacity import Capacity, capacity, request_rate
from .capture import Capture, Link, RefusedRecord, RobotRecord, RobotTrail, ServerRecord
from .model import (
    AuditEntry,
    FleetSnapshot,
    RobotDetail,
    RobotRow,
    RobotState,
    ServerDetail,
    ServerRow,
    SessionEntry,
)

STATUS_STALE_S = 6.0  # a server whose status has not answered for this long shows as "stale"
RECONNECT_GRACE_S = 3.0  # after the router link comes back, wait this long before calling tokens gone
LINK_LOSS_MARGIN_S = 0.5  # token deletions this close before we noticed the link loss are blamed on the link
WAITING_STATES = (RobotState.RECONNECTING, RobotState.CONNECTING)  # robots that may be waiting for a replica with room

_STATES = {s.name: s for s in RobotState}
ROW_FIELDS = (  # RobotRow's fields in order: `robot_figures` fills them positionally
    "robot_id",
    "state",
    "reported_state",
    "model_id",
    "revision",
    "service",
    "session_id",
    "replica",
    "episode_id",
    "staleness_s",
    "queue_s",
    "rtt_p50_ms",
    "rtt_p95_ms",
    "delay_steps",
    "requests",
    "superseded",
    "errors",
    "fallback_count",
    "last_outcome",
    "fps",
    "alive",
    "seen_age_s",
    "ns",
    "state_age_s",
    "waiting",
    "network_ms",
    "queue_wait_ms",
    "inference_ms",
    "action_order",
    "row_key",
    "max_action_age_s",
    "recent_staleness",
    "rtc",
)
if tuple(f.name for f in fields(RobotRow)) != ROW_FIELDS:
    raise ImportError("RobotRow's fields changed: update derive.ROW_FIELDS and robot_figures to the new order")
_ROW_DEFAULTS = {f.name: f.default for f in fields(RobotRow)}  # the required ones: always given
_SEEN, _STATE_AGE = ROW_FIELDS.index("seen_age_s"), ROW_FIELDS.index("state_age_s")


def token_gone(link: Link, alive: bool | None, gone_at: float | None, now: float) -> bool:
    """A vanished token means gone only if the console's own link was up when it vanished.

    When the router goes away every token is reported deleted; those robots are not gone, the
    console is blind (the header says so). After a reconnect, tokens are re-announced with
    history; they get RECONNECT_GRACE_S before the missing ones count as gone.
    """
    if alive is not False or gone_at is None:
        return False
    if link.connection != "connected":
        return link.down_at is None or gone_at < link.down_at - LINK_LOSS_MARGIN_S
    if link.up_at is None or gone_at > link.up_at:
        return True
    return now - link.up_at > RECONNECT_GRACE_S


def server_capacity(
    s: ServerRecord,
    link: Link,
    now: float,
    rtts: dict[str, list[float]],
    explain: bool = False,
) -> Capacity:
    """Request rate, N_max and room of one replica (`capacity.py`, the code `status` and `doctor` run too)."""
    heard = None if link.listening_since is None else now - link.listening_since
    audit = s.audit_recent if s.audit_lines else None
    rate = request_rate(s.status.requests_per_s if s.status else None, s.scraped_per_s, audit, heard)
    return capacity(s.status, rate, rtts.get(s.replica, ()), explain)


def server_row(s: ServerRecord, link: Link, now: float, rtts: dict[str, list[float]]) -> ServerRow:
    st = s.status
    status_age = None if s.status_at is None else max(0.0, now - s.status_at)
    cap = server_capacity(s, link, now, rtts)
    active = st.active_sessions if st else 0
    if token_gone(link, s.alive, s.gone_at, now):
        health = "gone"
    elif st is None or (status_age is not None and status_age > STATUS_STALE_S and link.connection == "connected"):
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
    audited = s.audit_lines > 0
    errors = m.get("errors_total") if "errors_total" in m else (float(s.audit_errors) if audited else None)
    audit_superseded = float(s.audit_superseded) if audited else None
    superseded = m.get("superseded_total") if "superseded_total" in m else audit_superseded
    model, rev, service = s.ns
    room_left, room_limit = (None, "") if health in ("gone", "stale") else (cap.room, cap.room_limit)
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


def refused_row(r: RefusedRecord, now: float) -> ServerRow:
    """A server the routers refuse: its name, certificate and namespace from their boards, its figures unknown."""
    model, rev, service = r.ns
    return ServerRow(
        replica=r.replica,
        model_id=model,
        revision=rev,
        service=service,
        health="refused",
        seen_age_s=max(0.0, now - r.refused_at),
        ns=r.ns,
        cn=r.cn,
    )


def refused_detail(r: RefusedRecord, now: float) -> ServerDetail:
    """A refused server's detail: its row and the notice that names the fix."""
    return ServerDetail(row=refused_row(r, now), notes=(r.notice,))


def with_refused(servers: tuple[ServerRow, ...], refused: Iterable[RefusedRecord], now: float) -> tuple[ServerRow, ...]:
    """The servers table with a row per refused server. A replica's own fresh status wins (the router let it through);
    a refused one replaces its gone or stale row (a restart under a certificate the router refuses)."""
    rows = {s.replica: s for s in servers}
    for r in refused:
        held = rows.get(r.replica)
        if held is None or held.is_stale or held.is_refused:
            rows[r.replica] = refused_row(r, now)
    return tuple(rows.values())


def waiting_reason(ns: Namespace, servers: Iterable[ServerRow]) -> str:
    """Why a robot without a session is not getting one, from the replicas of its service.

    Empty when some replica has room (the robot is simply connecting). Names every replica and what
    stops it taking the robot, so the operator sees what would free it.
    """
    peers = sorted((s for s in servers if s.ns == ns), key=lambda s: s.replica)
    live = [s for s in peers if s.health not in ("gone", "refused")]
    if not live:
        gone = f" ({', '.join(f'{s.replica} {s.health}' for s in peers)})" if peers else ""
        return "waiting: no replica serves this model/service" + gone
    if any(s.headroom is not None and s.headroom > 0 and s.health in ("ok", "cold") for s in live):
        return ""
    why = []
    blocked = ("gone", "refused", "stale", "draining", "cordoned")
    for s in sorted(peers, key=lambda s: (s.health in blocked, s.replica)):  # the ones that may free up first
        if s.health in blocked:
            why.append(f"{s.replica} {s.health}")
        elif s.max_sessions and s.active_sessions >= s.max_sessions:
            why.append(f"{s.replica} {s.active_sessions}/{s.max_sessions}")
        else:
            left = s.headroom if s.headroom is not None else "?"
            why.append(f"{s.replica} room {left} ({s.room_limit or 'unknown'})")
    return f"waiting: no replica with room ({', '.join(why)})"


def robot_figures(rec: RobotRecord, gone: bool, waiting: str) -> list[object]:
    """A robot row's fields in `RobotRow` order (`ROW_FIELDS`), its two ages left None: what changes only when its
    record does. Positional, since this runs for every robot that reported since the last tick."""
    t = rec.telemetry
    model, rev, service = rec.ns
    if gone:
        state = RobotState.GONE
    elif t is None:
        state = RobotState.UNKNOWN
    else:
        state = _STATES.get(t.state) or RobotState.parse(t.state)
    if t is None:
        return [
            {
                "robot_id": rec.robot_id,
                "state": state,
                "reported_state": "",
                "model_id": model,
                "revision": rev,
                "service": service,
                "alive": rec.alive,
                "ns": rec.ns,
                "row_key": rec.key,
            }.get(name, default)
            for name, default in _ROW_DEFAULTS.items()
        ]
    return [
        rec.robot_id,
        state,
        t.state,
        t.model_id or model,
        rev,
        service,
        t.session_id,
        t.replica,
        t.episode_id,
        t.staleness_s,
        t.queue_s,
        t.rtt_p50_ms,
        t.rtt_p95_ms,
        t.delay_steps,
        t.requests,
        t.superseded,
        t.errors,
        t.fallback_count,
        t.last_outcome,
        t.fps,
        rec.alive,
        None,
        rec.ns,
        None,
        waiting if state in WAITING_STATES else "",
        t.network_ms_p50 or None,
        t.queue_wait_ms_p50 or None,
        t.inference_ms_p50 or None,
        t.action_order,
        rec.key,
        t.max_action_age_s or None,
        rec.recent_staleness,
        t.rtc,
    ]


def robot_row(rec: RobotRecord, link: Link, now: float, servers: Iterable[ServerRow]) -> RobotRow:
    """One robot's row built from scratch (detail screens; `Derivation` keeps the figures between ticks)."""
    gone = token_gone(link, rec.alive, rec.gone_at, now)
    values = robot_figures(rec, gone, _waiting(rec, gone, servers))
    values[_SEEN], values[_STATE_AGE] = _ages(rec, gone, now)
    return RobotRow(*values)


def _waiting(rec: RobotRecord, gone: bool, servers: Iterable[ServerRow]) -> str:
    t = rec.telemetry
    if gone or t is None or (_STATES.get(t.state) or RobotState.parse(t.state)) not in WAITING_STATES:
        return ""
    return waiting_reason(rec.ns, servers)


def _ages(rec: RobotRecord, gone: bool, now: float) -> tuple[float | None, float | None]:
    """(seen age, state age) now: how old its figures are, and how long it has been in its state."""
    since = rec.gone_at if gone else rec.state_since
    seen = None if rec.seen_at is None else max(0.0, now - rec.seen_at)
    return seen, None if since is None else max(0.0, now - since)


def robot_detail(
    rec: RobotRecord,
    trail: RobotTrail,
    link: Link,
    now: float,
    servers: tuple[ServerRecord, ...],
    rtts: dict[str, list[float]],
) -> RobotDetail:
    rows = [server_row(s, link, now, rtts) for s in servers]
    return RobotDetail(
        row=robot_row(rec, link, now, rows),
        history=tuple((max(0.0, now - t), st) for t, st in trail.history),
        rtt_history=trail.rtt,
        staleness_history=trail.staleness,
        queue_history=trail.queue,
        audit=tuple(_aged(e, now - t) for e, t in zip(trail.audit, trail.audit_at, strict=True)),
    )


def server_detail(
    rec: ServerRecord, audit: tuple[tuple[float, AuditEntry], ...], link: Link, now: float, rtts: dict[str, list[float]]
) -> ServerDetail:
    st = rec.status
    held = st.sessions if st is not None else ()
    sessions = tuple(SessionEntry(x.session_id, x.client_uuid, x.episode_id, x.requests, x.superseded, x.errors) for x in held)
    return ServerDetail(
        row=server_row(rec, link, now, rtts),
        sessions=sessions,
        metrics=tuple(sorted(rec.metrics.items())),
        audit=tuple(_aged(e, now - t) for t, e in audit),
        capacity_inputs=server_capacity(rec, link, now, rtts, explain=True).inputs,
        notes=(f"metrics: {rec.metrics_error}",) if rec.metrics_error else (),
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


class Derivation:
    """Captures -> snapshots, keeping each robot's figures while its record is unchanged.

    The figures of a robot waiting for a replica are rebuilt every time: its `waiting` text depends on
    the servers. Everything else about a row that did not change is reused, and only its two ages are
    computed again (a tick at 2,000 robots builds 2,000 rows either way; most of them cheaply).
    """

    def __init__(self) -> None:
        # row key -> (version, gone, state, the row's fields in order with its ages left to fill)
        self._figures: dict[str, tuple[int, bool, RobotState, list[object]]] = {}

    def snapshot(self, cap: Capture) -> FleetSnapshot:
        now, link = cap.now, cap.link
        servers = tuple(server_row(s, link, now, cap.rtts) for s in cap.servers)
        if cap.refused:
            servers = with_refused(servers, cap.refused, now)
        memo = self._figures
        waiting: dict[Namespace, str] = {}
        rows = []
        for rec in cap.robots:
            gone = token_gone(link, rec.alive, rec.gone_at, now)
            held = memo.get(rec.key)
            if held is None or held[0] != rec.ver or held[1] != gone or held[2] in WAITING_STATES:
                why = ""
                if not gone and rec.telemetry is not None:
                    if rec.ns not in waiting:
                        waiting[rec.ns] = waiting_reason(rec.ns, servers)
                    why = waiting[rec.ns]
                figures = robot_figures(rec, gone, why)
                state = figures[1]
                assert isinstance(state, RobotState)
                held = memo[rec.key] = (rec.ver, gone, state, figures)
            values = held[3].copy()
            since = rec.gone_at if gone else rec.state_since
            values[_SEEN] = None if rec.seen_at is None else max(0.0, now - rec.seen_at)
            values[_STATE_AGE] = None if since is None else max(0.0, now - since)
            rows.append(RobotRow(*values))
        if len(memo) > 2 * len(cap.robots) + 64:  # robots the store no longer holds
            keep = {rec.key for rec in cap.robots}
            self._figures = {k: v for k, v in memo.items() if k in keep}
        return FleetSnapshot(
            router=cap.router,
            connection=link.connection,
            data_age_s=None if cap.last_data_at is None else max(0.0, now - cap.last_data_at),
            robots=tuple(rows),
            servers=servers,
            notes=cap.notes,
            routers=cap.routers,
            spills=cap.spills,
        )
