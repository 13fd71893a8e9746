"""One JSON audit line per request (log + Zenoh) and the optional bounded debug capture."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..wire.codec import encode_json
from ..wire.header import Header
from ..wire.messages import AuditLine
from .sessions import Session

audit_log = logging.getLogger("lerobot.policy_server.audit")


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def audit_line(s: Session, header: Header | None, outcome: str, replica: str, *, queue_wait_s: float = 0.0,
               infer_s: float = 0.0, chunk_len: int = 0, superseded: int = 0, error: str = "") -> AuditLine:
    """The one builder of an audit line: ids from the request header (or the session before one was read)."""
    return AuditLine(
        ts=now_iso(), session_id=s.session_id, client_uuid=s.client_uuid,
        seq_id=header.seq_id if header else 0, episode_id=header.episode_id if header else s.episode_id,
        queue_wait_ms=round(queue_wait_s * 1e3, 3), inference_ms=round(infer_s * 1e3, 3),
        chunk_range=[0, chunk_len] if chunk_len else [], superseded=superseded, outcome=outcome, replica=replica,
        error=error[:300],
    )


class Auditor:
    """Logs each line and hands the same JSON to `publish` (a zenoh put, non-blocking)."""

    def __init__(self, publish: Callable[[str], None] | None) -> None:
        self._publish = publish

    def emit(self, line: AuditLine) -> str:
        text = encode_json(line)
        text = text.decode() if isinstance(text, bytes) else text
        audit_log.info(text)
        if self._publish is not None:
            try:
                self._publish(text)
            except Exception:  # an audit sink must never take the worker down
                logging.getLogger("lerobot.policy_server").exception("audit publish failed")
        return text


class DebugCapture:
    """Ring of request/response pairs written as safetensors by its own thread (never the inference thread)."""

    def __init__(self, directory: str, capture_max: int) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max = capture_max
        self._q: queue.Queue[tuple[str, dict[str, np.ndarray], dict[str, str]] | None] = queue.Queue(maxsize=64)
        self._written: list[Path] = []
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="debug-capture", daemon=True)
        self._thread.start()

    def submit(self, name: str, tensors: dict[str, Any], meta: dict[str, str]) -> None:
        try:
            self._q.put_nowait((name, {k: np.ascontiguousarray(v) for k, v in tensors.items()}, meta))
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        from safetensors.numpy import save_file

        while (item := self._q.get()) is not None:
            name, tensors, meta = item
            path = self.dir / f"{name}.safetensors"
            try:
                save_file(tensors, str(path), metadata=meta)
            except Exception:
                logging.getLogger("lerobot.policy_server").exception("debug capture write failed")
                continue
            self._written.append(path)
            while len(self._written) > self.max:
                self._written.pop(0).unlink(missing_ok=True)

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=5)
