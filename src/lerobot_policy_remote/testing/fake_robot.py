"""One robot speaking the real wire from its own Zenoh session: liveliness token, session open, observations,
episode resets, telemetry, and a bounded inbox of what arrives on its action key.

Built on the product's codec and key builder; no torch or lerobot (numpy and cv2 via the data codec).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

from ..wire.codec import decode, encode
from ..wire.data import ActionChunkMsg, ObservationMsg, decode_chunk, encode_observation
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import ServiceKeys
from ..wire.messages import (
    SCHEMA_VERSION,
    EventMsg,
    FeatureSpec,
    ResetAck,
    ResetRequest,
    RobotTelemetry,
    RtcSettings,
    ServerStatus,
    SessionAck,
    SessionOpen,
)

if TYPE_CHECKING:  # for the checker only: the kit imports zenoh where it sends
    import zenoh

# What lands in a robot's inbox: a chunk, a server event, or the WireError an undecodable reply raised.
Arrival = ActionChunkMsg | EventMsg | WireError
# A state vector (or an RTC prefix) as a test writes it: float values of any precision, sent as float32.
Floats = NDArray[np.floating[Any]]

# The sim arm's action names (`lerobot_policy_remote.sim.robot`, kept here so the kit needs no lerobot).
SIM_ARM_ACTION_NAMES: list[str] = [
    f"{m}.pos" for m in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
]


def default_features(state_dim: int = 6, cams: dict[str, tuple[int, int]] | None = None) -> list[FeatureSpec]:
    """The SessionOpen features of a sim arm: a state vector and one 96x128 RGB camera by default."""
    cams = {"front": (96, 128)} if cams is None else cams
    feats = [FeatureSpec("observation.state", "state", [state_dim])]
    feats += [FeatureSpec(f"observation.images.{c}", "image", [h, w, 3]) for c, (h, w) in cams.items()]
    return feats


class FakeRobot:
    """A robot `client_uuid` on `session` under `keys`.

    `listen=False` skips the action subscriber (a fleet publisher with hundreds of robots needs none);
    `token=False` starts it without a liveliness token. Undecodable replies land in the inbox as the
    WireError they raised, so a test can assert on them.
    """

    def __init__(
        self,
        z: Any,
        keys: ServiceKeys,
        client_uuid: str,
        *,
        token: bool = True,
        listen: bool = True,
        inbox_size: int = 1024,
    ) -> None:
        self.z, self.keys, self.uuid = z, keys, client_uuid
        self.inbox: queue.Queue[tuple[Header | None, Arrival]] = queue.Queue(maxsize=inbox_size)
        self.sub = z.declare_subscriber(keys.robot(client_uuid, "action"), self._on_action) if listen else None
        self.token = z.liveliness().declare_token(keys.robot(client_uuid, "alive")) if token else None
        self._telemetry: zenoh.Publisher | None = None
        self.replica = ""
        self.ack: SessionAck | None = None
        self.seq = 0
        self.episode = 0

    def _on_action(self, sample: Any) -> None:
        """Deposit only; a full inbox drops the newest (bounded, never blocks zenoh's thread)."""
        try:
            h = Header.unpack(sample.attachment.to_bytes() if sample.attachment is not None else None)
            data = sample.payload.to_bytes()
            item: tuple[Header | None, Arrival] = (
                h,
                decode_chunk(data) if h.msg_type is MsgType.CHUNK else decode(EventMsg, data),
            )
        except WireError as exc:
            item = (None, exc)
        try:
            self.inbox.put_nowait(item)
        except queue.Full:
            pass

    # ------------------------------------------------------------------ handshake

    def statuses(self, timeout: float = 2.0) -> list[ServerStatus]:
        """Every replica's status under this robot's namespace."""
        out = []
        for rp in self.z.get(self.keys.server("*", "status"), timeout=timeout):
            if rp.ok is not None:
                out.append(decode(ServerStatus, rp.ok.payload.to_bytes()))
        return out

    def open(
        self,
        replica: str | None = None,
        *,
        action_names: list[str] | None = None,
        features: list[FeatureSpec] | None = None,
        rtc: bool = False,
        timeout: float = 5.0,
        **kw: Any,
    ) -> SessionAck:
        """Open a session (on the first replica that answers status when `replica` is None)."""
        if replica is None:
            found = self.statuses()
            assert found, f"{self.uuid}: no replica answered the status query under {self.keys.base}"
            replica = found[0].replica
        req = SessionOpen(
            self.uuid,
            list(SIM_ARM_ACTION_NAMES if action_names is None else action_names),
            default_features() if features is None else features,
            rtc=RtcSettings(enabled=rtc),
            **{"fps": 30.0, **kw},
        )
        return self.open_raw(replica, encode(req), timeout)

    def open_raw(self, replica: str, payload: bytes, timeout: float = 5.0, as_robot: str = "") -> SessionAck:
        """Send `payload` as a session open on `as_robot`'s key (default: this robot's own)."""
        replies = list(self.z.get(self.keys.session(replica, as_robot or self.uuid), payload=payload, timeout=timeout))
        assert replies and replies[0].ok is not None, (
            f"no session reply: {[r.err and r.err.payload.to_bytes() for r in replies]}"
        )
        ack = decode(SessionAck, replies[0].ok.payload.to_bytes())
        if ack.ok:
            self.replica, self.ack = replica, ack
        return ack

    # ------------------------------------------------------------------ data plane

    def send(
        self,
        state: Floats,
        image: NDArray[np.uint8] | None = None,
        *,
        seq: int | None = None,
        episode_start: bool = False,
        schema: int = SCHEMA_VERSION,
        prefix: tuple[Floats, Floats] | None = None,
        delay: int = 0,
        quality: int = 90,
    ) -> int:
        """Send one observation (state + a 96x128 front camera) to the session's replica; returns its seq id."""
        self.seq = self.seq + 1 if seq is None else seq
        body = self._body(state, image, episode_start=episode_start, prefix=prefix, delay=delay, quality=quality)
        self._put(body, schema)
        return self.seq

    def send_burst(self, states: list[Floats]) -> int:
        """One observation per state, all encoded first and then put back to back (a burst no encode spreads out,
        however loaded the box); returns the last seq id."""
        bodies = [self._body(s) for s in states]
        for body in bodies:
            self.seq += 1
            self._put(body, SCHEMA_VERSION)
        return self.seq

    @staticmethod
    def _body(
        state: Floats,
        image: NDArray[np.uint8] | None = None,
        *,
        episode_start: bool = False,
        prefix: tuple[Floats, Floats] | None = None,
        delay: int = 0,
        quality: int = 90,
    ) -> bytes:
        """State + a 96x128 front camera (grey unless `image`), encoded as a robot sends it."""
        img = np.full((96, 128, 3), 100, np.uint8) if image is None else image
        msg = ObservationMsg(
            {"observation.state": np.asarray(state, np.float32)},
            {"observation.images.front": img},
            episode_start=episode_start,
            inference_delay_steps=delay,
            prefix_model=None if prefix is None else prefix[0],
            prefix_robot=None if prefix is None else prefix[1],
        )
        return encode_observation(msg, quality)

    def _put(self, body: bytes, schema: int) -> None:
        self.send_raw(body, Header(schema, MsgType.OBS, self.seq, self.episode, time.monotonic_ns(), 1).pack())

    def send_raw(self, payload: bytes, attachment: bytes | None) -> None:
        import zenoh

        self.z.put(
            self.keys.obs(self.replica, self.uuid),
            payload,
            attachment=attachment,
            congestion_control=zenoh.CongestionControl.DROP,
        )

    def recv(self, timeout: float = 30.0) -> tuple[Header | None, Arrival]:
        """The next (header, body) from the action key; queue.Empty after `timeout`."""
        return self.inbox.get(timeout=timeout)

    def wait_for(
        self, pred: Callable[[Header | None, Arrival], bool], timeout: float = 30.0
    ) -> tuple[Header | None, Arrival]:
        """The first arrival for which `pred(header, body)` holds; queue.Empty after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            h, body = self.recv(max(0.01, deadline - time.monotonic()))
            if pred(h, body):
                return h, body

    def request(self, state: Floats, timeout: float = 30.0, **kw: Any) -> ActionChunkMsg:
        """Send an observation and return the chunk that answers it."""
        seq = self.send(state, **kw)
        _, body = self.wait_for(
            lambda h, b: isinstance(b, ActionChunkMsg) and h is not None and h.seq_id == seq, timeout
        )
        return cast(ActionChunkMsg, body)  # the predicate above accepted only an ActionChunkMsg

    def reset(self, episode: int, timeout: float = 2.0) -> ResetAck:
        """Acked episode reset on the session's replica."""
        self.episode = episode
        req = ResetRequest(self.ack.session_id if self.ack else "", episode)
        replies = list(self.z.get(self.keys.reset(self.replica, self.uuid), payload=encode(req), timeout=timeout))
        assert replies and replies[0].ok is not None, f"{self.uuid}: no reset reply from {self.replica}"
        return decode(ResetAck, replies[0].ok.payload.to_bytes())

    # ------------------------------------------------------------------ console side

    def publish_telemetry(self, telemetry: RobotTelemetry) -> None:
        """Put one telemetry sample on this robot's telemetry key (what the engine does once a second)."""
        if self._telemetry is None:
            self._telemetry = self.z.declare_publisher(self.keys.robot(self.uuid, "telemetry"))
        self._telemetry.put(encode(telemetry))

    def drop_token(self) -> None:
        """Leave the fleet as a crashed robot would: the liveliness token goes, nothing else is said."""
        if self.token is not None:
            self.token.undeclare()
            self.token = None

    def close(self) -> None:
        """Undeclare everything (the session stays open: it belongs to the caller)."""
        self.drop_token()
        for d in (self.sub, self._telemetry):
            if d is not None:
                try:
                    d.undeclare()
                except Exception:  # noqa: BLE001  the session may already be closed
                    pass
        self.sub = self._telemetry = None
