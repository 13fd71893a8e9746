"""A test-side robot speaking the wire protocol directly (separate zenoh client session per robot)."""

from __future__ import annotations

import queue
import time
from typing import Any

import numpy as np
from support.policies import SIM_ARM_ACTION_NAMES

from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.data import ActionChunkMsg, ObservationMsg, decode_chunk, encode_observation
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import (
    SCHEMA_VERSION,
    EventMsg,
    FeatureSpec,
    ResetAck,
    ResetRequest,
    RtcSettings,
    ServerStatus,
    SessionAck,
    SessionOpen,
)


def default_features(state_dim: int = 6, cams: dict[str, tuple[int, int]] | None = None) -> list[FeatureSpec]:
    cams = {"front": (96, 128)} if cams is None else cams
    feats = [FeatureSpec("observation.state", "state", [state_dim])]
    feats += [FeatureSpec(f"observation.images.{c}", "image", [h, w, 3]) for c, (h, w) in cams.items()]
    return feats


class Robot:
    def __init__(self, z: Any, keys: Any, client_uuid: str, *, token: bool = True) -> None:
        self.z, self.keys, self.uuid = z, keys, client_uuid
        self.inbox: queue.Queue[tuple[Header, Any]] = queue.Queue()
        self.sub = z.declare_subscriber(keys.robot(client_uuid, "action"), self._on_action)
        self.token = z.liveliness().declare_token(keys.robot(client_uuid, "alive")) if token else None
        self.replica = ""
        self.ack: SessionAck | None = None
        self.seq = 0
        self.episode = 0

    def _on_action(self, sample: Any) -> None:
        h = Header.unpack(sample.attachment.to_bytes())
        data = sample.payload.to_bytes()
        body = decode_chunk(data) if h.msg_type is MsgType.CHUNK else decode(EventMsg, data)
        self.inbox.put((h, body))

    def statuses(self, timeout: float = 2.0) -> list[ServerStatus]:
        out = []
        for rp in self.z.get(self.keys.server("*", "status"), timeout=timeout):
            if rp.ok is not None:
                out.append(decode(ServerStatus, rp.ok.payload.to_bytes()))
        return out

    def open(self, replica: str | None = None, *, action_names: list[str] | None = None, features: list[FeatureSpec] | None = None,
             rtc: bool = False, timeout: float = 5.0, **kw: Any) -> SessionAck:
        if replica is None:
            replica = self.statuses()[0].replica
        req = SessionOpen(self.uuid, list(SIM_ARM_ACTION_NAMES if action_names is None else action_names),
                          default_features() if features is None else features, rtc=RtcSettings(enabled=rtc), **{"fps": 30.0, **kw})
        return self.open_raw(replica, encode(req), timeout)

    def open_raw(self, replica: str, payload: bytes, timeout: float = 5.0) -> SessionAck:
        replies = list(self.z.get(self.keys.server(replica, "session"), payload=payload, timeout=timeout))
        assert replies and replies[0].ok is not None, f"no session reply: {[r.err and r.err.payload.to_bytes() for r in replies]}"
        ack = decode(SessionAck, replies[0].ok.payload.to_bytes())
        if ack.ok:
            self.replica, self.ack = replica, ack
        return ack

    def send(self, state: np.ndarray, image: np.ndarray | None = None, *, seq: int | None = None, episode_start: bool = False,
             schema: int = SCHEMA_VERSION, prefix: tuple[np.ndarray, np.ndarray] | None = None, delay: int = 0, quality: int = 90) -> int:
        self.seq = self.seq + 1 if seq is None else seq
        img = np.full((96, 128, 3), 100, np.uint8) if image is None else image
        msg = ObservationMsg({"observation.state": np.asarray(state, np.float32)}, {"observation.images.front": img},
                             episode_start=episode_start, inference_delay_steps=delay,
                             prefix_model=None if prefix is None else prefix[0], prefix_robot=None if prefix is None else prefix[1])
        self.send_raw(encode_observation(msg, quality), Header(schema, MsgType.OBS, self.seq, self.episode, time.monotonic_ns(), 1).pack())
        return self.seq

    def send_raw(self, payload: bytes, attachment: bytes | None) -> None:
        import zenoh

        self.z.put(self.keys.obs(self.replica, self.uuid), payload, attachment=attachment,
                   congestion_control=zenoh.CongestionControl.DROP)

    def recv(self, timeout: float = 30.0) -> tuple[Header, Any]:
        return self.inbox.get(timeout=timeout)

    def wait_for(self, pred: Any, timeout: float = 30.0) -> tuple[Header, Any]:
        deadline = time.monotonic() + timeout
        while True:
            h, body = self.recv(max(0.01, deadline - time.monotonic()))
            if pred(h, body):
                return h, body

    def request(self, state: np.ndarray, timeout: float = 30.0, **kw: Any) -> ActionChunkMsg:
        seq = self.send(state, **kw)
        _, body = self.wait_for(lambda h, b: isinstance(b, ActionChunkMsg) and h.seq_id == seq, timeout)
        return body

    def reset(self, episode: int, timeout: float = 2.0) -> ResetAck:
        self.episode = episode
        req = ResetRequest(self.ack.session_id if self.ack else "", episode)
        replies = list(self.z.get(self.keys.server(self.replica, "reset"), payload=encode(req), timeout=timeout))
        return decode(ResetAck, replies[0].ok.payload.to_bytes())

    def drop_token(self) -> None:
        if self.token is not None:
            self.token.undeclare()
            self.token = None
