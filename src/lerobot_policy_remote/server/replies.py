"""The worker's replies: a checked request (`Request`) and what answering it publishes: the chunk to its robot, the
audit line, the debug capture. A mixin of `Worker` (server/worker.py keeps the loop, the checks and the pass).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any

from numpy.typing import NDArray

from ..wire.data import ActionChunkMsg, ObservationMsg, encode_chunk, float16_fits
from ..wire.errors import Reason
from ..wire.header import Header, MsgType
from .audit import Auditor, DebugCapture, audit_line
from .backend_base import Backend
from .load import LoadGauge
from .metrics import ServerMetrics
from .sessions import Mail, Session

log = logging.getLogger("lerobot.policy_server")


@dataclass
class Request:
    """One checked observation, ready for the model."""

    s: Session
    header: Header
    obs: ObservationMsg
    superseded: int
    t_arrival: float
    t_start: float
    mail: Mail | None = None  # the wire bytes, kept for the debug capture


class Replying:
    """Publishing methods of `Worker`, called once per request of a pass; typed by the members it reads."""

    load: LoadGauge
    metrics: ServerMetrics
    auditor: Auditor
    replica: str
    capture: DebugCapture | None
    backend: Backend

    def _publish(
        self,
        r: Request,
        chunk_model: NDArray[Any],
        chunk_robot: NDArray[Any],
        infer_s: float,
        batch: int = 1,
        queued: bool = False,
    ) -> None:
        """`queued`: a later express chunk of this pass flushes this one (Session.out_batched)."""
        s, h = r.s, r.header
        queue_wait = r.t_start - r.t_arrival
        msg = ActionChunkMsg(
            chunk_model,
            chunk_robot,
            s.session_id,
            h.seq_id,
            h.client_mono_ns,
            queue_wait * 1e3,
            infer_s * 1e3,
            r.superseded,
            self.load.value,
        )
        reply = Header(s.schema_version, MsgType.CHUNK, h.seq_id, h.episode_id, h.client_mono_ns, h.session_epoch)
        dtype = (
            "float16"
            if s.reply_dtype == "float16"
            and float16_fits(chunk_robot, s.reply_max_error)
            and (not s.reply_model_space or float16_fits(chunk_model, s.reply_max_error))
            else "float32"
        )
        payload, attachment = encode_chunk(msg, dtype=dtype, model_space=s.reply_model_space), reply.pack()
        # Counted before the put: a robot that has its chunk must find it counted (status, metrics).
        s.requests += 1
        self.metrics.count_request(s.client_uuid)
        try:
            (s.out_batched() if queued else s.out).put(payload, attachment=attachment)
            outcome = "ok"
        except Exception as exc:
            outcome = "publish_failed"
            self.metrics.errors.labels(Reason.PUBLISH_FAILED.value).inc()
            log.warning("chunk publish to %s failed: %s", s.client_uuid, exc)
        self.metrics.queue_wait.observe(queue_wait)
        self.auditor.emit(
            audit_line(
                s,
                h,
                outcome,
                self.replica,
                queue_wait_s=queue_wait,
                infer_s=infer_s,
                chunk_len=int(chunk_robot.shape[0]),
                superseded=r.superseded,
            )
        )
        if self.capture is not None and r.mail is not None:
            self._capture(r, chunk_model, chunk_robot, payload, attachment, queue_wait, infer_s, batch)

    def _capture(
        self,
        r: Request,
        chunk_model: NDArray[Any],
        chunk_robot: NDArray[Any],
        payload: bytes,
        attachment: bytes,
        queue_wait: float,
        infer_s: float,
        batch: int,
    ) -> None:
        """The request and the reply as they crossed the wire, plus what replaying them needs (DebugCapture)."""
        s, h, cap, info = r.s, r.header, self.capture, self.backend.model_info
        assert cap is not None and r.mail is not None
        tensors = {
            "obs_payload": cap.wire(r.mail.payload),
            "obs_header": cap.wire(r.mail.attachment),
            "chunk_payload": cap.wire(payload),
            "chunk_header": cap.wire(attachment),
            "chunk_model": chunk_model,
            "chunk_robot": chunk_robot,
        }
        meta = {
            "client_uuid": s.client_uuid,
            "session_id": s.session_id,
            "seq_id": str(h.seq_id),
            "episode_id": str(h.episode_id),
            "schema_version": str(s.schema_version),
            "rtc": json.dumps(dataclasses.asdict(s.rtc)) if s.rtc else "null",
            "task": r.obs.task,
            "replica": self.replica,
            "policy_type": info.policy_type,
            "fingerprint": info.fingerprint,
            "dtype": info.dtype,
            "device": info.device,
            "batch_size": str(batch),
            "queue_wait_ms": f"{queue_wait * 1e3:.3f}",
            "inference_ms": f"{infer_s * 1e3:.3f}",
            "superseded": str(r.superseded),
        }
        cap.submit(f"{s.client_uuid}-{h.episode_id}-{h.seq_id}", tensors, meta)
