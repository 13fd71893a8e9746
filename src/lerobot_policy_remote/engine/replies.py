"""The engine's replies: events (draining, unknown session, per-request errors) and action chunks, checked and
merged into the queue. A mixin of `RemoteInferenceEngine` (engine/remote.py keeps the worker loop); reading and
checking a message is pure (`engine/validate.py`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING

import torch

from ..wire.codes import EventKind
from ..wire.header import Header
from ..wire.messages import EventMsg
from ..wire.text import printable
from .provenance import Provenance
from .validate import InboundError, answers, read_chunk, read_inbound

if TYPE_CHECKING:
    from .parts import EngineParts

# the engine's log lines keep one logger name wherever the code lives (users and tests filter on it)
logger = logging.getLogger(__package__ + ".remote")
# One line per merged chunk (INFO with --inference.log_every_chunk, else DEBUG): the round trip split into server
# queue wait, inference and network (network = RTT - queue_wait - inference, design section 11), joinable with the
# server's audit line.
chunk_logger = logging.getLogger("lerobot.remote.chunks")


class Replies:
    """Reply-handling methods of `RemoteInferenceEngine`, called by its worker for each inbound message."""

    def _on_inbound(self: EngineParts, payload: bytes, attachment: bytes | None, now: float) -> None:
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

    def _handle_event(self: EngineParts, ev: EventMsg, header: Header, now: float) -> None:
        self.counters[f"event_{ev.event}"] += 1
        if ev.event == EventKind.UNKNOWN_SESSION:
            if header.session_epoch == self.session_epoch:
                self._lose_link(now, "server does not know this session (it restarted?)")
                self.reconnect.retry_now(now)
        elif ev.event == EventKind.DRAINING:
            if ev.session_id != self.session_id:  # only our own replica knows our session id
                self.counters["foreign_event"] += 1
                logger.warning(
                    "Ignored a draining event for session %s (ours is %s)",
                    printable(ev.session_id, 40),
                    self.session_id,
                )
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

    def _handle_chunk(self: EngineParts, payload: bytes, header: Header, now: float) -> None:
        out = self.requests.awaited()  # in flight, or the latest one after its timeout (a late reply to it is merged)
        if out is None or not answers(header, out, self.session_epoch, self.episode_id):
            self.counters["late_dropped"] += 1
            return
        if header.schema_version != self.session.schema_version:
            self.counters["schema_mismatch"] += 1
            logger.warning(
                "Refused a chunk for seq=%d: schema version %d, this session negotiated %d (upgrade the older side)",
                header.seq_id,
                header.schema_version,
                self.session.schema_version,
            )
            if out is self.requests.current:
                self.requests.fail("bad_chunk")
            return
        late = out is not self.requests.current
        msg, problem, foreign = read_chunk(
            payload, session_id=self.session_id, action_dim=len(self.action_names), outstanding=out
        )
        if foreign:
            self.counters["foreign_session"] += 1
            logger.error(
                "Refused a chunk for seq=%d: %s; the server no longer holds this session: re-handshaking",
                out.seq_id,
                printable(problem, 300),
            )
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
        meta = Provenance(self.session_id, out.seq_id, out.episode_id, self.replica, fingerprint=self.fingerprint)
        with self._reset_lock:
            if self.episode_id != out.episode_id:
                return
            robot = torch.from_numpy(msg.chunk_robot.copy())
            # a chunk sent in robot space only has one array: the queue's two tensors share its one copy
            model = robot if msg.chunk_model is msg.chunk_robot else torch.from_numpy(msg.chunk_model.copy())
            trimmed = self.queue.merge_stamped(
                model,
                robot,
                new_delay,
                out.idx_before,
                out.t_obs,
                meta,
                replace=self.requests.session_fresh,
            )
        self.requests.succeed()
        self.latency.add(rtt)
        self.rtt.add(rtt * 1000.0)
        network_ms = self.timings.add(rtt * 1000.0, msg.queue_wait_ms, msg.inference_ms)
        self.counters["chunks"] += 1
        self.counters["late_merged"] += late
        self.counters["superseded"] += msg.superseded_seqs
        self.states.on_merge(time.monotonic())
        level = logging.INFO if self.cfg.log_every_chunk else logging.DEBUG
        if not chunk_logger.isEnabledFor(level):
            return  # the line's arguments cost a queue lock and a tensor length per chunk: only when it is kept
        chunk_logger.log(
            level,
            "chunk session_id=%s seq_id=%d episode_id=%d replica=%s rtt=%.1fms queue_wait=%.1fms inference=%.1fms "
            "network=%.1fms delay=%d trimmed=%d queue=%d%s",
            printable(self.session_id, 80),
            out.seq_id,
            out.episode_id,
            self.replica,
            rtt * 1000,
            msg.queue_wait_ms,
            msg.inference_ms,
            network_ms,
            new_delay,
            trimmed,
            self.queue.qsize(),
            " late" if late else "",
        )
