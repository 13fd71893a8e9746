"""`MemoryLink`: the robot's `RemoteLink` with the server side played in memory.

Like httpx's MockTransport: the engine runs unchanged, the test decides what the "server" answers.
Everything crosses the seam as on the wire (encoded observations, undecoded chunk bytes + header),
so the engine's own decoding and validation run. Thread-safe: the test thread plays the server
while the engine's worker (or the test itself, via `engine.step()`) collects.

    link = MemoryLink(respond=lambda header, obs: np.zeros((20, 6), np.float32))
    engine = RemoteInferenceEngine(cfg, ..., transport=link)
"""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..discovery import ServiceInfo, group
from ..engine.handshake import HandshakeError, OpenedSession, pick
from ..engine.transport import Inbound, ServerChange
from ..wire.codec import encode
from ..wire.codes import EventKind, Refusal
from ..wire.data import ActionChunkMsg, ObservationMsg, decode_observation, encode_chunk
from ..wire.header import Header, MsgType
from ..wire.keys import Namespace, ServiceKeys
from ..wire.messages import (
    SCHEMA_VERSION,
    EventMsg,
    ModelInfo,
    ResetAck,
    ResetRequest,
    RobotTelemetry,
    ServerStatus,
    SessionAck,
    SessionOpen,
)
from ..wire.rollout import MoveCommand
from .memory_queries import MemoryMoveQuery, MemoryResetQuery, MemoryTelemetryQuery

__all__ = ["MemoryLink", "MemoryMoveQuery", "MemoryReplica", "MemoryResetQuery", "MemoryTelemetryQuery"]

# A chunk as a test writes it: float values of any precision, sent as float32.
Chunk = NDArray[np.floating[Any]]
Respond = Callable[[Header, ObservationMsg], Chunk | None]
_Item = TypeVar("_Item")


@dataclass
class MemoryReplica:
    """One server replica as the robot sees it: its status and how it answers a session open."""

    replica: str
    fingerprint: str = "fp-mem"
    chunk_size: int = 20
    rtc: bool = False
    draining: bool = False
    refuse: str = ""  # a SessionAck refusal code (a Refusal, e.g. Refusal.SERVER_FULL); "" accepts
    schema_version: int = SCHEMA_VERSION  # what its session ack negotiates
    names_checked: bool = True  # False: a policy that names no actions (the ack says the order went unchecked)
    max_sessions: int = 4
    sessions: list[SessionOpen] = field(default_factory=list)  # every session open it was asked for
    seated: set[str] = field(default_factory=set)  # robots holding a session here (one replica may serve many links)
    keys: ServiceKeys | None = None  # the namespace it serves (None: the link's home namespace)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def status(self) -> ServerStatus:
        with self.lock:
            active = self.max_sessions if self.refuse == Refusal.SERVER_FULL else len(self.seated)
        return ServerStatus(
            replica=self.replica,
            model=ModelInfo(fingerprint=self.fingerprint),
            max_sessions=self.max_sessions,
            active_sessions=active,
            draining=self.draining,
            warmed_up=True,
        )

    def seat(self, client_uuid: str) -> bool:
        """Take a seat for `client_uuid` atomically, as a server's registry would; False when full."""
        with self.lock:
            if client_uuid not in self.seated and len(self.seated) >= self.max_sessions:
                return False
            self.seated.add(client_uuid)
            return True


