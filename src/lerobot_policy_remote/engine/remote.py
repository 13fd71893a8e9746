"""`RemoteInferenceEngine`: lerobot's RTC engine shape, with the policy behind a `RemoteLink`.

Threads (mirrors `lerobot/rollout/inference/rtc.py`):
- control thread: `notify_observation` writes a latest-only slot; `get_action` pops the stamped
  `ActionQueue` and applies staleness + fallback. Memory only: no I/O, never waits on the network.
- one network worker running `step()`: handshake, one request in flight, send gating by
  `buffer_time_s`, merge, timeouts, reconnects, acked resets, telemetry, operator episode resets.
The transport (Zenoh, or in memory in tests) sits behind `engine/transport.RemoteLink` (`self.transport`);
the link state machine (`engine/link.py`) is `self.states`. Building requests (`request.py`), checking
replies (`validate.py`) and the telemetry report (`telemetry.robot_telemetry`) are pure functions.
"""

from __future__ import annotations

import collections
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from threading import Event, Lock, Thread

import torch
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.rollout.inference.base import InferenceEngine

from ..wire.codes import EventKind, Refusal
from ..wire.data import encode_observation
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.keys import ServiceKeys
from ..wire.messages import EpisodeResetAck, EventMsg, ResetRequest, RobotTelemetry, SessionOpen
from ..wire.text import printable
from ..zenoh_config import ZenohConfigError
from . import identity, provenance, request, resend, startup
from .config import RemoteInferenceConfig
from .control import ControlSide
from .fallback import zero_warning
from .handshake import HandshakeError, reconnect_failure
from .inflight import RequestTracker
from .link import LinkState, LinkStateMachine
from .provenance import Provenance
from .queue import StampedActionQueue, WindowedLatency
from .reconnect import Reconnector
from .session import RemoteSession
from .telemetry import ChunkTimings, EngineSnapshot, EngineStats, RttWindow, TelemetryPacer, robot_telemetry
from .transport import RemoteLink
from .validate import InboundError, answers, read_chunk, read_inbound

logger = logging.getLogger(__name__)
# One line per merged chunk: the round trip split into server queue wait, inference and network
# (network = RTT - queue_wait - inference, design section 11), joinable with the server's audit line.
chunk_logger = logging.getLogger("lerobot.remote.chunks")

_IDLE_S = 0.005
_JOIN_TIMEOUT_S = 3.0
_RESET_TIMEOUT_S = 1.0
TIMEOUT_STREAK = 2  # consecutive request timeouts that mean "link lost"
STALENESS_REPORT_FRACTION = 2 / 3  # staleness at this fraction of max_action_age_s is reported at once (console alert default)


