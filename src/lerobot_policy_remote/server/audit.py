"""One JSON audit line per request (log + Zenoh) and the optional bounded debug capture."""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

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


class Auditor:
    """Logs each line and hands the same JSON to `publish` (a zenoh put, non-blocking)."""

    def __init__(self, publish: Callable[[str], None] | None) -> None:
        self._publish = publish

    def emit(self, line: AuditLine) -> str:
        # The line's fields in declaration order are its JSON (flat leaves and one list of ints): what
        # `wire.codec.encode_json` writes, without its generic walk of the dataclass per request.
        text = json.dumps(vars(line), separators=(",", ":"), allow_nan=False)
        audit_log.info(text)
        if self._publish is not None:
            try:
                self._publish(text)
            except Exception:  # an audit sink must never take the worker down
                logging.getLogger("lerobot.policy_server").exception("audit publish failed")
        return text


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
