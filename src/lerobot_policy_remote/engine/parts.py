"""What the engine's mixins (`connect.Connecting`, `replies.Replies`, `resets.Resets`, `moves.Moves`,
`reporting.Reporting`, `views.EngineViews`) use of `RemoteInferenceEngine`.

The mixins' methods take `self: EngineParts`: the checker then verifies, wherever they are called, that the engine
has each of these members with these types, without the mixins importing `remote.py` (which imports them).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from threading import Event, Lock
from typing import Any, Protocol

from ..wire.header import Header
from ..wire.keys import Namespace, ServiceKeys
from ..wire.messages import EventMsg, RobotTelemetry, SessionOpen
from ..wire.rollout import MoveCommand
from .config import RemoteInferenceConfig
from .control import ControlSide
from .handshake import OpenedSession
from .inflight import RequestTracker
from .link import LinkState, LinkStateMachine
from .queue import StampedActionQueue, WindowedLatency
from .reconnect import Reconnector
from .session import RemoteSession
from .telemetry import ChunkTimings, EngineSnapshot, EngineStats, RttWindow, StreamSummary, TelemetryPacer
from .transport import MoveQuery, RemoteLink


class EngineParts(Protocol):
    """The engine's state and methods that its mixins read or write."""

    cfg: RemoteInferenceConfig
    client_uuid: str
    model_id: str
    fps: float
    _dt: float
    _task: str
    _policy_type: str
    _hw_features: dict[str, Any]
    action_names: list[str]
    rename_map: dict[str, str]
    transport: RemoteLink
    _clock_ns: Callable[[], int]
    session: RemoteSession
    requests: RequestTracker
    reconnect: Reconnector
    states: LinkStateMachine
    queue: StampedActionQueue
    latency: WindowedLatency
    rtt: RttWindow
    timings: ChunkTimings
    counters: collections.Counter[str]
    episode_id: int
    _episode_start: bool
    _drained_from: str
    _ready: Event
    _failed: Event
    _active: Event
    _pending_reset: Event
    _reset_lock: Lock
    keys: ServiceKeys
    namespace: Namespace
    _moving: MoveCommand | None
    _move_due: tuple[MoveCommand, ServiceKeys] | None
    control: ControlSide
    _pacer: TelemetryPacer
    _logged_state_version: int
    _summary: StreamSummary
    on_operator_reset: Callable[[int], bool] | None

    @property
    def session_id(self) -> str: ...

    @property
    def replica(self) -> str: ...

    @property
    def session_epoch(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    @property
    def rtc_active(self) -> bool: ...

    @property
    def frame_quality(self) -> int: ...

    @property
    def state(self) -> LinkState: ...

    @property
    def telemetry_seq(self) -> int: ...

    @property
    def last_outcome(self) -> str: ...

    @property
    def fallback_count(self) -> int: ...

    def session_open_request(self) -> SessionOpen: ...

    def _handshake(self) -> None: ...

    def _session_opened(self, opened: OpenedSession) -> None: ...

    def _answer_move(self, query: MoveQuery) -> None: ...

    def _move(self, cmd: MoveCommand, keys: ServiceKeys) -> None: ...

    def _lose_link(self, now: float, why: str) -> None: ...

    def _handle_event(self, ev: EventMsg, header: Header, now: float) -> None: ...

    def _handle_chunk(self, payload: bytes, header: Header, now: float) -> None: ...

    def _never_moved(self) -> None: ...

    def report_telemetry(self, force: bool = False) -> None: ...

    def _local_reset(self) -> None: ...

    def _server_reset(self) -> None: ...

    def delay_steps(self) -> int: ...

    def stats(self) -> EngineStats: ...

    def snapshot(self, now: float) -> EngineSnapshot: ...

    def telemetry(self) -> RobotTelemetry: ...