class RemoteInferenceEngine(InferenceEngine):
    def __init__(self, config: RemoteInferenceConfig, *, hw_features: dict, ordered_action_keys: list[str], task: str, fps: float,
                 model_id: str, policy_type: str = "", robot_type: str = "", shutdown_event: Event | None = None,
                 transport: RemoteLink | None = None, request_clock_ns: Callable[[], int] = time.monotonic_ns,
                 rename_map: dict[str, str] | None = None) -> None:
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
        self.keys = ServiceKeys.for_service(model_id, config.service_revision or "main", config.service_task or task)
        if transport is None:
            from .zenoh_link import ZenohLink

            transport = ZenohLink(config.zenoh_settings(), self.keys, self.client_uuid, direct=config.direct_on_same_host)
        self.transport: RemoteLink = transport
        self._clock_ns = request_clock_ns

        rtc = config.rtc
        self.queue = StampedActionQueue(RTCConfig(enabled=rtc.enabled, prefix_attention_schedule=rtc.prefix_attention_schedule,
                                                  max_guidance_weight=rtc.max_guidance_weight, execution_horizon=rtc.execution_horizon))
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
        self.on_start_failed: Callable[[], None] | None = None
        # recording (engine/recording.py): told of an operator reset before it applies, with the next episode id;
        # True means the strategy itself resets the engine when it starts that episode (episodic)
        self.on_operator_reset: Callable[[int], bool] | None = None
        if warning := zero_warning(config.fallback, self.action_names):
            logger.warning(warning)

    # ------------------------------------------------------------------ public state (read-only views)
    ready = property(lambda self: self._ready.is_set() or self._failed.is_set())
    failed = property(lambda self: self._failed.is_set())
    state = property(lambda self: self.states.snapshot()[0])
    telemetry_seq = property(lambda self: self._pacer.seq)
    last_outcome = property(lambda self: self.requests.last_outcome)  # ok | timeout | bad_chunk | server_lost | event:<name>
    session_id = property(lambda self: self.session.session_id)
    replica = property(lambda self: self.session.replica)
    session_epoch = property(lambda self: self.session.epoch)
    fingerprint = property(lambda self: self.session.fingerprint)
    rtc_active = property(lambda self: self.session.rtc_active)
    executed_count = property(lambda self: self.control.executed_count)
    fallback_count = property(lambda self: self.control.fallback_count)

    @property
    def frame_quality(self) -> int:
        """JPEG quality of the frames sent now: 0 (raw) to a replica on this machine, unless told otherwise."""
        return 0 if self.session.same_host and self.cfg.raw_frames_on_same_host else self.cfg.jpeg_quality

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
            scope = startup.certificate_scope(self.cfg.tls_cert, self.client_uuid)
            deadline = time.monotonic() + self.cfg.connect_timeout_s
            while True:
                try:
                    self._handshake()
                    break
                except HandshakeError as exc:
                    # a router that lists other services has answered: the namespace is wrong, waiting will not fix it
                    others = startup.services_if_wrong_namespace(self.transport.services, exc)
                    # nor will it when the router answers this certificate nothing in the namespace asked for
                    refused = exc.code == Refusal.NO_SERVER and scope is not None and scope.refuses(self.session_open_request())
                    if exc.fatal or others or refused or time.monotonic() >= deadline:
                        err = startup.handshake_failed(self.transport.services, self.session_open_request(), exc, others,
                                                       bool(self.cfg.tls_cert), scope)
                        self.transport.close()
                        self._never_moved()
                        raise err from None
                    time.sleep(0.2)
        if worker:
            self._thread = Thread(target=self._worker, daemon=True, name="RemoteInference")
            self._thread.start()
        logger.info("Remote inference started: robot %s -> %s (replica %s, session %s)", self.client_uuid, self.keys.base, self.replica, self.session_id)

    def _never_moved(self) -> None:
        """A failed start: the robot never moved, so lerobot's teardown need not drive it back (`hook.py` sets this)."""
        if self.on_start_failed is not None:
            self.on_start_failed()

    def why_nothing_executed(self) -> str:
        """For a rollout that ends without executing one remote action: the most likely reason, in the user's words."""
        return startup.nothing_executed(self.counters, self.states.dead_reason, self.client_uuid, self.identity.source,
                                        bool(self.cfg.tls_cert), self.replica)

    def stop(self) -> None:
        self._stop.set()
        self._active.clear()
        self._wake.set()
        if self._thread is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=_JOIN_TIMEOUT_S)
        self._thread = None
        self.transport.close()
        logger.info("Remote inference stopped (executed=%d, fallbacks=%d, stale dropped=%d, %s)",
                    self.executed_count, self.fallback_count, self.queue.stale_dropped, dict(self.counters))

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
    def notify_observation(self, obs: dict) -> None:
        self.control.notify(obs)

    def get_action(self, obs_frame: dict | None = None) -> torch.Tensor | None:
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
        self.states.evaluate(now, self.queue.fresh_count(now, self.cfg.max_action_age_s), self.control.streaming_began,
                             paused=not self._active.is_set(), request_age=self.requests.age(now), failing=self.requests.failing)
        self.control.prov_log.flush()
        self._maybe_telemetry()
        return True

    def _go_dead(self) -> None:
        if self._failed.is_set():
            return
        reason = self.states.dead_reason or "unknown"
        logger.error("Remote inference is DEAD: %s. Stopping the rollout.", printable(reason, 300))
        self._failed.set()
        self._ready.set()
        self._maybe_telemetry(force=True)
        if self._global_shutdown is not None:
            self._global_shutdown.set()

    # -- handshake / reconnect
    def session_open_request(self) -> SessionOpen:
        """What this robot asks a server for (also what `lerobot-fleet doctor` dry-runs)."""
        return request.session_open(
            client_uuid=self.client_uuid, action_names=self.action_names, hw_features=self._hw_features, model_id=self.model_id,
            revision=self.cfg.service_revision or "main", service=self.cfg.service_task or self._task, policy_type=self._policy_type,
            fps=self.fps, task=self._task, rtc=self.cfg.rtc, tags=self.cfg.tags, expect_fingerprint=self.fingerprint,
            rename_map=self.rename_map, reply_dtype=self.cfg.reply_dtype, reply_max_error=self.cfg.reply_max_error,
        )

    def _handshake(self) -> None:
        if self.cfg.handshake_jitter_s > 0:  # see RemoteInferenceConfig.handshake_jitter_s
            time.sleep(random.uniform(0.0, self.cfg.handshake_jitter_s))
        req = self.session_open_request()
        # The worker sends nothing while it blocks on the handshake's queries (seconds when every replica is busy
        # with a drain's herd): report now, so the console's data is as old as the handshake, not also the wait
        # that came before it (issue 20).
        self._maybe_telemetry(force=True)
        avoid, self._drained_from = self._drained_from, ""  # one try on the last discovery's replicas, then discover
        opened = self.transport.handshake(req, min(self.cfg.request_timeout_s, 5.0), self.fingerprint, avoid=avoid)
        self.session.accept(opened, self.action_names, bool(self.cfg.rtc.enabled))
        self.transport.bind(self.replica)
        self.requests.new_session()
        self.latency.reset()  # a new path may have a new latency; the old window must not linger
        if self.cfg.rtc.enabled and not self.rtc_active:  # expected for a policy without RTC (ACT): not a warning
            logger.info("RTC: the server's policy has no RTC, chunks are appended (expected for ACT; nothing to change)")
        self.queue.cfg.enabled = self.rtc_active
        for w in opened.ack.warnings:
            if not (self.session.action_order_checked is False and "could not be verified" in w):
                logger.warning("Server: %s", printable(w, 500))
        if self.session.action_order_checked is False:
            logger.warning(
                "Action order NOT checked: the server's policy names no actions, so only the action dimension (%d) was "
                "compared. Chunk columns drive the motors in this robot's order %s; if the policy was trained with another "
                "order the robot will move the wrong joints. Fix: set action_feature_names in the server manifest (the "
                "training dataset's meta/info.json features.action.names), or strict_action_names to refuse such robots",
                len(self.action_names), self.action_names)
        self.reconnect.succeeded()
        self._episode_start = True
        self.states.on_handshake_ok(time.monotonic())
        self._ready.set()  # first-chunk gating is implicit: get_action returns None until a merge
        logger.info("Session %s opened on replica %s (epoch %d, rtc=%s, chunk_size=%d, frames %s, %s)", printable(self.session_id, 80),
                    self.replica, self.session_epoch, self.rtc_active, self.session.chunk_size,
                    "raw over shared memory (same host)" if self.frame_quality == 0 and self.session.same_host
                    else ("raw" if self.frame_quality == 0 else f"JPEG q{self.frame_quality}"),
                    "direct link" if self.transport.direct else "via the router")

    def _try_reconnect(self, now: float) -> None:
        if not self.reconnect.due(now):
            return
        try:
            self._handshake()
        except HandshakeError as exc:
            if exc.fatal:
                self.states.on_fatal(now, str(exc))
                return
            wait = self.reconnect.failed(time.monotonic())
            logger.warning("Reconnect failed (%s); next try in %.1fs", reconnect_failure(exc, self.replica), wait)

    def _lose_link(self, now: float, why: str) -> None:
        if self.states.on_link_lost(now, why):
            logger.warning("Link lost (%s): reconnecting", why)
        self.requests.drop()
        self.reconnect.lost(now)

    def _check_link(self, now: float) -> None:
        if self.transport.server_lost() and not self.reconnect.needed:
            self.counters["server_token_lost"] += 1
            self.reconnect.token_lost(now)
            self.requests.fail("server_lost")  # leaves STREAMING at once; the buffer keeps playing
        if self.reconnect.token_expired(now):
            self._lose_link(now, f"server liveliness lost (replica {self.replica})")
            return
        out = self.requests.expire(now, self.cfg.request_timeout_s)
        if out is not None:
            n = self.requests.timeouts
            self.counters["timeouts"] += 1
            logger.warning("Request seq=%d timed out after %.1fs (%d in a row)", out.seq_id, self.cfg.request_timeout_s, n)
            if n >= TIMEOUT_STREAK:
                self._lose_link(now, f"{n} request timeouts in a row")

    # -- requests
    def _should_send(self, now: float) -> bool:
        if self.control.latest() is None:
            return False
        if self.requests.session_fresh and not self.requests.failing:
            return True  # see RequestTracker.session_fresh
        queue_s = self.queue.fresh_count(now, self.cfg.max_action_age_s) * self._dt
        return queue_s <= self.cfg.buffer_time_s

    def _send_request(self, now: float) -> None:
        obs, t_obs = self.control.latest()  # type: ignore[misc]
        if now - t_obs > self.cfg.max_action_age_s:
            return  # the control loop stopped feeding us: its actions would be stale on arrival anyway
        idx_before = self.queue.get_action_index()
        prefix = (None, None)
        if self.rtc_active:
            prefix = request.rtc_prefix(self.queue.get_left_over(), self.queue.get_processed_left_over(), int(self.cfg.rtc.execution_horizon))
        msg = request.build_observation(self._hw_features, obs, task=self._task, delay_steps=self.latency.delay_steps(self._dt),
                                        episode_start=self._episode_start, prefix=prefix, rename_map=self.rename_map)
        if self.cfg.resize_on_robot and self.session.image_sizes:
            msg.images = request.resize_for_model(msg.images, self.session.image_sizes)
        try:
            body = encode_observation(msg, self.frame_quality)
        except WireError as exc:
            self.counters["encode_errors"] += 1
            logger.error("Could not encode the observation: %s", exc)
            return
        out = self.requests.begin(mono_ns=self._clock_ns(), t_obs=t_obs, t_send=time.monotonic(), idx_before=idx_before,
                                  episode_id=self.episode_id, epoch=self.session_epoch)
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
        if resend.resend_due(body_bytes=len(sent[1]), age_s=now - out.t_send, since_last_send_s=now - sent[3],
                             rtt_p50_s=p50_ms / 1000.0 if p50_ms > 0 else None):
            self.transport.publish_observation(sent[1], sent[2])
            self._sent = (sent[0], sent[1], sent[2], time.monotonic())
            self.counters["resent"] += 1

    # -- replies
    def _on_inbound(self, payload: bytes, attachment: bytes | None, now: float) -> None:
        try:
            header, event = read_inbound(payload, attachment)
        except InboundError as exc:
            self.counters[exc.counter] += 1
            logger.warning("Dropped a message on the action key: %s", exc)
            return
        if event is not None:
            self._handle_event(event, header, now)
        else:
            self._handle_chunk(payload, header, now)

    def _handle_event(self, ev: EventMsg, header: Header, now: float) -> None:
        self.counters[f"event_{ev.event}"] += 1
        if ev.event == EventKind.UNKNOWN_SESSION:
            if header.session_epoch == self.session_epoch:
                self._lose_link(now, "server does not know this session (it restarted?)")
                self.reconnect.retry_now(now)
        elif ev.event == EventKind.DRAINING:
            if ev.session_id != self.session_id:  # only our own replica knows our session id
                self.counters["foreign_event"] += 1
                logger.warning("Ignored a draining event for session %s (ours is %s)", printable(ev.session_id, 40), self.session_id)
                return
            logger.warning("Replica %s is draining: riding the buffer and reconnecting elsewhere", self.replica)
            self._drained_from = self.replica
            self._lose_link(now, f"replica {self.replica} draining")
            self.reconnect.retry_now(now)  # another replica may have room now: no reason to wait
        else:
            logger.warning("Server %s for seq=%d: %s", printable(ev.event, 40), ev.seq_id, printable(ev.message, 300))
            out = self.requests.current
            if out is not None and header.seq_id == out.seq_id and header.session_epoch == self.session_epoch:
                self.requests.fail(f"event:{ev.event}")
        self.requests.last_outcome = f"event:{ev.event}"

    def _handle_chunk(self, payload: bytes, header: Header, now: float) -> None:
        out = self.requests.awaited()  # in flight, or the latest one after its timeout (a late reply to it is merged)
        if out is None or not answers(header, out, self.session_epoch, self.episode_id):
            self.counters["late_dropped"] += 1
            return
        if header.schema_version != self.session.schema_version:
            self.counters["schema_mismatch"] += 1
            logger.warning("Refused a chunk for seq=%d: schema version %d, this session negotiated %d (upgrade the older side)",
                           header.seq_id, header.schema_version, self.session.schema_version)
            if out is self.requests.current:
                self.requests.fail("bad_chunk")
            return
        late = out is not self.requests.current
        msg, problem, foreign = read_chunk(payload, session_id=self.session_id, action_dim=len(self.action_names), outstanding=out)
        if foreign:
            self.counters["foreign_session"] += 1
            logger.error("Refused a chunk for seq=%d: %s; the server no longer holds this session: re-handshaking", out.seq_id,
                         printable(problem, 300))
            self._lose_link(now, "the server answered with another session's chunk")
            self.reconnect.retry_now(now)
            return
        if msg is None:
            self.requests.fail("bad_chunk")
            self.counters["bad_chunk"] += 1
            logger.error("Refused a chunk for seq=%d: %s", out.seq_id, printable(problem, 300))
            return
        rtt = max(0.0, (self._clock_ns() - out.mono_ns) / 1e9)
        new_delay = math.ceil(rtt / self._dt)
        meta = Provenance(self.session_id, out.seq_id, out.episode_id, self.replica)
        with self._reset_lock:
            if self.episode_id != out.episode_id:
                return
            trimmed = self.queue.merge_stamped(torch.from_numpy(msg.chunk_model.copy()), torch.from_numpy(msg.chunk_robot.copy()),
                                               new_delay, out.idx_before, out.t_obs, meta, replace=self.requests.session_fresh)
        self.requests.succeed()
        self.latency.add(rtt)
        self.rtt.add(rtt * 1000.0)
        network_ms = self.timings.add(rtt * 1000.0, msg.queue_wait_ms, msg.inference_ms)
        self.counters["chunks"] += 1
        self.counters["late_merged"] += late
        self.counters["superseded"] += msg.superseded_seqs
        self.states.on_merge(time.monotonic())
        chunk_logger.info("chunk session_id=%s seq_id=%d episode_id=%d replica=%s rtt=%.1fms queue_wait=%.1fms inference=%.1fms "
                          "network=%.1fms delay=%d trimmed=%d queue=%d%s", printable(self.session_id, 80), out.seq_id, out.episode_id, self.replica,
                          rtt * 1000, msg.queue_wait_ms, msg.inference_ms, network_ms, new_delay, trimmed, self.queue.qsize(),
                          " late" if late else "")

    # -- resets
    def _server_reset(self) -> None:
        if self.reconnect.needed or not self.session_id:
            return
        try:
            ack = self.transport.server_reset(ResetRequest(session_id=self.session_id, episode_id=self.episode_id), _RESET_TIMEOUT_S)
        except Exception as exc:  # a reset failure is logged, never fatal
            logger.warning("Episode reset query failed: %s", exc)
            return
        if ack is None:
            logger.warning("Episode reset was not acknowledged within %gs (continuing: requests are stateless)", _RESET_TIMEOUT_S)
        elif not ack.ok:
            logger.warning("Server refused the episode reset: %s", printable(ack.message, 300))

    def _apply_operator_resets(self) -> None:
        for query in self.transport.reset_queries():
            if self.on_operator_reset is not None and self.on_operator_reset(self.episode_id + 1):
                logger.info("Operator episode reset handed to the recording strategy: episode %d next", self.episode_id + 1)
                query.answer(EpisodeResetAck(ok=True, message="episode reset: the recording ends this episode",
                                             episode_id=self.episode_id + 1))
                continue
            with self._reset_lock:
                self._local_reset()
            self._server_reset()
            logger.info("Operator episode reset applied: episode %d", self.episode_id)
            query.answer(EpisodeResetAck(ok=True, message="episode reset", episode_id=self.episode_id))

    # -- observability
    def stats(self) -> EngineStats:
        c = self.counters
        return EngineStats(requests=c["requests"], superseded=c["superseded"], errors=c["bad_chunk"] + c["timeouts"],
                           fallback_count=self.fallback_count, rtt_p50_ms=self.rtt.percentile(0.5),
                           rtt_p95_ms=self.rtt.percentile(0.95), delay_steps=self.latency.delay_steps(self._dt),
                           queue_wait_ms_p50=self.timings.queue_wait.percentile(0.5),
                           inference_ms_p50=self.timings.inference.percentile(0.5), network_ms_p50=self.timings.network.percentile(0.5))

    def snapshot(self, now: float) -> EngineSnapshot:
        state, since, _ = self.states.snapshot()
        return EngineSnapshot(
            client_uuid=self.client_uuid, state=state, state_age_s=now - since, model_id=self.model_id, service=self.keys.service,
            session_id=self.session_id, replica=self.replica, episode_id=self.episode_id, staleness_s=self.queue.head_age(now),
            queue_s=self.queue.fresh_count(now, self.cfg.max_action_age_s) / self.fps, last_outcome=self.last_outcome,
            dead_reason=self.states.dead_reason, fps=self.fps, seq=self.telemetry_seq,
            action_order={None: "", True: "checked", False: "unchecked"}[self.session.action_order_checked],
            max_action_age_s=self.cfg.max_action_age_s,
            rtc=("on" if self.session.rtc_active else "off") if self.session.epoch else "",
        )

    def telemetry(self) -> RobotTelemetry:
        return robot_telemetry(self.stats(), self.snapshot(time.monotonic()))

    def _maybe_telemetry(self, force: bool = False) -> None:
        now = time.monotonic()
        state_version = self.states.snapshot()[2]
        # What the console alerts on goes at once even when telemetry has slowed down (adaptive pacing): a state
        # change, and staleness crossing 2/3 of the robot's bound (the console's default staleness threshold).
        high = self.queue.head_age(now) >= STALENESS_REPORT_FRACTION * self.cfg.max_action_age_s
        send, _ = self._pacer.due(state_version * 2 + high, now, force)
        if state_version != self._logged_state_version:
            self._logged_state_version = state_version
            logger.info("Link state: %s", self.state.value)
        if send:
            self.transport.publish_telemetry(self.telemetry())
