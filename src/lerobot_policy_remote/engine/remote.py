"""`RemoteInferenceEngine`: lerobot's RTC engine shape, with the policy behind a Zenoh link.

Threads (mirrors `lerobot/rollout/inference/rtc.py`):
- control thread: `notify_observation` writes a latest-only slot; `get_action` pops the stamped
  `ActionQueue` and applies staleness + fallback. Memory only: no I/O, never waits on the network.
- one network worker: handshake, one request in flight, send gating by `buffer_time_s`, merge,
  timeouts, reconnects, acked resets, telemetry, provenance logging, operator episode resets.
- Zenoh callbacks only deposit (bounded deques + an Event) and return.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass
from threading import Event, Lock, Thread
from typing import Any

import numpy as np
import torch
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.base import InferenceEngine
from lerobot.utils.feature_utils import build_dataset_frame

from ..wire.codec import decode, encode
from ..wire.data import ObservationMsg, decode_chunk, encode_observation
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import ServiceKeys, check_id
from ..wire.messages import (
    SCHEMA_VERSION,
    EpisodeResetAck,
    EventMsg,
    FeatureSpec,
    ResetAck,
    ResetRequest,
    RobotTelemetry,
    RtcSettings,
    SessionOpen,
)
from ..zenoh_config import ZenohConfigError, open_session
from . import provenance, startup
from .config import FallbackBehavior, RemoteInferenceConfig
from .handshake import HandshakeError
from .handshake import open_session as open_remote_session
from .link import LinkState, LinkStateMachine
from .queue import ChunkMeta, StampedActionQueue, WindowedLatency

logger = logging.getLogger(__name__)
prov_logger = logging.getLogger("lerobot.remote.provenance")

_IDLE_S = 0.005
_JOIN_TIMEOUT_S = 3.0
TIMEOUT_STREAK = 2  # consecutive request timeouts that mean "link lost"


@dataclass
class _InFlight:
    seq_id: int
    mono_ns: int
    t_obs: float  # monotonic time of the source observation
    t_send: float
    idx_before: int
    episode_id: int
    epoch: int


class RemoteInferenceEngine(InferenceEngine):
    def __init__(
        self,
        config: RemoteInferenceConfig,
        *,
        hw_features: dict,
        ordered_action_keys: list[str],
        task: str,
        fps: float,
        model_id: str,
        policy_type: str = "",
        robot_type: str = "",
        shutdown_event: Event | None = None,
        session_factory=None,
    ) -> None:
        self.cfg = config
        self._hw_features = hw_features
        self.action_names = list(ordered_action_keys)
        self._task = task
        self._fps = float(fps)
        self._dt = 1.0 / self._fps
        self._model_id = model_id
        self._policy_type = policy_type
        self._robot_type = robot_type
        self._global_shutdown = shutdown_event
        self._session_factory = session_factory or (lambda: open_session(config.zenoh_settings()))
        self.client_uuid = check_id(config.client_uuid, "client_uuid") if config.client_uuid else uuid.uuid4().hex
        self.keys = ServiceKeys.for_service(model_id, config.service_revision or "main", config.service_task or task)
        self._vel_mask = torch.tensor([k.endswith(".vel") for k in self.action_names])

        queue_cfg = RTCConfig(
            enabled=config.rtc.enabled,
            prefix_attention_schedule=config.rtc.prefix_attention_schedule,
            max_guidance_weight=config.rtc.max_guidance_weight,
            execution_horizon=config.rtc.execution_horizon,
        )
        self.queue = StampedActionQueue(queue_cfg)
        self._max_age_s = float(config.max_action_age_s)
        self.latency = WindowedLatency(maxlen=config.latency_window)
        self.link = LinkStateMachine(config.degraded_after_s, config.max_offline_s, time.monotonic())

        # control-thread state (memory only)
        self._obs_lock = Lock()
        self._obs: tuple[dict, float] | None = None  # (obs, monotonic time it was notified)
        self._obs_version = 0
        self._last_action: torch.Tensor | None = None
        self._streaming_began = False  # this episode saw a merged chunk (gates fallback=zero)
        self._executed: collections.deque[tuple[ChunkMeta, float]] = collections.deque(maxlen=4096)
        self.fallback_count = 0
        self.executed_count = 0

        # worker state
        self._active = Event()  # resume()/pause()
        self._stop = Event()
        self._wake = Event()
        self._thread: Thread | None = None
        self._session = None
        self._zenoh_objs: list[Any] = []
        self._replica_objs: list[Any] = []
        self._incoming: collections.deque = collections.deque(maxlen=16)
        self._operator_resets: collections.deque = collections.deque(maxlen=4)
        self._server_alive_lost = Event()
        self._pending_reset = Event()
        self._reset_lock = Lock()
        self.episode_id = 0
        self._episode_start = True
        self.session_epoch = 0
        self.session_id = ""
        self.replica = ""
        self.fingerprint = ""
        self.rtc_active = False
        self._publisher = None
        self._telemetry_pub = None
        self._seq = 0
        self._in_flight: _InFlight | None = None
        self._timeouts = 0
        self._need_handshake = True
        self._backoff = config.reconnect_initial_backoff_s
        self._next_attempt = 0.0
        self.counters = collections.Counter()
        self._last_outcome = ""  # how the last request ended: ok | timeout | bad_chunk | event:<name>
        self._ready = Event()
        self._failed = Event()
        self._last_telemetry = 0.0
        self._telemetry_version = -1
        self._tele_seq = 0
        self._last_exec_key: tuple[str, int] | None = None
        self._rtt_ms: collections.deque[float] = collections.deque(maxlen=64)
        # The request clock (send stamp, RTT, delay statistic). A seam so the golden parity test can
        # drive the merge with a fixed latency, exactly like lerobot's engine measures inference time.
        self._now_ns = time.monotonic_ns

    # ------------------------------------------------------------------ lifecycle
    @property
    def ready(self) -> bool:
        return self._ready.is_set() or self._failed.is_set()

    @property
    def failed(self) -> bool:
        return self._failed.is_set()

    @property
    def state(self) -> LinkState:
        return self.link.snapshot()[0]

    def start(self, wait_first_handshake: bool = True, worker: bool = True) -> None:
        """Open our Zenoh session and do the first handshake before the robot moves (fail fast).

        `worker=False` leaves the network worker unstarted so a test can step send/merge by hand.
        """
        self._stop.clear()
        try:
            self._session = self._session_factory()
        except ZenohConfigError as exc:
            raise startup.router_unreachable(self.cfg.connect_endpoint, str(exc.__cause__ or exc)) from exc
        s = self._session
        self._zenoh_objs.append(s.liveliness().declare_token(self.keys.robot(self.client_uuid, "alive")))
        self._zenoh_objs.append(s.declare_subscriber(self.keys.robot(self.client_uuid, "action"), self._on_action))
        self._zenoh_objs.append(s.declare_queryable(self.keys.robot(self.client_uuid, "episode_reset"), self._on_episode_reset))
        self._telemetry_pub = s.declare_publisher(self.keys.robot(self.client_uuid, "telemetry"))
        self._zenoh_objs.append(self._telemetry_pub)
        if wait_first_handshake:
            deadline = time.monotonic() + self.cfg.connect_timeout_s
            while True:
                try:
                    self._handshake()
                    break
                except HandshakeError as exc:
                    if exc.fatal or time.monotonic() >= deadline:
                        err = startup.handshake_failed(self._session, self.keys, self._session_open_msg(), exc)
                        self._close_session()
                        raise err from None
                    time.sleep(0.2)
        if worker:
            self._thread = Thread(target=self._worker, daemon=True, name="RemoteInference")
            self._thread.start()
        logger.info("Remote inference started: robot %s -> %s (replica %s, session %s)", self.client_uuid, self.keys.base, self.replica, self.session_id)

    def stop(self) -> None:
        self._stop.set()
        self._active.clear()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_JOIN_TIMEOUT_S)
        self._thread = None
        self._close_session()
        logger.info("Remote inference stopped (executed=%d, fallbacks=%d, stale dropped=%d, %s)",
                    self.executed_count, self.fallback_count, self.queue.stale_dropped, dict(self.counters))

    def pause(self) -> None:
        """Stop publishing observations; the queue stays intact (parity with RTC)."""
        self._active.clear()

    def resume(self) -> None:
        self.link.restart_offline_clock(time.monotonic())
        self._active.set()
        self._wake.set()

    def reset(self) -> None:
        """Episode boundary: clear queue + stamps, bump episode, ask the worker for an acked server reset."""
        with self._reset_lock:
            self._local_reset()
        self._pending_reset.set()
        self._wake.set()

    def _local_reset(self) -> None:
        self.queue.clear()
        self.episode_id += 1
        self._episode_start = True
        self._in_flight = None  # a late chunk of the old episode no longer answers the latest request
        self._streaming_began = False
        self._last_action = None

    # ------------------------------------------------------------------ control thread
    def notify_observation(self, obs: dict) -> None:
        with self._obs_lock:
            self._obs = (obs, time.monotonic())
            self._obs_version += 1

    def get_action(self, obs_frame: dict | None = None) -> torch.Tensor | None:
        """Control thread, every tick: no I/O, no logging, no torch call on the streaming path.

        The returned tensor is a row prepared at merge time (independent of the queue): see
        StampedActionQueue. Provenance is logged by the worker from `_executed`.
        """
        now = time.monotonic()
        item = self.queue.pop_fresh(now, self._max_age_s)
        if item is not None:
            action, src_t, meta = item
            self._last_action = action
            self._streaming_began = True
            self.executed_count += 1
            age = now - src_t
            self._executed.append((meta, age))
            provenance.publish_meta(meta, age)
            return action
        provenance.publish(None)
        # Queue dry or only stale actions left: STALLED (the worker publishes the change).
        self.link.evaluate(now, 0, self._streaming_began, paused=not self._active.is_set())
        return self._fallback()

    def _fallback(self) -> torch.Tensor | None:
        if not self._streaming_began:
            return None  # before the first chunk of an episode: nothing, whatever the fallback
        fb = self.cfg.fallback
        if fb is FallbackBehavior.HOLD:
            return None
        if fb is FallbackBehavior.REPEAT_LAST and self._last_action is not None:
            self.fallback_count += 1
            return self._last_action.clone()
        if fb is FallbackBehavior.ZERO and bool(self._vel_mask.any()):
            if self._last_action is None and not bool(self._vel_mask.all()):
                return None
            base = self._last_action.clone() if self._last_action is not None else torch.zeros(len(self.action_names))
            base[self._vel_mask] = 0.0
            self.fallback_count += 1
            return base
        return None

    # ------------------------------------------------------------------ zenoh callbacks (deposit only)
    def _on_action(self, sample) -> None:
        att = sample.attachment
        self._incoming.append((sample.payload.to_bytes(), att.to_bytes() if att is not None else None))
        self._wake.set()

    def _on_episode_reset(self, query) -> None:
        self._operator_resets.append(query)  # answered by the worker at a safe point
        self._wake.set()

    def _on_server_alive(self, sample) -> None:
        import zenoh

        if sample.kind == zenoh.SampleKind.DELETE:
            self._server_alive_lost.set()
            self._wake.set()

    # ------------------------------------------------------------------ worker
    def _worker(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait(_IDLE_S)
                self._wake.clear()
                now = time.monotonic()
                self._drain_incoming(now)
                self._apply_operator_resets()
                if self._pending_reset.is_set():
                    self._pending_reset.clear()
                    self._server_reset()
                self._check_link(now)
                if self.link.snapshot()[0] is LinkState.DEAD:
                    self._go_dead()
                    break
                if self._need_handshake:
                    self._try_reconnect(now)
                elif self._active.is_set() and self._in_flight is None and self._should_send(now):
                    self._send_request(now)
                self.link.evaluate(
                    time.monotonic(),
                    self.queue.fresh_count(time.monotonic(), self.cfg.max_action_age_s),
                    self._streaming_began,
                    paused=not self._active.is_set(),
                )
                self._log_provenance()
                self._maybe_telemetry()
        except Exception as exc:  # never let the worker die silently: the robot must stop cleanly
            logger.exception("Remote inference worker crashed: %s", exc)
            self.link.on_fatal(time.monotonic(), f"worker crashed: {exc}")
            self._go_dead()

    def _go_dead(self) -> None:
        if self._failed.is_set():
            return
        reason = self.link.dead_reason or "unknown"
        logger.error("Remote inference is DEAD: %s. Stopping the rollout.", reason)
        self._failed.set()
        self._ready.set()
        self._maybe_telemetry(force=True)
        if self._global_shutdown is not None:
            self._global_shutdown.set()

    # -- handshake / reconnect
    def _session_open_msg(self) -> SessionOpen:
        feats: list[FeatureSpec] = []
        for key, ft in self._hw_features.items():
            kind = "image" if ft.get("dtype") in ("image", "video") else "state"
            feats.append(FeatureSpec(name=key, kind=kind, shape=[int(x) for x in ft.get("shape", ())]))
        rtc = self.cfg.rtc
        return SessionOpen(
            client_uuid=self.client_uuid,
            action_names=self.action_names,
            features=feats,
            model_id=self._model_id,
            revision=self.cfg.service_revision or "main",
            service=self.cfg.service_task or self._task,
            policy_type=self._policy_type,
            fps=self._fps,
            task=self._task,
            rtc=RtcSettings(
                enabled=bool(rtc.enabled),
                execution_horizon=int(rtc.execution_horizon),
                max_guidance_weight=float(rtc.max_guidance_weight),
                prefix_attention_schedule=str(getattr(rtc.prefix_attention_schedule, "value", rtc.prefix_attention_schedule)),
            ),
            tags=dict(self.cfg.tags),
            expect_fingerprint=self.fingerprint,
        )

    def _handshake(self) -> None:
        opened = open_remote_session(self._session, self.keys, self._session_open_msg(), timeout_s=min(self.cfg.request_timeout_s, 5.0), expect_fingerprint=self.fingerprint)
        ack = opened.ack
        if ack.action_names and list(ack.action_names) != self.action_names:
            raise HandshakeError("Action name/order mismatch between server policy and this robot "
                                 f"(server {ack.action_names}, robot {self.action_names})", fatal=True, code="action_mismatch")
        fp = ack.model.fingerprint
        if self.fingerprint and fp and fp != self.fingerprint:
            raise HandshakeError("the server now runs a different model/revision/checkpoint than this session was opened with: "
                                 "refusing to execute its chunks", fatal=True, code="model_mismatch")
        self.fingerprint = self.fingerprint or fp
        for obj in self._replica_objs:
            _undeclare(obj)
        self._replica_objs = []
        self._server_alive_lost.clear()
        self.replica = ack.replica or opened.status.replica
        self._replica_objs.append(self._session.liveliness().declare_subscriber(self.keys.server(self.replica, "alive"), self._on_server_alive, history=True))
        import zenoh

        self._publisher = self._session.declare_publisher(
            self.keys.obs(self.replica, self.client_uuid),
            congestion_control=zenoh.CongestionControl.DROP,
            priority=zenoh.Priority.DATA,
            express=False,
        )
        self._replica_objs.append(self._publisher)
        self.session_id = ack.session_id
        self.session_epoch += 1
        self._in_flight = None
        self._timeouts = 0
        self.latency.reset()  # a new path may have a new latency; the old window must not linger
        self.rtc_active = bool(ack.rtc_active) and self.cfg.rtc.enabled
        if self.cfg.rtc.enabled and not self.rtc_active:
            logger.warning("RTC downgraded to chunk-append (server does not support RTC)")
        self.queue.cfg.enabled = self.rtc_active
        for w in ack.warnings:
            logger.warning("Server: %s", w)
        self._need_handshake = False
        self._episode_start = True
        self._backoff = self.cfg.reconnect_initial_backoff_s
        self.link.on_handshake_ok(time.monotonic())
        self._ready.set()  # first-chunk gating is implicit: get_action returns None until a merge
        logger.info("Session %s opened on replica %s (epoch %d, rtc=%s, chunk_size=%d)", self.session_id, self.replica,
                    self.session_epoch, self.rtc_active, ack.chunk_size)

    def _try_reconnect(self, now: float) -> None:
        if now < self._next_attempt:
            return
        try:
            self._handshake()
        except HandshakeError as exc:
            if exc.fatal:
                self.link.on_fatal(now, str(exc))
                return
            logger.warning("Reconnect failed (%s); next try in %.1fs", exc, self._backoff)
            self._next_attempt = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, self.cfg.reconnect_max_backoff_s)

    def _lose_link(self, now: float, why: str) -> None:
        if self.link.on_link_lost(now, why):
            logger.warning("Link lost (%s): reconnecting", why)
        self._need_handshake = True
        self._in_flight = None
        self._next_attempt = now + self._backoff
        self._backoff = min(self._backoff * 2, self.cfg.reconnect_max_backoff_s)

    def _check_link(self, now: float) -> None:
        if self._server_alive_lost.is_set() and not self._need_handshake:
            self._server_alive_lost.clear()
            self._lose_link(now, f"server liveliness lost (replica {self.replica})")
            return
        fl = self._in_flight
        if fl is not None and now - fl.t_send > self.cfg.request_timeout_s:
            self._in_flight = None
            self._timeouts += 1
            self.counters["timeouts"] += 1
            self._last_outcome = "timeout"
            logger.warning("Request seq=%d timed out after %.1fs (%d in a row)", fl.seq_id, self.cfg.request_timeout_s, self._timeouts)
            if self._timeouts >= TIMEOUT_STREAK:
                self._lose_link(now, f"{self._timeouts} request timeouts in a row")

    # -- requests
    def _should_send(self, now: float) -> bool:
        with self._obs_lock:
            if self._obs is None:
                return False
        queue_s = self.queue.fresh_count(now, self.cfg.max_action_age_s) * self._dt
        return queue_s <= self.cfg.buffer_time_s

    def _send_request(self, now: float) -> None:
        with self._obs_lock:
            obs, t_obs = self._obs  # type: ignore[misc]
        if now - t_obs > self.cfg.max_action_age_s:
            return  # the control loop stopped feeding us: its actions would be stale on arrival anyway
        frame = build_dataset_frame(self._hw_features, obs, prefix="observation")
        state: dict[str, np.ndarray] = {}
        images: dict[str, np.ndarray] = {}
        for key, value in frame.items():
            arr = np.asarray(value)
            if arr.ndim == 3 and arr.dtype == np.uint8:
                images[key] = arr
            else:
                state[key] = arr.astype(np.float32).reshape(-1)
        idx_before = self.queue.get_action_index()
        prefix_model = prefix_robot = None
        if self.rtc_active:
            h = int(self.cfg.rtc.execution_horizon)
            left = self.queue.get_left_over()
            proc = self.queue.get_processed_left_over()
            if left is not None and len(left) > 0:
                prefix_model = left[:h].numpy()
                prefix_robot = proc[:h].numpy() if proc is not None else None
        delay = self.latency.delay_steps(self._dt)
        msg = ObservationMsg(state=state, images=images, task=self._task, inference_delay_steps=delay,
                             prefix_model=prefix_model, prefix_robot=prefix_robot, episode_start=self._episode_start)
        try:
            body = encode_observation(msg, self.cfg.jpeg_quality)
        except WireError as exc:
            self.counters["encode_errors"] += 1
            logger.error("Could not encode the observation: %s", exc)
            return
        self._seq += 1
        mono = self._now_ns()
        header = Header(SCHEMA_VERSION, MsgType.OBS, self._seq, self.episode_id, mono, self.session_epoch)
        self._in_flight = _InFlight(self._seq, mono, t_obs, time.monotonic(), idx_before, self.episode_id, self.session_epoch)
        self._publisher.put(body, attachment=header.pack())
        self._episode_start = False
        self.counters["requests"] += 1

    # -- replies
    def _drain_incoming(self, now: float) -> None:
        while self._incoming:
            payload, attachment = self._incoming.popleft()
            try:
                header = Header.unpack(attachment)
            except WireError as exc:
                self.counters["bad_header"] += 1
                logger.warning("Dropped a message with a bad header on the action key: %s", exc)
                continue
            if header.msg_type is MsgType.EVENT:
                self._handle_event(payload, header, now)
            elif header.msg_type is MsgType.CHUNK:
                self._handle_chunk(payload, header)
            else:
                self.counters["bad_header"] += 1

    def _handle_event(self, payload: bytes, header: Header, now: float) -> None:
        try:
            ev = decode(EventMsg, payload)
        except WireError as exc:
            self.counters["bad_event"] += 1
            logger.warning("Dropped a malformed event: %s", exc)
            return
        self.counters[f"event_{ev.event}"] += 1
        self._last_outcome = f"event:{ev.event}"
        fl = self._in_flight
        answers_latest = fl is not None and header.seq_id == fl.seq_id and header.session_epoch == self.session_epoch
        if ev.event == "unknown_session":
            if header.session_epoch == self.session_epoch:
                self._lose_link(now, "server does not know this session (it restarted?)")
                self._backoff = self.cfg.reconnect_initial_backoff_s
                self._next_attempt = now
        elif ev.event == "draining":
            logger.warning("Replica %s is draining: riding the buffer and reconnecting elsewhere", self.replica)
            self._lose_link(now, f"replica {self.replica} draining")
        else:
            logger.warning("Server %s for seq=%d: %s", ev.event, ev.seq_id, ev.message)
            if answers_latest:
                self._in_flight = None

    def _handle_chunk(self, payload: bytes, header: Header) -> None:
        fl = self._in_flight
        if fl is None or header.seq_id != fl.seq_id or header.session_epoch != self.session_epoch or header.episode_id != self.episode_id:
            self.counters["late_dropped"] += 1
            return
        try:
            msg = decode_chunk(payload)
        except WireError as exc:
            self._in_flight = None
            self.counters["bad_chunk"] += 1
            self._last_outcome = "bad_chunk"
            logger.error("Refused a chunk for seq=%d: %s", fl.seq_id, exc)
            return
        model, robot = msg.chunk_model, msg.chunk_robot
        a = len(self.action_names)
        problem = ""
        if msg.session_id != self.session_id:
            problem = f"session_id {msg.session_id!r} is not ours ({self.session_id!r})"
        elif robot.ndim != 2 or robot.shape[1] != a or model.shape[0] != robot.shape[0]:
            problem = f"wrong shape {tuple(robot.shape)} (expected (T, {a}))"
        elif not (np.isfinite(robot).all() and np.isfinite(model).all()):
            problem = "NaN/Inf values"
        elif msg.seq_id_echo not in (0, fl.seq_id) or (msg.client_mono_ns_echo and msg.client_mono_ns_echo != fl.mono_ns):
            problem = "echo does not match the request"
        if problem:
            self._in_flight = None
            self.counters["bad_chunk"] += 1
            self._last_outcome = "bad_chunk"
            logger.error("Refused a chunk for seq=%d: %s", fl.seq_id, problem)
            return
        now_ns = self._now_ns()
        rtt = max(0.0, (now_ns - fl.mono_ns) / 1e9)
        new_delay = math.ceil(rtt / self._dt)
        meta = ChunkMeta(self.session_id, fl.seq_id, fl.episode_id, self.replica)
        with self._reset_lock:
            if self.episode_id != fl.episode_id:
                return
            trimmed = self.queue.merge_stamped(torch.from_numpy(model.copy()), torch.from_numpy(robot.copy()), new_delay, fl.idx_before, fl.t_obs, meta)
        self._in_flight = None
        self._timeouts = 0
        self.latency.add(rtt)
        self._rtt_ms.append(rtt * 1000.0)
        self.counters["chunks"] += 1
        self.counters["superseded"] += msg.superseded_seqs
        self._last_outcome = "ok"
        self.link.on_merge(time.monotonic())
        logger.debug("Merged seq=%d rtt=%.1fms delay=%d trimmed=%d queue=%d", fl.seq_id, rtt * 1000, new_delay, trimmed, self.queue.qsize())

    # -- resets
    def _server_reset(self) -> None:
        if self._need_handshake or not self.session_id or self._session is None:
            return
        req = ResetRequest(session_id=self.session_id, episode_id=self.episode_id)
        try:
            for reply in self._session.get(self.keys.server(self.replica, "reset"), payload=encode(req), timeout=1.0):
                if reply.ok is not None:
                    ack = decode(ResetAck, reply.ok.payload.to_bytes())
                    if not ack.ok:
                        logger.warning("Server refused the episode reset: %s", ack.message)
                    return
            logger.warning("Episode reset was not acknowledged within 1s (continuing: requests are stateless)")
        except Exception as exc:  # a reset failure is logged, never fatal
            logger.warning("Episode reset query failed: %s", exc)

    def _apply_operator_resets(self) -> None:
        while self._operator_resets:
            query = self._operator_resets.popleft()
            with query:
                with self._reset_lock:
                    self._local_reset()
                self._server_reset()
                logger.info("Operator episode reset applied: episode %d", self.episode_id)
                query.reply(query.key_expr, encode(EpisodeResetAck(ok=True, message="episode reset", episode_id=self.episode_id)))

    # -- observability
    def _log_provenance(self) -> None:
        while self._executed:
            meta, age = self._executed.popleft()
            key = (meta.session_id, meta.seq_id)
            if key != self._last_exec_key:
                self._last_exec_key = key
                prov_logger.info("executing session_id=%s seq_id=%d episode_id=%d replica=%s age=%.3fs",
                                 meta.session_id, meta.seq_id, meta.episode_id, meta.replica, age)

    def telemetry(self) -> RobotTelemetry:
        now = time.monotonic()
        state, since, _ = self.link.snapshot()
        rtts = sorted(self._rtt_ms)
        pct = (lambda q: rtts[min(len(rtts) - 1, int(q * len(rtts)))] if rtts else 0.0)
        self._tele_seq += 1
        return RobotTelemetry(
            client_uuid=self.client_uuid, state=state.value, model_id=self._model_id, service=self.keys.service,
            session_id=self.session_id, replica=self.replica, episode_id=self.episode_id,
            staleness_s=self.queue.head_age(now), queue_s=self.queue.fresh_count(now, self.cfg.max_action_age_s) * self._dt,
            rtt_p50_ms=pct(0.5), rtt_p95_ms=pct(0.95), delay_steps=self.latency.delay_steps(self._dt),
            fallback_count=self.fallback_count, requests=self.counters["requests"], superseded=self.counters["superseded"],
            errors=self.counters["bad_chunk"] + self.counters["timeouts"], last_outcome=self.link.dead_reason or self._last_outcome,
            state_age_s=now - since, fps=self._fps, seq=self._tele_seq,
        )

    def _maybe_telemetry(self, force: bool = False) -> None:
        _, _, version = self.link.snapshot()
        now = time.monotonic()
        if not force and version == self._telemetry_version and now - self._last_telemetry < self.cfg.telemetry_period_s:
            return
        if version != self._telemetry_version:
            logger.info("Link state: %s", self.state.value)
        self._telemetry_version = version
        self._last_telemetry = now
        if self._telemetry_pub is not None:
            try:
                self._telemetry_pub.put(encode(self.telemetry()))
            except Exception as exc:
                logger.debug("telemetry put failed: %s", exc)

    def _close_session(self) -> None:
        for obj in self._replica_objs + self._zenoh_objs:
            _undeclare(obj)
        self._replica_objs, self._zenoh_objs = [], []
        if self._session is not None:
            try:
                self._session.close()
            except Exception:
                pass
            self._session = None


def _undeclare(obj: Any) -> None:
    try:
        obj.undeclare()
    except Exception:
        pass
