"""Pure fleet state: row dataclasses, state metadata, derivations (staleness buckets, N_max, sparklines).

No Textual, no Zenoh, no clock reads: every function takes the time it needs as an argument, so the
whole module is deterministic and unit-testable (the UI and the snapshot tests depend on that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "RobotState",
    "RobotRow",
    "ServerRow",
    "FleetSnapshot",
    "RobotDetail",
    "ServerDetail",
    "AuditEntry",
    "SessionEntry",
    "n_max",
    "fmt_age",
    "fmt_ms",
    "fmt_num",
    "sparkline",
    "robot_matches",
    "server_matches",
]


class RobotState(Enum):
    """Robot link states (the engine's state machine) plus what only the console can know.

    value = (severity rank for sorting: lower is worse, style, is_fault).
    GONE: the robot's liveliness token vanished while the console was connected. UNKNOWN: no telemetry yet.
    """

    DEAD = (0, "bold white on red", True)
    GONE = (1, "bold bright_black", True)
    STALLED = (2, "bold red", True)
    RECONNECTING = (3, "magenta", True)
    DEGRADED = (4, "yellow", True)
    CONNECTING = (5, "cyan", False)
    UNKNOWN = (6, "bright_black", True)
    STREAMING = (7, "green", False)

    @property
    def rank(self) -> int:
        return self.value[0]

    @property
    def style(self) -> str:
        return self.value[1]

    @property
    def is_fault(self) -> bool:
        return self.value[2]

    @classmethod
    def parse(cls, text: str) -> RobotState:
        """Telemetry state string -> enum; anything unrecognised is UNKNOWN (never an exception)."""
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            return cls.UNKNOWN


SERVER_HEALTH_RANK = {"gone": 0, "stale": 1, "draining": 2, "full": 3, "cold": 4, "ok": 5}
SERVER_HEALTH_STYLE = {
    "gone": "bold bright_black",
    "stale": "bold red",
    "draining": "magenta",
    "full": "yellow",
    "cold": "cyan",
    "ok": "green",
}


@dataclass(frozen=True)
class AuditEntry:
    """One audit line as the console keeps it (`age_s` is relative to the snapshot's clock)."""

    age_s: float
    replica: str
    client_uuid: str
    session_id: str
    seq_id: int
    episode_id: int
    queue_wait_ms: float
    inference_ms: float
    superseded: int
    outcome: str
    error: str = ""


@dataclass(frozen=True)
class SessionEntry:
    session_id: str
    client_uuid: str
    episode_id: int = 0
    requests: int = 0
    superseded: int = 0
    errors: int = 0


@dataclass(frozen=True)
class RobotRow:
    robot_id: str
    state: RobotState
    reported_state: str
    model_id: str = ""
    revision: str = ""
    service: str = ""
    session_id: str = ""
    replica: str = ""
    episode_id: int = 0
    staleness_s: float | None = None
    queue_s: float | None = None
    rtt_p50_ms: float | None = None
    rtt_p95_ms: float | None = None
    delay_steps: int | None = None
    requests: int = 0
    superseded: int = 0
    errors: int = 0
    fallback_count: int = 0
    last_outcome: str = ""
    fps: float = 0.0
    alive: bool | None = None
    seen_age_s: float | None = None  # console receive time of the last telemetry, as an age

    @property
    def superseded_pct(self) -> float | None:
        return None if self.requests <= 0 else 100.0 * self.superseded / self.requests


@dataclass(frozen=True)
class ServerRow:
    replica: str
    model_id: str = ""
    revision: str = ""
    service: str = ""
    active_sessions: int = 0
    max_sessions: int = 0
    load: float = 0.0
    requests_per_s: float | None = None
    errors: float | None = None
    superseded: float | None = None
    health: str = "ok"
    n_max: float | None = None
    headroom: int | None = None
    inference_ms_p50: float = 0.0
    draining: bool = False
    alive: bool | None = None
    status_age_s: float | None = None
    metrics_url: str = ""
    metrics_error: str = ""
    session_robots: tuple[str, ...] = ()


@dataclass(frozen=True)
class RouterInfo:
    """One router of the mesh, from its admin space (`@/<zid>/router`)."""

    zid: str
    locators: tuple[str, ...] = ()
    sessions: int = 0  # clients and routers linked to it
    connected: bool = False  # this console's session goes through it


@dataclass(frozen=True)
class FleetSnapshot:
    """Everything one UI tick renders; immutable so the UI can hold it without the store's lock."""

    router: str
    connection: str  # connecting | connected | disconnected | replay | fake
    data_age_s: float | None
    robots: tuple[RobotRow, ...]
    servers: tuple[ServerRow, ...]
    notes: tuple[str, ...] = ()
    routers: tuple[RouterInfo, ...] = ()

    def state_counts(self) -> dict[RobotState, int]:
        counts: dict[RobotState, int] = {}
        for r in self.robots:
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts

    def robot(self, robot_id: str) -> RobotRow | None:
        return next((r for r in self.robots if r.robot_id == robot_id), None)

    def server(self, replica: str) -> ServerRow | None:
        return next((s for s in self.servers if s.replica == replica), None)


@dataclass(frozen=True)
class RobotDetail:
    row: RobotRow
    history: tuple[tuple[float, str], ...] = ()  # (age_s, state) transitions, oldest first
    rtt_history: tuple[float, ...] = ()
    audit: tuple[AuditEntry, ...] = ()


@dataclass(frozen=True)
class ServerDetail:
    row: ServerRow
    sessions: tuple[SessionEntry, ...] = ()
    metrics: tuple[tuple[str, float], ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    capacity_inputs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- derivations


def n_max(t_s: float, r_hz: float, horizon_steps: float, dt_s: float, rtt_s: float) -> float | None:
    """Spec P10: N_max = min(0.8 / (r*t), (H*dt/2 - RTT) / t). None when an input is unknown (<= 0).

    t = server time per request, r = per-client request rate, H = execution horizon (steps),
    dt = control period, RTT = network round trip. A negative latency bound clamps to 0.
    """
    if t_s <= 0 or r_hz <= 0 or horizon_steps <= 0 or dt_s <= 0:
        return None
    util = 0.8 / (r_hz * t_s)
    latency = max(0.0, (horizon_steps * dt_s / 2.0 - max(rtt_s, 0.0)) / t_s)
    return min(util, latency)


def fmt_age(age_s: float | None) -> str:
    """Bucketed ages, so a cell does not change on every tick ("<1s", "7s", "40s", "3m", "10m+")."""
    if age_s is None or math.isnan(age_s):
        return "—"
    if age_s < 1:
        return "<1s"
    if age_s < 10:
        return f"{int(age_s)}s"
    if age_s < 60:
        return f"{int(age_s // 10) * 10}s"
    if age_s < 600:
        return f"{int(age_s // 60)}m"
    return "10m+"


def fmt_ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.0f}"


def fmt_num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f}"


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: tuple[float, ...] | list[float], width: int = 40) -> str:
    """Text sparkline of the last `width` values, scaled to their own min..max."""
    vals = list(values)[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = hi - lo
    if span <= 0:
        return _BARS[0] * len(vals)
    return "".join(_BARS[min(len(_BARS) - 1, int((v - lo) / span * (len(_BARS) - 1) + 0.5))] for v in vals)


def _filter_match(haystacks: list[str], query: str) -> bool:
    """Case-insensitive substring match; a leading `!` inverts."""
    q = query.strip()
    if not q:
        return True
    invert = q.startswith("!")
    q = q[1:].strip().lower() if invert else q.lower()
    hit = any(q in h.lower() for h in haystacks) if q else True
    return hit != invert


def robot_matches(row: RobotRow, query: str) -> bool:
    return _filter_match([row.robot_id, row.state.name, row.replica, row.last_outcome, row.model_id, row.service, row.session_id], query)


def server_matches(row: ServerRow, query: str) -> bool:
    return _filter_match([row.replica, row.health, row.model_id, row.service, row.revision, *row.session_robots], query)


ROBOT_SORTS: dict[str, str] = {
    "state": "state severity, then robot",
    "robot": "robot id",
    "seen": "data age (oldest first)",
    "rtt": "RTT p95 (slowest first)",
    "errors": "errors (most first)",
    "server": "server replica",
}


def sort_robots(rows: list[RobotRow], sort: str, reverse: bool = False) -> list[RobotRow]:
    """Total orders (ties broken by robot id) so the rendered order never depends on dict order."""
    keyfuncs = {
        "state": lambda r: (r.state.rank, r.robot_id),
        "robot": lambda r: (r.robot_id,),
        "seen": lambda r: (-(r.seen_age_s if r.seen_age_s is not None else math.inf), r.robot_id),
        "rtt": lambda r: (-(r.rtt_p95_ms or 0.0), r.robot_id),
        "errors": lambda r: (-r.errors, r.robot_id),
        "server": lambda r: (r.replica, r.robot_id),
    }
    out = sorted(rows, key=keyfuncs.get(sort, keyfuncs["state"]))
    return out[::-1] if reverse else out


def sort_servers(rows: list[ServerRow]) -> list[ServerRow]:
    return sorted(rows, key=lambda s: (SERVER_HEALTH_RANK.get(s.health, 9), s.model_id, s.service, s.replica))
