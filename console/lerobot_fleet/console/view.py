"""The console's view: everything the screens show, frozen once per tick (pure: no Textual, no clock reads).

The app builds a `ConsoleView` on its refresh timer (`FleetConsoleApp.tick`) and hands it to the screen
on top; screens render only what it holds and post messages for everything else. Building one is the
only place alerts advance; reading one (or exporting it, or folding what it shows) changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lerobot_fleet.data.alerts import AlertSnapshot
from lerobot_fleet.data.model import EventLog, FleetEvent, FleetSnapshot, RobotDetail, ServerDetail
from lerobot_fleet.data.model_compare import ModelFigures
from lerobot_fleet.data.rollout_read import RolloutRead

__all__ = ["ConsoleView", "Detail"]

Detail = RobotDetail | ServerDetail


@dataclass(frozen=True)
class ConsoleView:
    """One tick's frozen picture of the fleet plus the app state the screens show (result line, pause)."""

    fleet: FleetSnapshot  # robots, servers, routers, connection, data age, notes
    alerts: AlertSnapshot = AlertSnapshot()  # open and cleared alerts, the thresholds
    event_log: EventLog = EventLog()  # the fleet event log (rows built when first read)
    now: float = 0.0  # the store's clock when the view was built (alert ages)
    details: tuple[tuple[str, str, Detail | None], ...] = ()  # (kind, key, detail) for each open detail screen
    read_only: bool = False  # drain/reset hidden and inert
    paused: bool = False  # the fleet data is frozen (the result line still moves)
    result: tuple[str, bool | None] = ("", None)  # the result line: text, ok (True green, False red, None pending)
    models: tuple[ModelFigures, ...] = ()  # every service's models side by side (data/model_compare.py)
    model_trends: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # model key -> rtt p50 per tick
    rollout: RolloutRead = RolloutRead()  # the fleet router's rollout as last read, and how old that is

    @classmethod
    def empty(cls, router: str = "", read_only: bool = False) -> ConsoleView:
        """What there is before the first tick: no robots, no servers, no alerts."""
        return cls(
            FleetSnapshot(router=router, connection="connecting", data_age_s=None, robots=(), servers=()),
            read_only=read_only,
        )

    @property
    def events(self) -> tuple[FleetEvent, ...]:
        """The fleet event log, newest first."""
        return self.event_log.events

    def has_detail(self, kind: str, key: str) -> bool:
        return any(k == kind and x == key for k, x, _ in self.details)

    def robot_detail(self, key: str) -> RobotDetail | None:
        """The detail of the robot with this row key, when a robot detail screen asked for it (else None)."""
        return next((d for k, x, d in self.details if k == "robot" and x == key and isinstance(d, RobotDetail)), None)

    def server_detail(self, replica: str) -> ServerDetail | None:
        return next(
            (d for k, x, d in self.details if k == "server" and x == replica and isinstance(d, ServerDetail)), None
        )