class MemoryLink:
    """In-memory transport. `respond(header, obs)` returns the chunk (robot space = model space) or None (silence).

    `keys`: the robot's home namespace, served by every replica that names none; a replica with `keys` serves that
    namespace only (a move's target). `self.keys` is the namespace the robot's keys live in now (`retarget`)."""

    def __init__(
        self, *replicas: MemoryReplica, respond: Respond | None = None, keys: ServiceKeys | None = None
    ) -> None:
        self.replicas: dict[str, MemoryReplica] = {r.replica: r for r in (replicas or (MemoryReplica("mem-1"),))}
        self.respond = respond
        self.requests: list[tuple[Header, ObservationMsg]] = []  # every observation the robot published
        self.telemetry: list[RobotTelemetry] = []
        self.server_resets: list[ResetRequest] = []
        self.bound = ""
        self.opened = self.closed = False
        self.handshakes: list[str] = []  # each handshake's `avoid` ("" when not moved by a drain)
        self.home = self.keys = keys
        self.retargets: list[ServiceKeys] = []
        self._sessions: dict[str, str] = {}  # replica -> session id of our robot
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._notify: Callable[[], None] = lambda: None
        self._inbox: collections.deque[Inbound] = collections.deque(maxlen=16)
        self._queries: collections.deque[MemoryResetQuery] = collections.deque(maxlen=4)
        self._moves: collections.deque[MemoryMoveQuery] = collections.deque(maxlen=4)
        self._telemetry_queries: collections.deque[MemoryTelemetryQuery] = collections.deque(maxlen=4)
        self._changes: collections.deque[ServerChange] = collections.deque(maxlen=64)
        self._lost = False

    # ------------------------------------------------------------------ RemoteLink (the robot's side)
    def open(self, notify: Callable[[], None]) -> None:
        self._notify = notify
        self.opened = True
        with self._lock:
            self._changes.extend(ServerChange(r, True) for r in self.replicas)

    def close(self) -> None:
        self.closed = True

    def handshake(
        self,
        request: SessionOpen,
        timeout_s: float,
        expect_fingerprint: str,
        avoid: str = "",
        keys: ServiceKeys | None = None,
    ) -> OpenedSession:
        """In memory every status is current: `avoid` is recorded, not used (a draining replica refuses anyway)."""
        self.handshakes.append(avoid)
        with self._lock:
            want = self.keys if keys is None else keys
            replicas = [r for r in self.replicas.values() if (r.keys or self.home) == want]
        if not replicas:
            raise HandshakeError(
                "no policy server answered (in-memory link has no replica)", fatal=False, code=Refusal.NO_SERVER
            )
        return pick(
            [r.status() for r in replicas],
            lambda st: self._open(self.replicas[st.replica], request),
            expect_fingerprint,
        )

    def _open(self, rep: MemoryReplica, request: SessionOpen) -> SessionAck:
        rep.sessions.append(request)
        if rep.refuse:
            return SessionAck(
                ok=False,
                code=rep.refuse,
                message=f"refused by the test ({rep.refuse})",
                active_sessions=rep.max_sessions,
                max_sessions=rep.max_sessions,
            )
        if request.expect_fingerprint and request.expect_fingerprint != rep.fingerprint:
            return SessionAck(ok=False, code=Refusal.MODEL_MISMATCH, message="different model")
        if not rep.seat(request.client_uuid):
            return SessionAck(
                ok=False,
                code=Refusal.SERVER_FULL,
                message=f"server full: {rep.max_sessions}/{rep.max_sessions} sessions active",
                active_sessions=rep.max_sessions,
                max_sessions=rep.max_sessions,
            )
        sid = f"mem-session-{next(self._ids)}"
        with self._lock:
            self._sessions[rep.replica] = sid
        warnings = [] if rep.names_checked else ["action names/order could not be verified: (memory replica)"]
        return SessionAck(
            ok=True,
            session_id=sid,
            replica=rep.replica,
            model=ModelInfo(fingerprint=rep.fingerprint),
            action_names=list(request.action_names) if rep.names_checked else [],
            chunk_size=rep.chunk_size,
            supports_rtc=rep.rtc,
            rtc_active=rep.rtc and request.rtc.enabled,
            warmed_up=True,
            schema_version=rep.schema_version,
            warnings=warnings,
            action_names_checked=rep.names_checked,
        )

    direct = False  # one in-memory path: there is no router to skip

    def retarget(self, keys: ServiceKeys) -> None:
        with self._lock:
            self.keys, self.bound = keys, ""
            self.retargets.append(keys)

    def bind(self, replica: str) -> None:
        with self._lock:
            self.bound = replica
            self._lost = False

    def publish_observation(self, body: bytes, header: Header) -> None:
        obs = decode_observation(body)  # what a real server would see, validated the same way
        with self._lock:
            self.requests.append((header, obs))
        if self.respond is not None:
            arr = self.respond(header, obs)
            if arr is not None:
                self.reply(header, arr)

    def receive(self) -> list[Inbound]:
        return self._drain(self._inbox)

    def reset_queries(self) -> list[MemoryResetQuery]:
        return self._drain(self._queries)

    def move_queries(self) -> list[MemoryMoveQuery]:
        return self._drain(self._moves)

    def telemetry_queries(self) -> list[MemoryTelemetryQuery]:
        return self._drain(self._telemetry_queries)

    def server_lost(self) -> bool:
        with self._lock:
            lost, self._lost = self._lost, False
        return lost

    def server_changes(self) -> list[ServerChange]:
        return self._drain(self._changes)

    def server_reset(self, request: ResetRequest, timeout_s: float) -> ResetAck | None:
        with self._lock:
            if self.bound not in self.replicas:
                return None
            self.server_resets.append(request)
        return ResetAck(ok=True)

    def services(self, timeout_s: float) -> list[ServiceInfo]:
        with self._lock:
            return group([(r.status(), Namespace("memory", "main", "memory")) for r in self.replicas.values()])

    def publish_telemetry(self, telemetry: RobotTelemetry) -> None:
        with self._lock:
            self.telemetry.append(telemetry)

    # ------------------------------------------------------------------ the server's side (test controls)
    def session_id(self, replica: str | None = None) -> str:
        with self._lock:
            return self._sessions.get(replica or self.bound, "")

    def reply(
        self,
        request: Header,
        chunk_robot: Chunk,
        *,
        chunk_model: Chunk | None = None,
        session_id: str | None = None,
        seq_id_echo: int | None = None,
        mono_echo: int | None = None,
        header: Header | None = None,
        queue_wait_ms: float = 0.0,
        inference_ms: float = 0.0,
    ) -> None:
        """Answer `request` with a chunk (defaults: the bound session, exact echoes, the request's header and
        schema)."""
        robot = np.asarray(chunk_robot, dtype=np.float32)
        msg = ActionChunkMsg(
            chunk_model=robot if chunk_model is None else np.asarray(chunk_model, dtype=np.float32),
            chunk_robot=robot,
            session_id=self.session_id() if session_id is None else session_id,
            seq_id_echo=request.seq_id if seq_id_echo is None else seq_id_echo,
            client_mono_ns_echo=request.client_mono_ns if mono_echo is None else mono_echo,
            queue_wait_ms=queue_wait_ms,
            inference_ms=inference_ms,
        )
        att = header or Header(
            request.schema_version,
            MsgType.CHUNK,
            request.seq_id,
            request.episode_id,
            request.client_mono_ns,
            request.session_epoch,
        )
        self.deliver(encode_chunk(msg), att.pack())

    def event(
        self,
        event: EventKind | str,
        request: Header | None = None,
        message: str = "",
        *,
        epoch: int | None = None,
        session_id: str | None = None,
    ) -> None:
        """A server event on the robot's action key (answering `request` when given; `session_id`: default the
        bound one)."""
        seq = request.seq_id if request else 0
        ep = epoch if epoch is not None else (request.session_epoch if request else 0)
        att = Header(SCHEMA_VERSION, MsgType.EVENT, seq, request.episode_id if request else 0, 0, ep)
        self.deliver(
            encode(
                EventMsg(
                    event=event,
                    message=message,
                    session_id=self.session_id() if session_id is None else session_id,
                    seq_id=seq,
                )
            ),
            att.pack(),
        )

    def deliver(self, payload: bytes, attachment: bytes | None) -> None:
        """Raw bytes on the robot's action key (hostile input included)."""
        with self._lock:
            self._inbox.append(Inbound(payload, attachment))
        self._notify()

    def operator_reset(self) -> MemoryResetQuery:
        q = MemoryResetQuery()
        with self._lock:
            self._queries.append(q)
        self._notify()
        return q

    def move(self, command: MoveCommand | bytes | None) -> MemoryMoveQuery:
        """A fleet router tells the robot to move (`command` encoded here; raw bytes as they are)."""
        q = MemoryMoveQuery(encode(command) if isinstance(command, MoveCommand) else command)
        with self._lock:
            self._moves.append(q)
        self._notify()
        return q

    def ask_telemetry(self) -> MemoryTelemetryQuery:
        """A reader asks for the robot's telemetry now (zenoh wakes no worker for it: the next pass answers)."""
        q = MemoryTelemetryQuery()
        with self._lock:
            self._telemetry_queries.append(q)
        return q

    def add_replica(self, rep: MemoryReplica) -> None:
        """A replica's liveliness token appears."""
        with self._lock:
            self.replicas[rep.replica] = rep
            self._changes.append(ServerChange(rep.replica, True))
        self._notify()

    def remove_replica(self, replica: str) -> None:
        """A replica's token goes away (kill -9, lease expiry, or the robot's router lost)."""
        with self._lock:
            self.replicas.pop(replica, None)
            self._changes.append(ServerChange(replica, False))
            if replica == self.bound:
                self._lost = True
        self._notify()

    def _drain(self, dq: collections.deque[_Item]) -> list[_Item]:
        with self._lock:
            out = list(dq)
            dq.clear()
        return out
