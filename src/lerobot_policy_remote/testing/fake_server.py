"""One policy-server replica speaking the real wire (status, session, reset and drain queryables, liveliness,
audit lines, chunks for observations), with fault switches the real server never produces.

What it sends is built with the product's own codec and key builder, so a test that passes against it
passes against the protocol, not against a private dialect. Zenoh callbacks only deposit and answer
queries inside `with query:`; chunks are computed and published by a worker thread.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.codec import decode, encode, encode_json, join_audit_lines
from ..wire.codes import Refusal
from ..wire.data import ActionChunkMsg, ObservationMsg, decode_observation, encode_chunk
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import ServiceKeys, decode_segment, parse_key
from ..wire.messages import (
    AuditLine,
    DrainAck,
    DrainRequest,
    ModelInfo,
    ResetAck,
    ServerStatus,
    SessionAck,
    SessionInfo,
    SessionOpen,
)

FAULT_MODES = ("ok", "nan", "wrong_shape", "silent", "foreign_session")


@dataclass
class Faults:
    """What the replica does wrong. `mode`: ok | nan | wrong_shape | silent | foreign_session."""

    mode: str = "ok"
    fingerprint: str = "fp-A"


@dataclass
class ServedSession:
    session_id: str
    client_uuid: str
    episode_id: int = 0


@dataclass
class FakeServerStats:
    resets: int = 0
    drains: list[DrainRequest] = field(default_factory=list)


class ChunkResponder:
    """Answers observations on `keys.obs(replica, robot)` (either may be `*`) with chunks, faults applied.

    The chunk-answering half of :class:`FakeServer`, usable alone to race a real server: with
    `replica="*"` and `session_for` returning the victim's session id it forges replies to requests the
    real server is still working on. Row i of a chunk is `seq_id + 0.01 * i` unless `fill` is given.
    The callback only decodes and deposits; a worker thread publishes.
    """

    def __init__(
        self,
        session: Any,
        keys: ServiceKeys,
        replica: str = "*",
        robot: str = "*",
        *,
        action_dim: int = 6,
        chunk: int = 20,
        faults: Faults | None = None,
        fill: float | None = None,
        inference_ms: float = 12.0,
        session_for: Callable[[str], str] | None = None,
    ) -> None:
        self.session, self.keys = session, keys
        self.action_dim, self.chunk, self.fill, self.inference_ms = action_dim, chunk, fill, inference_ms
        self.faults = faults or Faults()
        self.session_for = session_for or (lambda robot: "")
        self.obs_seen: collections.deque[tuple[Header, ObservationMsg]] = collections.deque(
            maxlen=1000
        )  # the latest, bounded
        self.sent = 0
        self.bad_obs = 0
        self._inbox: collections.deque[tuple[str, Header]] = collections.deque(maxlen=256)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._sub = session.declare_subscriber(keys.obs(replica, robot), self._on_obs)
        self._worker = threading.Thread(target=self._serve, name=f"chunk-responder-{replica}", daemon=True)
        self._worker.start()

    def chunk_for(self, header: Header) -> NDArray[np.float32]:
        """The chunk that answers `header`, faults applied."""
        arr: NDArray[np.float32]
        if self.fill is not None:
            arr = np.full((self.chunk, self.action_dim), self.fill, dtype=np.float32)
        else:
            arr = np.full((self.chunk, self.action_dim), float(header.seq_id), dtype=np.float32)
            arr += np.arange(self.chunk, dtype=np.float32)[:, None] * 0.01
        if self.faults.mode == "nan":
            arr[3, 1] = np.nan  # encode_chunk does not check finiteness: the wire carries what a buggy server sends
        elif self.faults.mode == "wrong_shape":
            arr = np.concatenate([arr, arr[:, :1]], axis=1)  # one action too many
        return arr

    def _on_obs(self, sample: Any) -> None:
        """Deposit only: decode (bounded by the codec), queue, wake the worker; hostile bytes are counted."""
        try:
            robot = parse_key(str(sample.key_expr)).robot or ""
            header = Header.unpack(
                sample.attachment.to_bytes() if sample.attachment is not None else None, expect=MsgType.OBS
            )
            msg = decode_observation(sample.payload.to_bytes())
        except (WireError, ValueError):
            self.bad_obs += 1
            return
        self.obs_seen.append((header, msg))
        self._inbox.append((robot, header))
        self._wake.set()

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
            while self._inbox:
                robot, header = self._inbox.popleft()
                if self.faults.mode != "silent":
                    self.reply(robot, header)

    def reply(self, robot: str, header: Header) -> None:
        """Publish the chunk for `header` on `robot`'s action key, with the header echoed as the real server does."""
        arr = self.chunk_for(header)
        sid = "someone-else" if self.faults.mode == "foreign_session" else self.session_for(robot)
        body = ActionChunkMsg(
            chunk_model=arr,
            chunk_robot=arr,
            session_id=sid,
            seq_id_echo=header.seq_id,
            client_mono_ns_echo=header.client_mono_ns,
            inference_ms=self.inference_ms,
        )
        att = Header(
            header.schema_version,
            MsgType.CHUNK,
            header.seq_id,
            header.episode_id,
            header.client_mono_ns,
            header.session_epoch,
        )
        self.session.put(self.keys.robot(robot, "action"), encode_chunk(body), attachment=att.pack())
        self.sent += 1

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._worker.join(timeout=3)
        try:
            self._sub.undeclare()
        except Exception:  # noqa: BLE001  the session may already be closed
            pass


