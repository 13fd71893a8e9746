"""A capture's servers -> their rows, details and the waiting reasons robots read from them (pure).

A replica's health and capacity come from its record (status, token, scrapes, audit lines); a server the
routers refuse has a row of its own from their board, its figures unknown. Part of the derivation (`derive.py`).
"""

from __future__ import annotations

from collections.abc import Iterable

from lerobot_policy_remote.wire.keys import Namespace

from .capacity import Capacity, capacity, request_rate
from .capture import Link, RefusedRecord, ServerRecord
from .model import AuditEntry, ServerDetail, ServerRow, SessionEntry

STATUS_STALE_S = 6.0  # a server whose status has not answered for this long shows as "stale"
RECONNECT_GRACE_S = 3.0  # after the router link comes back, wait this long before calling tokens gone
LINK_LOSS_MARGIN_S = 0.5  # token deletions this close before we noticed the link loss are blamed on the link


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
        engine=st.engine if st else "",
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


def server_detail(
    rec: ServerRecord, audit: tuple[tuple[float, AuditEntry], ...], link: Link, now: float, rtts: dict[str, list[float]]
) -> ServerDetail:
    st = rec.status
    held = st.sessions if st is not None else ()
    sessions = tuple(
        SessionEntry(x.session_id, x.client_uuid, x.episode_id, x.requests, x.superseded, x.errors) for x in held
    )
    return ServerDetail(
        row=server_row(rec, link, now, rtts),
        sessions=sessions,
        metrics=tuple(sorted(rec.metrics.items())),
        audit=tuple(aged(e, now - t) for t, e in audit),
        capacity_inputs=server_capacity(rec, link, now, rtts, explain=True).inputs,
        notes=(f"metrics: {rec.metrics_error}",) if rec.metrics_error else (),
    )


def aged(e: AuditEntry, age: float) -> AuditEntry:
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
