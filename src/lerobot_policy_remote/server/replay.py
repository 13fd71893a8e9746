"""`lerobot-policy-server replay DIR`: re-run a debug capture through the same pipeline and compare the chunks.

A capture (`debug.capture_dir`, written by `audit.DebugCapture`) holds each request's wire bytes and header,
the session's settings and the chunk the robot received. Replaying decodes the same bytes, runs the same
backend (`LerobotBackend`: per-session pipelines, RTC prefix, episode resets) and compares the chunk byte for
byte. On the same device and dtype a deterministic policy (ACT; flow/diffusion policies sample noise) gives
identical bytes; a request served inside a batch may differ by float rounding (replay serves it alone).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..wire.data import decode_chunk, decode_observation
from ..wire.header import Header, MsgType
from ..wire.limits import WireLimits
from ..wire.messages import RtcSettings
from .audit import CAPTURE_MANIFEST
from .decode_pool import decode_targets

USAGE = "usage: lerobot-policy-server replay CAPTURE_DIR [--FIELD=VALUE ...] [--verbose]"


@dataclass
class Capture:
    name: str
    meta: dict[str, str]
    tensors: dict[str, NDArray[Any]]


@dataclass
class ReplayReport:
    total: int = 0
    identical: int = 0
    lines: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.total > 0 and self.identical == self.total


def load_captures(directory: Path) -> list[Capture]:
    """The ring's files in capture order (their names start with a running number)."""
    from safetensors import safe_open

    out = []
    for path in sorted(directory.glob("*.safetensors")):
        with safe_open(str(path), framework="numpy") as f:
            out.append(Capture(path.stem, dict(f.metadata() or {}), {k: f.get_tensor(k) for k in f.keys()}))
    return out


def _max_diff(a: NDArray[Any], b: NDArray[Any]) -> str:
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    return f"max |d| {float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0:.3g}"


def replay(
    backend: Any, captures: list[Capture], limits: WireLimits, out: Callable[[str], None] = print
) -> ReplayReport:
    """Serve every captured request again, in capture order, with one pipeline state per captured session."""
    report = ReplayReport()
    sessions: dict[str, tuple[Any, int]] = {}  # session_id -> (state, episode_id)
    warned_fp = False
    for cap in captures:
        meta, t = cap.meta, cap.tensors
        if not warned_fp and meta.get("fingerprint") and meta["fingerprint"] != backend.model_info.fingerprint:
            out(
                f"WARNING: the checkpoint changed since the capture (fingerprint {meta['fingerprint'][:16]} captured, "
                f"{backend.model_info.fingerprint[:16]} loaded): chunks will differ"
            )
            warned_fp = True
        header = Header.unpack(t["obs_header"].tobytes(), expect=MsgType.OBS)
        obs = decode_observation(t["obs_payload"].tobytes(), limits, decode_targets(backend))  # as the worker decoded
        sid = meta.get("session_id", "")
        if sid not in sessions:
            state = backend.new_session_state()
            backend.on_session_open(state)
            sessions[sid] = (state, 0)
        state, episode = sessions[sid]
        if header.episode_id != episode and (obs.episode_start or header.episode_id > episode):
            backend.reset_session(state)  # the worker's rule for a new episode
            sessions[sid] = (state, header.episode_id)
        rtc_json = meta.get("rtc", "null")
        rtc = RtcSettings(**json.loads(rtc_json)) if rtc_json not in ("", "null") else None
        chunk_model, chunk_robot = backend.infer(state, obs, rtc)
        sent = decode_chunk(t["chunk_payload"].tobytes())
        if "chunk_model" in t and "chunk_robot" in t:  # the float32 arrays before the reply's dtype/space
            sent.chunk_model, sent.chunk_robot = np.asarray(t["chunk_model"]), np.asarray(t["chunk_robot"])
        same = all(
            a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            for a, b in ((chunk_model, sent.chunk_model), (chunk_robot, sent.chunk_robot))
        )
        report.total += 1
        report.identical += same
        where = f"{cap.name}: robot {meta.get('client_uuid', '?')} episode {header.episode_id} seq {header.seq_id}"
        if same:
            line = f"{where}: identical"
        else:
            batch = int(meta.get("batch_size", "1") or 1)
            note = f" (captured in a batch of {batch}; replay serves it alone: float rounding)" if batch > 1 else ""
            line = (
                f"{where}: DIFFERS robot-space {_max_diff(chunk_robot, sent.chunk_robot)}, "
                f"model-space {_max_diff(chunk_model, sent.chunk_model)}{note}"
            )
        report.lines.append(line)
        out(line)
    return report


def main(args: list[str]) -> int:
    from .manifest_args import parse_manifest
    from .startup_errors import explain, verbose_requested

    verbose, args = verbose_requested(args)
    if not args or args[0].startswith("-"):
        print(
            f"{USAGE}\nlerobot-policy-server: error: give the capture directory (the manifest's debug.capture_dir)",
            file=sys.stderr,
        )
        return 2
    directory, overrides = Path(args[0]), args[1:]
    manifest_path = directory / CAPTURE_MANIFEST
    if not manifest_path.is_file():
        print(
            f"lerobot-policy-server: error: {directory} holds no {CAPTURE_MANIFEST}: "
            "it is not a debug.capture_dir written by "
            "this version (start the server with --debug.capture_dir=DIR, let robots run, then replay DIR)",
            file=sys.stderr,
        )
        return 2
    captures = load_captures(directory)
    if not captures:
        print(
            f"lerobot-policy-server: error: {directory} holds no captures (*.safetensors): no request was served while "
            "debug.capture_dir was set",
            file=sys.stderr,
        )
        return 2
    try:
        manifest = parse_manifest(["--manifest", str(manifest_path), *overrides])
        manifest.debug.capture_dir = None
        manifest.validate()
        from .backend import LerobotBackend

        backend = LerobotBackend(manifest, progress=lambda text: print(text, flush=True))
    except SystemExit as exc:
        return int(exc.code or 2)
    except Exception as exc:
        if verbose:
            import traceback

            traceback.print_exception(exc)
        print(f"lerobot-policy-server: error: {explain(exc, None, str(manifest_path))}", file=sys.stderr, flush=True)
        return 2
    print(
        f"Replaying {len(captures)} captures from {directory} on {backend.model_info.device} "
        f"({backend.model_info.dtype}, fingerprint {backend.model_info.fingerprint[:16]})",
        flush=True,
    )
    limits = WireLimits(max_payload_bytes=manifest.max_obs_bytes)
    reports: list[ReplayReport] = []

    def serve() -> None:  # on a serving thread with the worker's torch threads, as the server computed them
        backend.bind_serving_thread()
        reports.append(replay(backend, captures, limits, lambda s: print(s, flush=True)))

    t = threading.Thread(target=serve, name="replay-worker")
    t.start()
    t.join()
    if not reports:
        print("lerobot-policy-server: error: the replay stopped on an error (see above)", file=sys.stderr, flush=True)
        return 1
    report = reports[0]
    print(
        f"Replayed {report.total} captures: {report.identical} byte-identical, "
        f"{report.total - report.identical} differ",
        flush=True,
    )
    return 0 if report.ok else 1
