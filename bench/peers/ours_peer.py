"""Our arm: the real PolicyServer (stub backend, or the real `lerobot-policy-server` for ACT) through a
real router, and a robot built only on the public wire codecs and the one Zenoh config builder.

Shared memory is off on both sides (it would not cross a real network). `quality` 0 sends raw frames,
otherwise JPEG at that quality (the rollout backend's default is 90).
"""

from __future__ import annotations

import queue
import time
import uuid
from typing import Any

import numpy as np

from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.data import ActionChunkMsg, ObservationMsg, decode_chunk, encode_observation
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION, FeatureSpec, ServerStatus, SessionAck, SessionOpen
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

from .workload import ACTION_NAMES, CAMERAS, HEIGHT, STATE_DIM, WIDTH


def settings(endpoint: str) -> ZenohSettings:
    return ZenohSettings(mode="client", connect_endpoints=[endpoint], shared_memory=False)


def serve(endpoint: str, sleep_s: float, ready: Any) -> None:
    import threading

    from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
    from lerobot_policy_remote.server.service import PolicyServer
    from lerobot_policy_remote.server.stub import StubBackend

    manifest = Manifest(model=ModelSpec(repo_or_path="stub"), default_task="peers bench", max_sessions=32, health_port=0,
                        warmup_inferences=0, zenoh=settings(endpoint))
    backend = StubBackend(sleep_s, ACTION_NAMES, chunk_size=50, max_sessions=32)
    server = PolicyServer(manifest, backend=backend, progress=lambda s: None).start()
    ready()
    threading.Event().wait()
    server.stop()


def find_service(z: Any, timeout: float = 10.0) -> tuple[ServiceKeys, str]:
    """The first server answering a status query: its key names the service namespace and replica."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for rp in z.get(ServiceKeys.any().server("*", "status"), timeout=2.0):
            if rp.ok is not None:
                parts = str(rp.ok.key_expr).split("/")
                st = decode(ServerStatus, rp.ok.payload.to_bytes())
                return ServiceKeys(parts[1], parts[2], parts[3]), st.replica
        time.sleep(0.2)
    raise TimeoutError("no policy server answered a status query: is the server connected to the same router?")


class Client:
    """One robot: its own client session, a session open, observations put, chunks taken from a subscriber."""

    def __init__(self, endpoint: str, robot: int = 0, quality: int = 90, timeout_s: float = 30.0) -> None:
        import zenoh

        self.zenoh = zenoh
        self.z = open_session(settings(endpoint))
        self.keys, self.replica = find_service(self.z)
        self.uuid = f"peers-{robot}-{uuid.uuid4().hex[:8]}"
        self.quality, self.timeout_s, self.seq = quality, timeout_s, 0
        self.resend_s, self.resends = min(0.5, timeout_s), 0
        self.inbox: queue.Queue[tuple[Header, bytes]] = queue.Queue(maxsize=64)
        self.sub = self.z.declare_subscriber(self.keys.robot(self.uuid, "action"), self._on_action)
        self.token = self.z.liveliness().declare_token(self.keys.robot(self.uuid, "alive"))
        feats = [FeatureSpec("observation.state", "state", [STATE_DIM])]
        feats += [FeatureSpec(f"observation.images.{c}", "image", [HEIGHT, WIDTH, 3]) for c in CAMERAS]
        req = SessionOpen(self.uuid, list(ACTION_NAMES), feats, fps=30.0)
        replies = list(self.z.get(self.keys.server(self.replica, "session"), payload=encode(req), timeout=10.0))
        if not replies or replies[0].ok is None:
            raise ConnectionError("the policy server did not answer the session open")
        self.ack = decode(SessionAck, replies[0].ok.payload.to_bytes())
        if not self.ack.ok:
            raise ConnectionError(f"session refused: {self.ack.code}: {self.ack.message}")
        self.obs_key = self.keys.obs(self.replica, self.uuid)

    def _on_action(self, sample: Any) -> None:
        try:
            self.inbox.put_nowait((Header.unpack(sample.attachment.to_bytes()), sample.payload.to_bytes()))
        except queue.Full:
            pass

    def send(self, images: dict[str, np.ndarray], state: np.ndarray) -> int:
        self.seq += 1
        msg = ObservationMsg({"observation.state": state}, {f"observation.images.{c}": img for c, img in images.items()})
        hdr = Header(SCHEMA_VERSION, MsgType.OBS, self.seq, 0, time.monotonic_ns(), 1).pack()
        self.z.put(self.obs_key, encode_observation(msg, self.quality), attachment=hdr,
                   congestion_control=self.zenoh.CongestionControl.DROP)
        return self.seq

    def receive(self, first_seq: int, timeout_s: float) -> ActionChunkMsg:
        """The first chunk answering `first_seq` or a later re-send of the same observation."""
        deadline = time.monotonic() + timeout_s
        while True:
            h, data = self.inbox.get(timeout=max(0.001, deadline - time.monotonic()))
            if h.msg_type is MsgType.CHUNK and h.seq_id >= first_seq:
                return decode_chunk(data)

    def infer(self, images: dict[str, np.ndarray], state: np.ndarray) -> np.ndarray:
        """Send, wait; after `resend_s` of silence send again (observations travel best-effort, as the
        engine's do: CongestionControl.DROP). Every re-send carries the same observation, so a chunk for any
        of them answers it; a reply to an earlier call's observation is ignored by its seq."""
        deadline = time.monotonic() + self.timeout_s
        first = self.send(images, state)
        while True:
            try:
                return self.receive(first, min(self.resend_s, max(0.001, deadline - time.monotonic()))).chunk_robot
            except queue.Empty:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"no chunk within {self.timeout_s}s") from None
                self.resends += 1
                self.send(images, state)

    def close(self) -> None:
        self.token.undeclare()
        self.sub.undeclare()
        self.z.close()
