"""`RemoteInferenceEngine`: lerobot's RTC engine shape, with the policy behind a `RemoteLink`.

Threads (mirrors `lerobot/rollout/inference/rtc.py`):
- control thread: `notify_observation` writes a latest-only slot; `get_action` pops the stamped
  `ActionQueue` and applies staleness + fallback. Memory only: no I/O, never waits on the network.
- one network worker running `step()`: handshake, one request in flight, send gating by
  `buffer_time_s`, merge, timeouts, reconnects, acked resets, telemetry, operator episode resets.
The transport (Zenoh, or in memory in tests) sits behind `engine/transport.RemoteLink` (`self.transport`);
the link state machine (`engine/link.py`) is `self.states`. Building requests (`request.py`), checking
replies (`validate.py`) and the telemetry report (`telemetry.robot_telemetry`) are pure functions. The worker's
handshake side (first connection, re-handshakes, link loss) is `connect.py`, its reply handling `replies.py`, its
episode resets `resets.py`, moves to another model `moves.py`, stats and paced telemetry `reporting.py`, the
read-only public state `views.py`.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from threading import Event, Lock, Thread
from typing import Any

import torch
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.base import InferenceEngine
from numpy.typing import NDArray

from ..wire.data import encode_observation
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import Namespace, ServiceKeys
from ..wire.rollout import MoveCommand
from ..wire.text import printable
from ..zenoh_config import ZenohConfigError
from . import identity, provenance, request, resend, startup
from .config import RemoteInferenceConfig
from .connect import Connecting
from .control import ControlSide
from .fallback import zero_warning
from .inflight import RequestTracker
from .link import LinkState, LinkStateMachine
from .moves import Moves
from .queue import StampedActionQueue, WindowedLatency
from .reconnect import Reconnector
from .replies import Replies, chunk_logger  # noqa: F401 (chunk_logger: its old import path, bench/peers/robot_loop.py)
from .reporting import Reporting
from .resets import Resets
from .session import RemoteSession
from .telemetry import ChunkTimings, RttWindow, StreamSummary, TelemetryPacer
from .transport import RemoteLink
from .views import EngineViews

logger = logging.getLogger(__name__)

_IDLE_S = 0.005
_JOIN_TIMEOUT_S = 3.0


class RemoteInferenceEngine(Connecting, Replies, Resets, Moves, Reporting, EngineViews, InferenceEngine):
    """lerobot's inference engine with the policy on a server: this module keeps the lifecycle, the worker loop and
    requests; the handshake side is `connect.Connecting`, replies `replies.Replies`, episode resets `resets.Resets`,
    moves to another model `moves.Moves`, stats and telemetry `reporting.Reporting`, the read-only state
    `views.EngineViews`."""

    def __init__(
        self,
        config: RemoteInferenceConfig,
        *,
        hw_features: dict[str, Any],
        ordered_action_keys: list[str],
        task: str,
        fps: float,
        model_id: str,
        policy_type: str = "",
        robot_type: str = "",
        shutdown_event: Event | None = None,
        transport: RemoteLink | None = None,
        request_clock_ns: Callable[[], int] = time.monotonic_ns,
        rename_map: dict[str, str] | None = None,
    ) -> None:
        """`transport`: how the robot reaches the servers (default: Zenoh per `config`; `MemoryLink` in tests).
        `request_clock_ns`: stamps requests and measures RTT -> RTC delay; a seam so the parity test can fix
        the latency like lerobot's engine. `rename_map`: the rollout's `--rename_map` (robot observation key ->
        policy key), applied to what the robot sends exactly as lerobot's rename step applies it locally: the
        wire carries the policy's names."""
        self.cfg = config
        self._hw_features = hw_features
        self.rename_map = dict(rename_map or {})
        self.action_names = list(ordered_action_keys)
        self._task = task
        self.fps = float(fps)
        self._dt = 1.0 / self.fps
        self.model_id = model_id
        self._policy_type = policy_type
        self._global_shutdown = shutdown_event
        self.identity = identity.resolve(config.client_uuid, config.tls_cert)  # with a certificate: its CN
        self.client_uuid = self.identity.client_uuid
        # the namespace the robot runs in: the CLI's, until an operator's rollout moves it (engine/moves.py)
        self.namespace = Namespace(model_id, config.service_revision or "main", config.service_task or task)
        self.keys = self.namespace.keys
        self._moving: MoveCommand | None = None  # a move whose first chunk has not merged yet
        self._move_due: tuple[MoveCommand, ServiceKeys] | None = None  # answered, to be made by a step that may block
        if transport is None:
            from .zenoh_link import ZenohLink

            self.transport: RemoteLink = ZenohLink(
                config.zenoh_settings(), self.keys, self.client_uuid, direct=config.direct_on_same_host
            )
        else:
            self.transport = transport
        self._clock_ns = request_clock_ns

        rtc = config.rtc
        self.queue = StampedActionQueue(
            RTCConfig(
                enabled=rtc.enabled,
                prefix_attention_schedule=rtc.prefix_attention_schedule,
                max_guidance_weight=rtc.max_guidance_weight,
                execution_horizon=rtc.execution_horizon,
            )
        )
        self.latency = WindowedLatency(maxlen=config.latency_window)
        self.states = LinkStateMachine(config.degraded_after_s, config.max_offline_s, time.monotonic())
        grace = config.failover_grace_s if len(config.endpoints()) > 1 else 0.0
        self.reconnect = Reconnector(config.reconnect_initial_backoff_s, config.reconnect_max_backoff_s, grace)
        self.counters: collections.Counter[str] = collections.Counter()
        self._active, self._stop, self._wake = Event(), Event(), Event()
        self.control = ControlSide(config, self.queue, self.states, self.action_names, self._active)
        self._ready, self._failed, self._pending_reset = Event(), Event(), Event()
        self._reset_lock = Lock()
        self._thread: Thread | None = None
        self.episode_id = 0
        self._episode_start = True
        self._drained_from = ""  # the replica whose drain notice moves us (the next handshake avoids it)
        self.session = RemoteSession()
        self.requests = RequestTracker()
        self.rtt = RttWindow()
        self._sent: tuple[int, bytes, Header, float] | None = None  # the request in flight as published (re-sends)
        self.timings = ChunkTimings()
        self._pacer = TelemetryPacer(config.telemetry_period_s, config.telemetry_max_period_s)
        self._logged_state_version = -1
        self._summary = StreamSummary()
        self.on_start_failed: Callable[[], None] | None = None
        # recording (engine/recording.py): told of an operator reset before it applies, with the next episode id;
        # True means the strategy itself resets the engine when it starts that episode (episodic)
        self.on_operator_reset: Callable[[int], bool] | None = None
        if warning := zero_warning(config.fallback, self.action_names):
            logger.warning(warning)

    # ------------------------------------------------------------------ lifecycle
    def start(self, wait_first_handshake: bool = True, worker: bool = True) -> None:
        """Join the network and do the first handshake before the robot moves (fail fast).

        `worker=False` leaves the network worker unstarted: the caller drives `step()` itself.
        """
        self._stop.clear()
        if self.identity.problem:
            self._never_moved()
            raise startup.RemoteStartupError(startup.PREFIX + self.identity.problem)
        if self.identity.source == "certificate":
            logger.info("Robot id %s: the name (CN) of --inference.tls_cert", self.client_uuid)
        try:
            self.transport.open(self._wake.set)
        except ZenohConfigError as exc:
            self._never_moved()
            raise startup.router_unreachable(self.cfg, exc) from exc
        if wait_first_handshake:
            self._first_handshake()
        if worker:
            self._thread = Thread(target=self._worker, daemon=True, name="RemoteInference")
            self._thread.start()
        logger.info(
            "Remote inference started: robot %s -> %s (replica %s, session %s)",
            self.client_uuid,
            self.keys.base,
            self.replica,
            self.session_id,
        )

    def _never_moved(self) -> None:
        """A failed start: the robot never moved, so lerobot's teardown need not drive it back (`hook.py` sets this)."""
        if self.on_start_failed is not None:
            self.on_start_failed()

    def why_nothing_executed(self) -> str:
        """For a rollout that ends without executing one remote action: the most likely reason, in the user's words."""
        return startup.nothing_executed(
            self.counters,
            self.states.dead_reason,
            self.client_uuid,
            self.identity.source,
            bool(self.cfg.tls_cert),
            self.replica,
        )

    def stop(self) -> None:
        self._stop.set()
        self._active.clear()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_JOIN_TIMEOUT_S)
        self._thread = None
        self.transport.close()
        logger.info(
            "Remote inference stopped (executed=%d, fallbacks=%d, stale dropped=%d, %s)",
            self.executed_count,
            self.fallback_count,
            self.queue.stale_dropped,
            dict(self.counters),
        )

    def pause(self) -> None:
        """Stop publishing observations; the queue stays intact (parity with RTC)."""
        self._active.clear()
        provenance.publish(None)  # what the robot executes now (dagger: the leader) is not a remote action

    def resume(self) -> None:
        self.states.restart_offline_clock(time.monotonic())
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
        self.requests.drop()  # a late chunk of the old episode no longer answers the latest request
        self.control.new_episode()

    # ------------------------------------------------------------------ control thread
    def notify_observation(self, obs: dict[str, Any]) -> None:
        self.control.notify(obs)

    def get_action(self, obs_frame: dict[str, Any] | None = None) -> torch.Tensor | None:
        return self.control.get_action()

    # ------------------------------------------------------------------ worker
    def _worker(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.wait(_IDLE_S)
                self._wake.clear()
                if not self.step():
                    break
        except Exception as exc:  # never let the worker die silently: the robot must stop cleanly
            if self._stop.is_set():  # it outlived stop() (blocked past the join) and found the link closed: done
                logger.debug("Remote inference worker ended after stop: %s", exc)
                return
            logger.exception("Remote inference worker crashed: %s", exc)
            self.states.on_fatal(time.monotonic(), f"worker crashed: {exc}")
            self._go_dead()

    def step(self, *, handshake: bool = True) -> bool:
        """One pass of the network worker (the worker thread loops on it); False once DEAD.

        `handshake=False` leaves a due re-handshake (the one step that blocks on a query) for a later call, so a caller
        stepping many engines on one thread (the fleet simulator) can hand that robot to a thread of its own."""
        now = time.monotonic()
        self.reconnect.on_server_changes(self.transport.server_changes(), now, self.replica)
        for msg in self.transport.receive():
            self._on_inbound(msg.payload, msg.attachment, now)
        self._apply_operator_resets()
        self._apply_moves(perform=handshake)
        if self._pending_reset.is_set():
            self._pending_reset.clear()
            self._server_reset()
        self._check_link(now)
        if self.state is LinkState.DEAD:
            self._go_dead()
            return False
        if self.reconnect.needed:
            if handshake:
                self._try_reconnect(now)
        elif self._active.is_set() and self.requests.current is None and self._should_send(now):
            self._send_request(now)
        else:
            self._maybe_resend(now)
        now = time.monotonic()
        self.states.evaluate(
            now,
            self.queue.fresh_count(now, self.cfg.max_action_age_s),
            self.control.streaming_began,
            paused=not self._active.is_set(),
            request_age=self.requests.age(now),
            failing=self.requests.failing,
        )
        self.control.prov_log.flush()
        self.report_telemetry()
        return True

    def _go_dead(self) -> None:
        if self._failed.is_set():
            return
        reason = self.states.dead_reason or "unknown"
        logger.error("Remote inference is DEAD: %s. Stopping the rollout.", printable(reason, 300))
        self._failed.set()
        self._ready.set()
        self.report_telemetry(force=True)
        if self._global_shutdown is not None:
            self._global_shutdown.set()

    # -- requests
    def _should_send(self, now: float) -> bool:
        if self.control.latest() is None:
            return False
        if self.requests.session_fresh and not self.requests.failing:
            return True  # see RequestTracker.session_fresh
        queue_s = self.queue.fresh_count(now, self.cfg.max_action_age_s) * self._dt
        return queue_s <= self.cfg.buffer_time_s

    def _send_request(self, now: float) -> None:
        latest = self.control.latest()
        if latest is None:
            return  # nothing to send yet (`_should_send` already says so; the check keeps the types honest)
        obs, t_obs = latest
        if now - t_obs > self.cfg.max_action_age_s:
            return  # the control loop stopped feeding us: its actions would be stale on arrival anyway
        idx_before = self.queue.get_action_index()
        prefix: tuple[NDArray[Any] | None, NDArray[Any] | None] = (None, None)
        if self.rtc_active and self._prefix_allowed():
            horizon = int(self.cfg.rtc.execution_horizon)
            prefix = request.rtc_prefix(*self.queue.left_over_head(horizon), horizon)
        msg = request.build_observation(
            self._hw_features,
            obs,
            task=self._task,
            delay_steps=self.delay_steps(),
            episode_start=self._episode_start,
            prefix=prefix,
            rename_map=self.rename_map,
        )
        if self.cfg.resize_on_robot and self.session.image_sizes:
            msg.images = request.resize_for_model(msg.images, self.session.image_sizes)
        try:
            body = encode_observation(msg, self.frame_quality)
        except WireError as exc:
            self.counters["encode_errors"] += 1
            logger.error("Could not encode the observation: %s", exc)
            return
        out = self.requests.begin(
            mono_ns=self._clock_ns(),
            t_obs=t_obs,
            t_send=time.monotonic(),
            idx_before=idx_before,
            episode_id=self.episode_id,
            epoch=self.session_epoch,
        )
        header = Header(self.session.schema_version, MsgType.OBS, out.seq_id, out.episode_id, out.mono_ns, out.epoch)
        self.transport.publish_observation(body, header)
        self._sent = (out.seq_id, body, header, time.monotonic())
        self._episode_start = False
        self.counters["requests"] += 1

    def _maybe_resend(self, now: float) -> None:
        """A small observation possibly dropped in a full queue goes again, identical (engine/resend.py)."""
        out, sent = self.requests.current, self._sent
        if out is None or sent is None or sent[0] != out.seq_id:
            return
        p50_ms = self.rtt.percentile(0.5)
        if resend.resend_due(
            body_bytes=len(sent[1]),
            age_s=now - out.t_send,
            since_last_send_s=now - sent[3],
            rtt_p50_s=p50_ms / 1000.0 if p50_ms > 0 else None,
        ):
            self.transport.publish_observation(sent[1], sent[2])
            self._sent = (sent[0], sent[1], sent[2], time.monotonic())
            self.counters["resent"] += 1

    def delay_steps(self) -> int:
        """The RTC inference delay the next request carries (and telemetry reports): the windowed latency in control
        steps, capped at this session's horizon and chunk size (`request.capped_delay`)."""
        return request.capped_delay(
            self.latency.delay_steps(self._dt), int(self.cfg.rtc.execution_horizon), self.session.chunk_size
        )
