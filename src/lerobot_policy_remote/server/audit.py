"""One JSON audit line per request (logged at once, published on Zenoh in batches) and the optional debug capture."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.codec import join_audit_lines
from ..wire.header import Header
from ..wire.messages import AuditLine
from .sessions import Session

audit_log = logging.getLogger("lerobot.policy_server.audit")

AUDIT_LOG_DEFAULT = "stderr"


def configure_audit_log(target: str) -> str:
    """Where the process keeps its audit lines (they always go to Zenoh too); returns the words for the start line.

    `off`: Zenoh only; `stderr` (default): the process log, one `... lerobot.policy_server.audit: {json}` line
    per request; any other value is a file path, appended with one bare JSON object per line (jq-friendly).
    """
    for h in list(audit_log.handlers):
        audit_log.removeHandler(h)
        h.close()
    if target == "off":
        audit_log.setLevel(logging.WARNING)
        audit_log.propagate = True
        return "audit=zenoh-only"
    audit_log.setLevel(logging.INFO)
    if target == "stderr":
        audit_log.propagate = True
        return "audit=stderr"
    path = Path(target).expanduser()
    if path.is_dir():
        raise ValueError(f"--audit_log={target} is a directory: give a file path, 'stderr' or 'off'")
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    audit_log.addHandler(handler)
    audit_log.propagate = False
    return f"audit={path}"


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def audit_line(
    s: Session,
    header: Header | None,
    outcome: str,
    replica: str,
    *,
    queue_wait_s: float = 0.0,
    infer_s: float = 0.0,
    chunk_len: int = 0,
    superseded: int = 0,
    error: str = "",
) -> AuditLine:
    """The one builder of an audit line: ids from the request header (or the session before one was read)."""
    return AuditLine(
        ts=now_iso(),
        session_id=s.session_id,
        client_uuid=s.client_uuid,
        seq_id=header.seq_id if header else 0,
        episode_id=header.episode_id if header else s.episode_id,
        queue_wait_ms=round(queue_wait_s * 1e3, 3),
        inference_ms=round(infer_s * 1e3, 3),
        chunk_range=[0, chunk_len] if chunk_len else [],
        superseded=superseded,
        outcome=outcome,
        replica=replica,
        error=error[:300],
    )


AUDIT_FLUSH_S = 0.1  # a line waits at most this long for its publication ...
AUDIT_MAX_LINES = 64  # ... or until this many wait, whichever comes first


class Auditor:
    """Logs each line at once; publishes the lines in batches, one payload of newline-joined JSON lines.

    One publication per request was about 1,000 messages a second through the routers of a 1,000-robot fleet
    (docs/decisions.md "Audit lines travel in batches"): a batch leaves when its oldest line is `flush_s` old or
    `max_lines` wait. The emitter publishes a full batch itself; a daemon flusher publishes one that is due, so a line
    never waits for the next request. Publications are serialized (`_send_lock`): payloads leave in the order of their
    lines. `close()` publishes what is left (the server calls it before its zenoh session closes); lines after it
    leave one by one.
    """

    def __init__(
        self,
        publish: Callable[[str], None] | None,
        *,
        flush_s: float = AUDIT_FLUSH_S,
        max_lines: int = AUDIT_MAX_LINES,
    ) -> None:
        self._publish = publish
        self.flush_s = flush_s
        self.max_lines = max(1, max_lines)
        self._lines: list[str] = []
        self._oldest = 0.0  # monotonic time the oldest buffered line was written
        self._lock = threading.Lock()  # guards the buffer, `_oldest`, `_closed` and `_thread`
        self._send_lock = threading.Lock()  # one publication at a time (taken before `_lock`): batches leave in order
        self._due = threading.Event()  # the buffer got its first line, or close(): the flusher recomputes its wait
        self._closed = False
        self._thread: threading.Thread | None = None  # started with the first buffered line

    def emit(self, line: AuditLine) -> str:
        # The line's fields in declaration order are its JSON (flat leaves and one list of ints): what
        # `wire.codec.encode_json` writes, without its generic walk of the dataclass per request.
        text = json.dumps(vars(line), separators=(",", ":"), allow_nan=False)
        audit_log.info(text)
        if self._publish is not None:
            self._buffer(text)
        return text

    def _buffer(self, text: str) -> None:
        with self._lock:
            lines = self._lines
            lines.append(text)
            now = len(lines) >= self.max_lines or self.flush_s <= 0 or self._closed
            if not now and len(lines) == 1:
                self._oldest = time.monotonic()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="audit-flusher", daemon=True)
                    self._thread.start()
                self._due.set()
        if now:
            self.flush()

    def flush(self) -> None:
        """Publish what is buffered now, as one payload (any thread)."""
        with self._send_lock:
            with self._lock:
                lines, self._lines = self._lines, []
            if not lines or self._publish is None:
                return
            try:
                self._publish(join_audit_lines(lines))
            except Exception:  # an audit sink must never take the worker (or the flusher) down
                logging.getLogger("lerobot.policy_server").exception("audit publish failed")

    def _run(self) -> None:
        """The flusher: sleeps until the oldest buffered line is `flush_s` old, and without a timeout while none
        waits (an idle replica costs no wake-ups)."""
        while True:
            with self._lock:
                if self._closed:
                    return
                self._due.clear()  # under the lock: a first line buffered after this read sets it again
                wait = self._oldest + self.flush_s - time.monotonic() if self._lines else None
            if wait is not None and wait <= 0:
                self.flush()
            else:
                self._due.wait(wait)

    def close(self) -> None:
        """Publish what is buffered and end the flusher (idempotent); a later line is published at once."""
        with self._lock:
            self._closed = True
            thread = self._thread
            self._due.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self.flush()


CAPTURE_MANIFEST = "manifest.yaml"


class DebugCapture:
    """Ring of request/response pairs written as safetensors by its own thread (never the inference thread).

    Each capture holds what crossed the wire, byte for byte: the observation payload (images as sent, RTC
    prefixes, delay, task) and its 27-byte header, the chunk payload and header; the decoded chunk
    (`chunk_model`, `chunk_robot`) for comparison; and in the metadata the session's settings (RTC, schema
    version), the model (fingerprint, dtype, device) and the timings. The manifest is written once beside
    them, so `lerobot-policy-server replay DIR` needs nothing else.
    """

    def __init__(self, directory: str, capture_max: int, manifest: Any = None) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max = capture_max
        self._q: queue.Queue[tuple[str, dict[str, NDArray[Any]], dict[str, str]] | None] = queue.Queue(maxsize=64)
        self._written: list[Path] = sorted(self.dir.glob("*.safetensors"))  # a restart keeps the ring bounded
        self.dropped = 0
        self._n = len(self._written)
        if manifest is not None:
            import draccus

            with (self.dir / CAPTURE_MANIFEST).open("w") as fh:
                draccus.dump(manifest, fh)
        self._thread = threading.Thread(target=self._run, name="debug-capture", daemon=True)
        self._thread.start()

    def submit(self, name: str, tensors: dict[str, Any], meta: dict[str, str]) -> None:
        self._n += 1
        try:
            self._q.put_nowait(
                (f"{self._n:09d}-{name}", {k: np.ascontiguousarray(v) for k, v in tensors.items()}, meta)
            )
        except queue.Full:
            self.dropped += 1

    @staticmethod
    def wire(data: bytes | None) -> NDArray[Any]:
        """Wire bytes as a uint8 tensor (safetensors stores tensors only)."""
        return np.frombuffer(data or b"", dtype=np.uint8).copy()

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
        """Write what is queued, then end the thread (the ring is complete on disk after this)."""
        self._q.put(None)
        self._thread.join(timeout=30)
