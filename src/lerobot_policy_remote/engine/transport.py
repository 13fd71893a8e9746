"""The robot's transport seam: everything the engine says to or hears from the service.

Like httpx's transport beside its mock transport: the engine (loop, state machine, queue policy)
talks only to a `RemoteLink`. `ZenohLink` (engine/zenoh_link.py) is the real one;
`lerobot_policy_remote.testing.memory_link.MemoryLink` plays the server in memory for unit tests.

Contract every implementation keeps:
- arrivals (chunks/events, operator reset queries, move queries, telemetry queries, server token changes) are only
  deposited by the transport's own threads; the engine's worker collects them with `receive`,
  `reset_queries`, `move_queries`, `telemetry_queries` and `server_changes`, and `notify` (given to `open`) wakes it;
- `handshake` and `server_reset` block (worker only, bounded by their timeouts); every other call
  returns at once;
- the robot's own keys live in one namespace at a time: `retarget` moves them (a model move), the connection stays;
- bytes that arrive are handed over as they are: decoding and validation are the engine's job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..discovery import ServiceInfo
from ..wire.header import Header
from ..wire.keys import ServiceKeys
from ..wire.messages import EpisodeResetAck, ResetAck, ResetRequest, RobotTelemetry, SessionOpen
from ..wire.rollout import MoveAck
from .handshake import OpenedSession


@dataclass(frozen=True)
class Inbound:
    """One message on the robot's action key (a chunk or a server event), undecoded."""

    payload: bytes
    attachment: bytes | None


@dataclass(frozen=True)
class ServerChange:
    """A server liveliness token of this service appeared (`alive`) or went away."""

    replica: str
    alive: bool


class ResetQuery(Protocol):
    """An operator's episode-reset query, answered exactly once by the worker at a safe point."""

    def answer(self, ack: EpisodeResetAck) -> None: ...


class MoveQuery(Protocol):
    """A fleet router's move query: the undecoded `MoveCommand` (decoding is the engine's job), answered once."""

    @property
    def payload(self) -> bytes | None: ...

    def answer(self, ack: MoveAck) -> None: ...


class TelemetryQuery(Protocol):
    """A reader asking for this robot's telemetry now (a console filling its table at once), answered by the worker."""

    def answer(self, telemetry: RobotTelemetry) -> None: ...


class RemoteLink(Protocol):
    def open(self, notify: Callable[[], None]) -> None:
        """Join the network as this robot: liveliness token, action inbox, reset and move queryables, telemetry
        (published, and answered when asked)."""

    def close(self) -> None:
        """Leave the network; safe to call twice."""

    def handshake(
        self,
        request: SessionOpen,
        timeout_s: float,
        expect_fingerprint: str,
        avoid: str = "",
        keys: ServiceKeys | None = None,
    ) -> OpenedSession:
        """Discover replicas and open a session on one; raises `HandshakeError`. `avoid`: the replica that is
        draining us away; the replicas of the last discovery (without it) may be tried before a new discovery.
        `keys`: another namespace to open the session in (a move, before `retarget`); None: the link's own."""

    def retarget(self, keys: ServiceKeys) -> None:
        """Move the robot's own declarations (token, action inbox, queryables, telemetry, the replicas' token
        watch) to namespace `keys`, unbound until the next `bind`; the connection itself stays open."""

    def bind(self, replica: str) -> None:
        """Send observations to `replica` and watch its liveliness token from now on."""

    @property
    def direct(self) -> bool:
        """Observations and chunks of the bound replica skip the router (a replica on this host offered it)."""

    def publish_observation(self, body: bytes, header: Header) -> None:
        """Fire and forget to the bound replica (dropped under congestion, never blocks)."""

    def receive(self) -> list[Inbound]:
        """Chunks and events deposited since the last call, oldest first."""

    def reset_queries(self) -> list[ResetQuery]:
        """Operator episode-reset queries deposited since the last call."""

    def move_queries(self) -> list[MoveQuery]:
        """Move queries deposited since the last call."""

    def telemetry_queries(self) -> list[TelemetryQuery]:
        """Telemetry queries deposited since the last call (a few at most: older ones are dropped)."""

    def server_lost(self) -> bool:
        """True once after the bound replica's token went away (cleared by `bind`)."""

    def server_changes(self) -> list[ServerChange]:
        """Tokens of any replica of this service that appeared or went away since the last call."""

    def server_reset(self, request: ResetRequest, timeout_s: float) -> ResetAck | None:
        """The acked episode reset on the bound replica; None when it did not answer in time."""

    def services(self, timeout_s: float) -> list[ServiceInfo]:
        """Every service the network offers now (for the "no server answered" advice)."""

    def publish_telemetry(self, telemetry: RobotTelemetry) -> None:
        """Best effort: a failure is the transport's to log, never the engine's problem."""