class FakeServer:
    """A replica on `session` under `keys`; its :class:`ChunkResponder` answers observations (`serve_obs=False`:
    none)."""

    def __init__(
        self,
        session: Any,
        keys: ServiceKeys,
        action_dim: int = 6,
        chunk: int = 20,
        replica: str = "fake-1",
        rtc: bool = False,
        faults: Faults | None = None,
        *,
        max_sessions: int = 4,
        metrics_url: str = "",
        inference_ms: float = 12.0,
        serve_obs: bool = True,
    ) -> None:
        self.session, self.keys, self.replica = session, keys, replica
        self.action_dim, self.chunk, self.rtc = action_dim, chunk, rtc
        self._faults = faults or Faults()
        self.max_sessions, self.metrics_url, self.inference_ms = max_sessions, metrics_url, inference_ms
        self.draining = False
        self.stats = FakeServerStats()
        self.sessions: dict[str, str] = {}  # client_uuid -> session_id
        self._n = 0
        self._lock = threading.Lock()
        s = session
        self._decls = [
            s.declare_queryable(keys.server(replica, "status"), self._on_status),
            s.declare_queryable(keys.session(replica, "*"), self._on_open),
            s.declare_queryable(keys.reset(replica, "*"), self._on_reset),
            s.declare_queryable(keys.server(replica, "drain"), self._on_drain),
            s.liveliness().declare_token(keys.server(replica, "alive")),
        ]
        self._audit = s.declare_publisher(keys.server(replica, "audit"))
        self.responder = (
            ChunkResponder(
                s,
                keys,
                replica,
                action_dim=action_dim,
                chunk=chunk,
                faults=self._faults,
                inference_ms=inference_ms,
                session_for=lambda robot: self.sessions.get(robot, ""),
            )
            if serve_obs
            else None
        )

    @property
    def faults(self) -> Faults:
        """The switches: fingerprint for status/session, mode for the chunks (shared with the responder)."""
        return self._faults

    @faults.setter
    def faults(self, value: Faults) -> None:
        self._faults = value
        if self.responder is not None:
            self.responder.faults = value

    @property
    def resets(self) -> int:
        return self.stats.resets

    @property
    def drains(self) -> list[DrainRequest]:
        return self.stats.drains

    @property
    def obs_seen(self) -> collections.deque[tuple[Header, ObservationMsg]]:
        return self.responder.obs_seen if self.responder is not None else collections.deque()

    # ------------------------------------------------------------------ what it says

    def model(self) -> ModelInfo:
        return ModelInfo(
            repo_or_path=decode_segment(self.keys.model),
            revision=decode_segment(self.keys.revision),
            fingerprint=self.faults.fingerprint,
        )

    def add_session(self, client_uuid: str, session_id: str | None = None) -> str:
        """Record a session as if `client_uuid` had opened one (for console tests that need no real robot)."""
        with self._lock:
            self._n += 1
            sid = session_id or f"sess-{self._n}"
            self.sessions[client_uuid] = sid
        return sid

    def status(self) -> ServerStatus:
        with self._lock:
            sessions = [SessionInfo(session_id=sid, client_uuid=uuid) for uuid, sid in self.sessions.items()]
        return ServerStatus(
            replica=self.replica,
            model=self.model(),
            service=decode_segment(self.keys.service),
            max_sessions=self.max_sessions,
            active_sessions=len(sessions),
            supports_rtc=self.rtc,
            chunk_size=self.chunk,
            trained_fps=30.0,
            inference_ms_p50=self.inference_ms,
            metrics_url=self.metrics_url,
            draining=self.draining,
            warmed_up=True,
            sessions=sessions,
        )

    def publish_audit(self, *lines: AuditLine) -> None:
        """One audit publication of `lines` (newline-joined, as a replica publishes its batches; one line alone is
        what an older replica published)."""
        self._audit.put(join_audit_lines([encode_json(line).decode() for line in lines]))

    def audit(self, client_uuid: str, seq_id: int, episode_id: int = 0, **kw: Any) -> AuditLine:
        """Publish one audit line for `client_uuid` (a request this replica 'served')."""
        line = AuditLine(
            ts=kw.pop("ts", "2026-01-01T00:00:00+00:00"),
            session_id=self.sessions.get(client_uuid, ""),
            client_uuid=client_uuid,
            seq_id=seq_id,
            episode_id=episode_id,
            queue_wait_ms=kw.pop("queue_wait_ms", 1.0),
            inference_ms=kw.pop("inference_ms", self.inference_ms),
            replica=self.replica,
            **kw,
        )
        self.publish_audit(line)
        return line

    # ------------------------------------------------------------------ queryables (answer inside `with query:`)

    def _on_status(self, query: Any) -> None:
        with query:
            query.reply(self.keys.server(self.replica, "status"), encode(self.status()))

    def _on_open(self, query: Any) -> None:
        with query:
            try:
                req = decode(SessionOpen, query.payload.to_bytes() if query.payload is not None else None)
            except WireError as exc:
                ack = SessionAck(ok=False, code=Refusal.BAD_REQUEST, message=str(exc))
            else:
                if req.expect_fingerprint and req.expect_fingerprint != self.faults.fingerprint:
                    ack = SessionAck(ok=False, code=Refusal.MODEL_MISMATCH, message="different model")
                else:
                    sid = self.add_session(req.client_uuid)
                    ack = SessionAck(
                        ok=True,
                        session_id=sid,
                        replica=self.replica,
                        model=self.model(),
                        action_names=req.action_names,
                        chunk_size=self.chunk,
                        supports_rtc=self.rtc,
                        rtc_active=self.rtc and req.rtc.enabled,
                        warmed_up=True,
                    )
            query.reply(str(query.key_expr), encode(ack))

    def _on_reset(self, query: Any) -> None:
        with query:
            with self._lock:
                self.stats.resets += 1
            query.reply(str(query.key_expr), encode(ResetAck(ok=True)))

    def _on_drain(self, query: Any) -> None:
        with query:
            try:
                req = decode(DrainRequest, query.payload.to_bytes() if query.payload is not None else None)
            except WireError as exc:
                query.reply(self.keys.server(self.replica, "drain"), encode(DrainAck(ok=False, message=str(exc))))
                return
            with self._lock:
                self.stats.drains.append(req)
                self.draining = True
                sessions = list(self.sessions.values())
            query.reply(
                self.keys.server(self.replica, "drain"),
                encode(DrainAck(ok=True, message="draining", sessions=sessions)),
            )

    def close(self) -> None:
        """Undeclare everything (the session stays open: it belongs to the caller)."""
        if self.responder is not None:
            self.responder.close()
        for d in [*self._decls, self._audit]:
            try:
                d.undeclare()
            except Exception:  # noqa: BLE001  the session may already be closed; nothing left to undo
                pass
