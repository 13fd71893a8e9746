"""What the store captured -> the rows and aggregates a tick shows (pure: no lock, no clock, no Textual).

`FleetStore.capture()` copies the raw records under its lock; `Derivation.snapshot` turns one capture
into a `FleetSnapshot` outside that lock. A robot's figures are rebuilt only when its record changed
(its version, or whether its token counts as gone); otherwise only its ages are new. Every age is
taken from the capture's `now`, so a row that did not change still shows how old its figures are.
The servers' rows come from `derive_servers.py`; this module builds the robots' rows and the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from lerobot_policy_remote.wire.keys import Namespace

from .capture import Capture, Link, RobotRecord, RobotTrail, ServerRecord
from .derive_servers import aged, server_row, token_gone, waiting_reason, with_refused
from .model import FleetSnapshot, RobotDetail, RobotRow, RobotState, ServerRow

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
# A row's fields in `ROW_FIELDS` order, each of its own type, spread into `RobotRow(*values)`: no list type says
# "str, RobotState, str, ...", so the order is checked against RobotRow at import (above), not by the type checker.
Figures = list[Any]


def robot_figures(rec: RobotRecord, gone: bool, waiting: str) -> Figures:
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
        audit=tuple(aged(e, now - t) for e, t in zip(trail.audit, trail.audit_at, strict=True)),
    )


class Derivation:
    """Captures -> snapshots, keeping each robot's figures while its record is unchanged.

    The figures of a robot waiting for a replica are rebuilt every time: its `waiting` text depends on
    the servers. Everything else about a row that did not change is reused, and only its two ages are
    computed again (a tick at 2,000 robots builds 2,000 rows either way; most of them cheaply).
    """

    def __init__(self) -> None:
        # row key -> (version, gone, state, the row's fields in order with its ages left to fill)
        self._figures: dict[str, tuple[int, bool, RobotState, Figures]] = {}

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
