"""The fleet's rows and records: what one tick knows about robots, servers, events (data only).

No Textual, no Zenoh, no clock reads, no styles or formatting (those live with the renderers): rows are
built by `derive.py` from the store's captures and read by alerts, renderers and exports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from lerobot_policy_remote.wire.keys import Namespace

__all__ = [
    "RobotState",
    "RobotRow",
    "ServerRow",
    "FleetSnapshot",
    "RobotDetail",
    "ServerDetail",
    "AuditEntry",
    "SessionEntry",
    "robot_key",
    "ROBOT_STALE_S",
    "FleetEvent",
    "EventLog",
]

ROBOT_STALE_S = 5.0  # no telemetry for this long: the row is stale (rqt_robot_monitor marks stale after 5 s)
_KEY_SEP = "\x1f"  # cannot occur in a key expression chunk, so (namespace, id) -> key is one-to-one


def robot_key(ns: Namespace, robot_id: str) -> str:
    """The row key of a robot: its id is unique only within a namespace (model, revision, service)."""
    return _KEY_SEP.join((*ns, robot_id))


def split_robot_key(key: str) -> tuple[Namespace, str] | None:
    """`robot_key` inverted; None for a bare robot id."""
    parts = key.split(_KEY_SEP)
    if len(parts) != 4:
        return None
    return Namespace(parts[0], parts[1], parts[2]), parts[3]


class RobotState(Enum):
    """Robot link states (the engine's state machine) plus what only the console can know.

    value = (severity rank for sorting: lower is worse, is_fault).
    GONE: the robot's liveliness token vanished while the console was connected. UNKNOWN: no telemetry yet.
    """

    DEAD = (0, True)
    GONE = (1, True)
    STALLED = (2, True)
    RECONNECTING = (3, True)
    DEGRADED = (4, True)
    CONNECTING = (5, False)
    UNKNOWN = (6, True)
    STREAMING = (7, False)

    def __init__(self, rank: int, is_fault: bool) -> None:
        self.rank = rank  # plain attributes: read for every row on every tick (sorting, counts, alerts)
        self.is_fault = is_fault

    __hash__ = object.__hash__  # members are singletons compared by identity; Enum's own hash is Python code

    @classmethod
    def parse(cls, text: str) -> RobotState:
        """Telemetry state string -> enum; anything unrecognised is UNKNOWN (never an exception)."""
        try:
            return cls[str(text).strip().upper()]
        except KeyError:
            return cls.UNKNOWN


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


@dataclass(slots=True)
class RobotRow:
    """One robot as a tick shows it. Built fresh for every snapshot and never changed after (not frozen: a frozen
    dataclass's constructor costs about six times more, and a tick builds one row per robot)."""

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
    ns: Namespace = Namespace("", "", "")  # (model, revision, service) from the key expressions
    state_age_s: float | None = None  # how long it has been in its current state
    waiting: str = ""  # why a robot without a session is not getting one (e.g. no replica with room)
    network_ms: float | None = (
        None  # median network time per chunk: RTT - server queue wait - inference (None: unknown)
    )
    queue_wait_ms: float | None = None  # median server queue wait of its chunks
    inference_ms: float | None = None  # median inference time of its chunks
    action_order: str = ""  # checked | unchecked (only the action dimension was compared) | "" unknown
    row_key: str = ""  # robot_key(ns, robot_id), precomputed by the store (it is read many times per tick)
    max_action_age_s: float | None = None  # the robot's own hard bound on action age (None: not reported)
    recent_staleness: tuple[float, ...] = ()  # its last few staleness samples, oldest first (the alert's persistence)
    rtc: str = (
        ""  # on | off: its session runs real-time chunking or appends chunks; "" before a session (or an older robot)
    )

    @property
    def key(self) -> str:
        return self.row_key or robot_key(self.ns, self.robot_id)

    @property
    def is_stale(self) -> bool:
        """Figures are old: the robot is gone, or has not reported for ROBOT_STALE_S."""
        return self.state is RobotState.GONE or (self.seen_age_s is not None and self.seen_age_s >= ROBOT_STALE_S)

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
    headroom: int | None = None  # room: min(N_max, session cap) - active; None when unknown or gone
    room_limit: str = ""  # what bounds the room: "cap" (max_sessions), "N_max", "draining", "cordon"
    inference_ms_p50: float = 0.0
    draining: bool = False
    alive: bool | None = None
    status_age_s: float | None = None
    metrics_url: str = ""
    metrics_error: str = ""
    session_robots: tuple[str, ...] = ()
    seen_age_s: float | None = None  # since the server was last heard from (status answer or token)
    ns: Namespace = Namespace("", "", "")  # (model, revision, service) from its key expressions
    cordoned: bool = False  # an operator cordoned it: no new sessions, its sessions keep streaming
    rate_source: str = ""  # where requests_per_s comes from: server | metrics | audit (capacity.request_rate)
    cn: str = ""  # health "refused": the certificate CN the router refused (its figures never reach the console)
    engine: str = ""  # which pass serves: "compiled" or "eager"; "" when the server does not say (an older one)

    @property
    def is_stale(self) -> bool:
        return self.health in ("gone", "stale")

    @property
    def is_refused(self) -> bool:
        """The router drops its declarations: sessions, load, rate and room are unknown, never zero."""
        return self.health == "refused"


@dataclass(frozen=True)
class RouterInfo:
    """One router of the mesh, from its admin space (`@/<zid>/router`)."""

    zid: str
    locators: tuple[str, ...] = ()
    sessions: int = 0  # clients and routers linked to it
    connected: bool = False  # this console's session goes through it


@dataclass(frozen=True)
class NamespaceSpill:
    """One robot (or replica) id seen in more namespaces than the console admits per id: its samples in the others
    are dropped (`admission.MAX_NAMESPACES_PER_ID`). An alert names it."""

    role: str  # robot | server
    ident: str
    dropped: int  # samples dropped so far
    limit: int  # namespaces admitted per id
    age_s: float  # since the last dropped sample


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
    spills: tuple[NamespaceSpill, ...] = ()  # ids whose samples in further namespaces are dropped

    def state_counts(self) -> dict[RobotState, int]:
        counts: dict[RobotState, int] = {}
        for r in self.robots:
            counts[r.state] = counts.get(r.state, 0) + 1
        return counts

    def robot(self, key: str) -> RobotRow | None:
        """By row key; a bare robot id finds the first robot with that id (any namespace)."""
        return next((r for r in self.robots if r.key == key), None) or next(
            (r for r in self.robots if r.robot_id == key), None
        )

    def server(self, replica: str) -> ServerRow | None:
        return next((s for s in self.servers if s.replica == replica), None)


@dataclass(frozen=True)
class FleetEvent:
    """One line of the fleet event log: a state change, an audit refusal, a drain, a reset, an alert."""

    age_s: float
    severity: str  # info | warn | error
    kind: str  # state | audit | server | drain | reset | alert
    text: str
    robot: str = ""
    server: str = ""


@dataclass(frozen=True)
class EventLog:
    """The fleet event log at one instant: the raw records, oldest first, and the clock then.

    Copying the records is cheap; building the 2000 `FleetEvent` rows costs milliseconds, so `events` is
    built on first use (only the events screen reads it) and kept: the log is frozen, so it never changes.
    """

    now: float = 0.0
    records: tuple[tuple[float, str, str, str, str, str], ...] = ()  # (time, severity, kind, text, robot, server)

    def __len__(self) -> int:
        return len(self.records)

    @cached_property
    def events(self) -> tuple[FleetEvent, ...]:
        """Newest first, ages relative to `now`."""
        now = self.now
        return tuple(
            FleetEvent(max(0.0, now - t), sev, kind, text, robot, server)
            for t, sev, kind, text, robot, server in reversed(self.records)
        )


@dataclass(frozen=True)
class RobotDetail:
    row: RobotRow
    history: tuple[tuple[float, str], ...] = ()  # (age_s, state) transitions, oldest first
    rtt_history: tuple[float, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    staleness_history: tuple[float, ...] = ()
    queue_history: tuple[float, ...] = ()


@dataclass(frozen=True)
class ServerDetail:
    row: ServerRow
    sessions: tuple[SessionEntry, ...] = ()
    metrics: tuple[tuple[str, float], ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    capacity_inputs: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


# ---------------------------------------------------------------- derivations
