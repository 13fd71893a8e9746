"""The inference worker: take ready sessions, check each request, run the model, publish, audit.

One thread. Each cycle the scheduler picks sessions from the ring (one, or up to `max_batch` when
batching); each request is checked on its own (a bad one is refused without touching the others),
the good ones that may share a forward pass run as one batch, the rest alone. The request type and what answering
it publishes (chunk, audit line, debug capture) are `replies.py`.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable

from ..wire.codes import EventKind
from ..wire.data import decode_observation
from ..wire.errors import Reason, WireError
from ..wire.header import Header, MsgType
from ..wire.limits import WireLimits
from .audit import Auditor, DebugCapture, audit_line
from .backend_base import Backend, ObsContractError
from .batch_window import BatchWindow
from .decode_pool import decode_targets, take_decoded
from .lifecycle import Lifecycle
from .load import LoadGauge
from .metrics import ServerMetrics
from .replies import Replying, Request
from .scheduler import Scheduler
from .sessions import Mail, Registry, Session

log = logging.getLogger("lerobot.policy_server")


class PassStats:
    """Recent forward passes (batch size, seconds): what the status reports as measured capacity."""

    def __init__(self, window: int = 64) -> None:
        self._passes: collections.deque[tuple[int, float]] = collections.deque(maxlen=window)

    def add(self, batch: int, seconds: float) -> None:
        self._passes.append((batch, seconds))

    def recent(self) -> list[tuple[int, float]]:
        return list(self._passes)

    def pass_ms_p50(self) -> float:
        times = sorted(t for _, t in self._passes)
        return times[len(times) // 2] * 1e3 if times else 0.0

    def mean_batch(self) -> float:
        return sum(b for b, _ in self._passes) / len(self._passes) if self._passes else 0.0

    def chunks_per_s(self) -> float:
        """Chunks per second of model time at the recent batch sizes (the capacity if the worker never idles)."""
        busy = sum(t for _, t in self._passes)
        return sum(b for b, _ in self._passes) / busy if busy > 0 else 0.0


class Worker(Replying):
    """Owns the inference thread's loop. It is handed exactly what it uses (service.py wires it); publishing each
    reply is `replies.Replying`.

    Public state: `stats` (recent passes), `in_flight` (requests inside a pass), `error` (why the loop
    died, for /healthz) and `wake` (set by callbacks when there is work).
    """

    def __init__(
        self,
        *,
        lifecycle: Lifecycle,
        load: LoadGauge,
        registry: Registry,
        scheduler: Scheduler,
        backend: Backend,
        metrics: ServerMetrics,
        auditor: Auditor,
        replica: str,
        limits: WireLimits,
        batch_limit: int = 1,
        max_wait_s: float | None = None,
        capture: DebugCapture | None = None,
        progress: Callable[[str], None] = print,
    ) -> None:
        self.lifecycle = lifecycle
        self.load = load
        self.registry = registry
        self.scheduler = scheduler
        self.backend = backend
        self.metrics = metrics
        self.auditor = auditor
        self.replica = replica
        self.limits = limits  # limits.max_payload_bytes is the manifest's max_obs_bytes
        # The one decode of an observation, run by the decode pool or, when no decoder got to it, by this worker.
        self.decode = functools.partial(decode_observation, limits=limits, targets=decode_targets(backend))
        self.batch_limit = batch_limit
        self.window = BatchWindow(max_wait_s)  # None: derived from the pass time and when each robot is due
        self.capture = capture
        self.progress = progress
        self.stats = PassStats()
        self.in_flight = 0
        self.error = ""
        self.wake = threading.Event()
        # Waiting for work with nothing chosen: an observation arriving now is decoded by this thread itself (the
        # decode pool's hand-off and hand-back cost two thread wake-ups, ~0.2 ms on a 2-core box, for no overlap).
        self.idle = False
        self._woke = False  # back from idle: the next pick hands what arrived meanwhile (past the first) to the pool
        self.prefetch: Callable[[Mail], None] | None = None  # the decode pool's submit (service.py)
        # Set once this thread has bound torch's threads and warmed up; `startup_error` says why that failed.
        self.ready = threading.Event()
        self.startup_error: BaseException | None = None
        self._thread: threading.Thread | None = None  # the thread running `run`

    def alive(self) -> bool:
        """Whether the serving loop's thread still runs (the housekeeper ends a drain when it does not)."""
        return self._thread is not None and self._thread.is_alive()

    def wake_up(self) -> None:
        """Work arrived (a reset, an observation): the loop looks again now instead of after its idle wait."""
        self.wake.set()

    # ------------------------------------------------------------------ loop
    def run(self, warm_up: Callable[[], None] | None = None) -> None:
        """Bind torch's threads, warm up on this thread (the one that serves), then serve until stopped.

        Warming up here builds this thread's OpenMP team before the first robot's pass: a spare that takes over
        a drained replica's robots must not pay that on their first request (service.start waits for `ready`)."""
        lc = self.lifecycle
        self._thread = threading.current_thread()
        try:
            self.backend.bind_serving_thread()  # torch's CPU threads are this thread's (torch_threads.py)
            if warm_up is not None:
                warm_up()
        except BaseException as exc:  # start() raises it on its own thread: a failed warm-up is a failed start
            self.startup_error = exc
            return
        finally:
            self.ready.set()
        try:
            while not lc.stopped:
                chosen = self._choose()
                if chosen:
                    self.serve(chosen)
                elif lc.draining:
                    if lc.mark_drained():
                        self.progress("Drain complete: all pending requests served")
                    return
                else:
                    self.idle = True
                    self.wake.wait(0.1)
                    self.wake.clear()
                    self.idle = False
                    self._woke = True
        except BaseException as exc:  # the health endpoint must show this
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("inference worker died:\n%s", traceback.format_exc())
            self.metrics.worker_alive.set(0)

    def _choose(self) -> list[Session]:
        """The scheduler's pick; when batching, wait (bounded by the window) for the batch to fill."""
        lc = self.lifecycle
        ready = self.registry.ready_in_ring_order()
        chosen = self.scheduler.select(ready)
        if self._woke:
            # what arrived while idle skipped the pool: this thread decodes the first it serves, the pool the rest
            self._woke = False
            self._prefetch(ready[1:])
        if not chosen or self.batch_limit <= 1:
            return chosen
        win = self.window
        batchable = [s for s in chosen if self._may_share(s)]
        pass_s = self.stats.pass_ms_p50() / 1e3
        # No wait is possible (a full pick, nothing to batch, an opportunistic or zero window): skip the look at
        # every other session, which cost O(sessions) per pass.
        if (
            not batchable
            or len(batchable) >= self.batch_limit
            or (win.horizon_s(pass_s) <= 0 if win.fixed_s is None else win.fixed_s <= 0)
        ):
            return chosen
        # a request that runs alone is never waited for
        sessions = [s for s in self.registry.all() if self._may_share(s)]
        picked = set(chosen)
        others = [(s.mailbox.last_arrival, s.mailbox.interval) for s in sessions if s not in picked]
        fill = win.target(self.batch_limit, len(batchable), win.due(others, win.horizon_s(pass_s)), len(sessions))
        wait = win.wait_s(len(batchable), fill, pass_s)
        if wait <= 0:
            return chosen
        self._prefetch(chosen)  # what arrived while this worker was idle is decoded during the window, by the pool
        deadline = win.clock() + wait
        while len(batchable) < fill and len(chosen) < self.batch_limit and not lc.stopped and not lc.draining:
            left = deadline - win.clock()
            if left <= 0:
                break
            self.wake.wait(left)
            self.wake.clear()
            chosen = self.scheduler.select(self.registry.ready_in_ring_order())
            batchable = [s for s in chosen if self._may_share(s)]
        return chosen

    def _may_share(self, s: Session) -> bool:
        """Can this session's requests share a pass: plain ones can, RTC ones where the backend batches guidance."""
        return s.rtc is None or self.backend.batches_rtc

    def _prefetch(self, sessions: list[Session]) -> None:
        """Hand these sessions' undecoded observations to the decode pool (a mail it already has is skipped there)."""
        if self.prefetch is None:
            return
        for s in sessions:
            mail = s.mailbox.peek()
            if mail is not None and mail.decoded is None:
                self.prefetch(mail)

    # ------------------------------------------------------------------ one cycle
    def serve(self, sessions: list[Session]) -> None:
        reqs: list[Request] = []
        for s in sessions:
            mail, superseded = s.mailbox.take()
            self.registry.served(s)
            if mail is not None:
                req = self._check(s, mail, superseded)
                if req is not None:
                    reqs.append(req)
        if not reqs:
            return
        self.in_flight += len(reqs)
        try:
            batch: list[Request] = []
            alone: list[Request] = []
            for r in reqs:
                (batch if len(reqs) > 1 and self._batchable(r) else alone).append(r)
            if len(batch) == 1:
                alone.insert(0, batch.pop())
            if batch:
                self._run(batch)
            for r in alone:
                self._run([r])
        finally:
            self.in_flight -= len(reqs)

    def _batchable(self, r: Request) -> bool:
        return bool(self.backend.can_batch(r.s.state, r.obs, r.s.rtc))

    def _check(self, s: Session, mail: Mail, superseded: int) -> Request | None:
        """Header, schema, size, decode, policy contract, episode bookkeeping; refusals go to that robot only."""
        t0 = time.perf_counter()
        self._apply_pending_reset(s)
        try:
            header = Header.unpack(mail.attachment, expect=MsgType.OBS)
        except WireError as exc:
            self._refuse(s, exc.reason, f"bad observation header: {exc}", None)
            return None
        if header.schema_version != s.schema_version:
            self._refuse(
                s,
                Reason.SCHEMA_MISMATCH,
                f"header.schema_version: {header.schema_version}, but this session speaks {s.schema_version}",
                header,
            )
            return None
        size = mail.size or len(mail.payload)
        max_bytes = self.limits.max_payload_bytes
        if size > max_bytes:
            self._refuse(s, Reason.OVERSIZE, f"observation of {size} bytes exceeds the limit {max_bytes}", header)
            return None
        try:
            obs = take_decoded(mail, self.decode)
            self.backend.validate_obs(obs)
        except WireError as exc:
            self._refuse(s, exc.reason, f"bad observation: {exc}", header)
            return None
        except ObsContractError as exc:
            self._refuse(s, Reason.CONTRACT, f"observation does not fit the policy: {exc}", header)
            return None
        if header.episode_id != s.episode_id and (obs.episode_start or header.episode_id > s.episode_id):
            self.backend.reset_session(s.state)
            s.episode_id = header.episode_id
        self.load.add_busy(time.perf_counter() - t0)
        return Request(s, header, obs, superseded, mail.t_arrival, t0, mail if self.capture is not None else None)

    def _apply_pending_reset(self, s: Session) -> None:
        ep = s.pending_reset
        if ep is not None:
            s.pending_reset = None
            self.backend.reset_session(s.state)
            s.episode_id = ep

    def _refuse(self, s: Session, reason: Reason, message: str, header: Header | None) -> None:
        s.errors += 1
        self.metrics.errors.labels(reason.value).inc()
        s.send_event(EventKind.BAD_REQUEST, message, header)
        self.auditor.emit(audit_line(s, header, "bad_request", self.replica, error=message))

    # ------------------------------------------------------------------ model
    def _run(self, group: list[Request]) -> None:
        """One forward pass for `group`; a failed batched pass is retried per robot so one bad input harms no other."""
        t1 = time.perf_counter()
        try:
            if len(group) == 1:
                r = group[0]
                results = [self.backend.infer(r.s.state, r.obs, r.s.rtc)]
            else:
                results = self.backend.infer_batch([(r.s.state, r.obs, r.s.rtc) for r in group])
        except Exception as exc:  # a model error is reported to the robot(s), never kills the worker
            if len(group) > 1:
                log.warning(
                    "batched pass of %d failed (%s: %s); serving each robot alone", len(group), type(exc).__name__, exc
                )
                for r in group:
                    self._run([r])
                return
            self._fail(group[0], exc)
            return
        pass_s = time.perf_counter() - t1
        self.load.add_busy(pass_s)
        self.stats.add(len(group), pass_s)
        m = self.metrics
        m.batch_size.observe(len(group))
        m.batch_inference.observe(pass_s)
        # Only the last chunk through the router goes express: it flushes the ones queued before it in one write.
        flush = max((i for i, r in enumerate(group) if not r.s.via_direct), default=-1)
        for i, (r, (chunk_model, chunk_robot)) in enumerate(zip(group, results, strict=True)):
            self._publish(r, chunk_model, chunk_robot, pass_s, len(group), i < flush)
        m.observe_n(m.inference, pass_s, len(group))  # every robot of the pass waited the same: one bucket lookup

    def _fail(self, r: Request, exc: Exception) -> None:
        s = r.s
        log.exception("inference failed for %s", s.client_uuid)
        s.errors += 1
        self.metrics.errors.labels(Reason.INFERENCE_ERROR.value).inc()
        s.send_event(EventKind.ERROR, f"inference failed: {type(exc).__name__}: {exc}", r.header)
        self.auditor.emit(
            audit_line(
                s,
                r.header,
                "error",
                self.replica,
                queue_wait_s=r.t_start - r.t_arrival,
                superseded=r.superseded,
                error=str(exc),
            )
        )
