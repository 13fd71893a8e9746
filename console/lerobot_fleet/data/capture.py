"""What the store hands the derivation: its records copied under its lock, immutable (instants on its clock)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry, ServerStatus

from .model import AuditEntry, NamespaceSpill, RouterInfo

__all__ = ["RobotRecord", "ServerRecord", "RefusedRecord", "Link", "Capture", "RobotTrail"]


class RobotRecord(NamedTuple):
    """One robot as the store knows it at capture time (instants on the store's clock)."""

    key: str
    robot_id: str
    ns: Namespace
    ver: int  # bumped by every change to the robot's record
    telemetry: RobotTelemetry | None
    seen_at: float | None
    alive: bool | None
    gone_at: float | None
    state_since: float | None  # when its reported state last changed
    recent_staleness: tuple[float, ...]


class ServerRecord(NamedTuple):
    """One replica as the store knows it at capture time."""

    replica: str
    ns: Namespace
    status: ServerStatus | None
    status_at: float | None
    alive: bool | None
    gone_at: float | None
    metrics: dict[str, float]  # replaced whole on each scrape, never changed in place
    metrics_error: str
    scraped_per_s: float | None  # request rate from two scrapes of requests_total
    audit_lines: int  # audit lines kept
    audit_recent: int  # audit lines inside the capacity's rate window
    audit_errors: int
    audit_superseded: int


class RefusedRecord(NamedTuple):
    """A server the routers refuse, as their boards name it: no status, token or audit line of it ever arrives."""

    replica: str
    cn: str  # its certificate's common name
    ns: Namespace  # the namespace it tried to serve
    notice: str  # one line: who, where, and the fix
    refused_at: float  # when a router last refused it (the store's clock)


@dataclass(frozen=True)
class Link:
    """The console's own router link: whether a vanished token means the robot is gone or the console is blind."""

    connection: str = "connecting"
    down_at: float | None = None
    up_at: float | None = None
    listening_since: float | None = None  # since when audit lines could arrive (the audit rate's window)


@dataclass(frozen=True)
class Capture:
    """Everything the store held at one instant, copied under its lock."""

    now: float
    router: str
    link: Link
    last_data_at: float | None
    robots: tuple[RobotRecord, ...]
    servers: tuple[ServerRecord, ...]
    rtts: dict[str, list[float]]  # replica -> its robots' reported RTT p50s
    notes: tuple[str, ...] = ()
    routers: tuple[RouterInfo, ...] = ()
    spills: tuple[NamespaceSpill, ...] = ()
    refused: tuple[RefusedRecord, ...] = ()


@dataclass(frozen=True)
class RobotTrail:
    """What a robot's detail shows beyond its row, copied under the store's lock (instants on its clock)."""

    history: tuple[tuple[float, str], ...]  # (when, state) transitions, oldest first
    rtt: tuple[float, ...]
    staleness: tuple[float, ...]
    queue: tuple[float, ...]
    audit_at: tuple[float, ...]
    audit: tuple[AuditEntry, ...]  # same length as audit_at
