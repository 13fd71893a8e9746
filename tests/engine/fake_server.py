"""A test-side stand-in for one server replica (real Zenoh, protocol steps 1-4), with fault switches.

Only for injecting faults the real server never produces (NaN / wrong-shape chunks, silence,
foreign fingerprints). Queries are answered from callbacks with `with query:` (tiny, non-blocking).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.data import ActionChunkMsg, decode_observation, encode_chunk
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import ModelInfo, ResetAck, ServerStatus, SessionAck, SessionOpen


@dataclass
class Faults:
    mode: str = "ok"  # ok | nan | wrong_shape | silent | foreign_session
    fingerprint: str = "fp-A"


@dataclass
class FakeServer:
    session: object
    keys: ServiceKeys
    action_dim: int = 6
    chunk: int = 20
    replica: str = "fake-1"
    rtc: bool = False
    faults: Faults = field(default_factory=Faults)

    def __post_init__(self) -> None:
        import zenoh

        self.obs_seen: list[tuple[Header, object]] = []
        self.sessions: dict[str, str] = {}
        self.resets = 0
        self._n = 0
        self._lock = threading.Lock()
        s = self.session
        self._objs = [
            s.declare_queryable(self.keys.server(self.replica, "status"), self._status),
            s.declare_queryable(self.keys.server(self.replica, "session"), self._open),
            s.declare_queryable(self.keys.server(self.replica, "reset"), self._reset),
            s.declare_subscriber(self.keys.obs(self.replica, "*"), self._obs),
            s.liveliness().declare_token(self.keys.server(self.replica, "alive")),
        ]
        self._zenoh = zenoh

    def close(self) -> None:
        for o in self._objs:
            o.undeclare()

    def _status(self, query) -> None:
        with query:
            st = ServerStatus(replica=self.replica, model=ModelInfo(fingerprint=self.faults.fingerprint), max_sessions=4, warmed_up=True)
            query.reply(query.key_expr, encode(st))

    def _open(self, query) -> None:
        with query:
            req = decode(SessionOpen, query.payload.to_bytes())
            if req.expect_fingerprint and req.expect_fingerprint != self.faults.fingerprint:
                ack = SessionAck(ok=False, code="model_mismatch", message="different model")
            else:
                with self._lock:
                    self._n += 1
                    sid = f"sess-{self._n}"
                    self.sessions[req.client_uuid] = sid
                ack = SessionAck(ok=True, session_id=sid, replica=self.replica, model=ModelInfo(fingerprint=self.faults.fingerprint),
                                 action_names=req.action_names, chunk_size=self.chunk, supports_rtc=self.rtc, rtc_active=self.rtc and req.rtc.enabled,
                                 warmed_up=True)
            query.reply(query.key_expr, encode(ack))

    def _reset(self, query) -> None:
        with query:
            self.resets += 1
            query.reply(query.key_expr, encode(ResetAck(ok=True)))

    def _obs(self, sample) -> None:
        # A test double: replying from the callback is fine here (tiny payloads, no inference).
        header = Header.unpack(sample.attachment.to_bytes(), expect=MsgType.OBS)
        robot = str(sample.key_expr).rsplit("/", 1)[-1]
        msg = decode_observation(sample.payload.to_bytes())
        self.obs_seen.append((header, msg))
        mode = self.faults.mode
        if mode == "silent":
            return
        base = float(header.seq_id)
        arr = np.full((self.chunk, self.action_dim), base, dtype=np.float32) + np.arange(self.chunk, dtype=np.float32)[:, None] * 0.01
        if mode == "nan":
            arr[3, 1] = np.nan
        if mode == "wrong_shape":
            arr = arr[:, :-1].copy()
        sid = "someone-else" if mode == "foreign_session" else self.sessions.get(robot, "")
        body = ActionChunkMsg(chunk_model=arr, chunk_robot=arr, session_id=sid, seq_id_echo=header.seq_id, client_mono_ns_echo=header.client_mono_ns)
        if mode == "nan":
            # bypass the encoder's float cast guard: the wire carries whatever a buggy server sends
            pass
        att = Header(header.schema_version, MsgType.CHUNK, header.seq_id, header.episode_id, header.client_mono_ns, header.session_epoch).pack()
        self.session.put(self.keys.robot(robot, "action"), encode_chunk(body), attachment=att)
