"""Data-plane message bodies: the observation (robot -> server) and the action chunk (server -> robot).

They carry arrays, so they have their own encode/decode with stricter checks than the control codec
(sizes, dtypes, finiteness, JPEG dimensions before pixels). This is the only wire module that loads
numpy and the JPEG codec; the console never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .codec import CONTROL_MAX_BYTES, pack, unpack_map
from .errors import WireError
from .images import decode_images, encode_images
from .limits import DEFAULT_LIMITS, WireLimits
from .tensors import decode_tensor, encode_tensor

OBS_MAX_BYTES = DEFAULT_LIMITS.max_payload_bytes


@dataclass
class ObservationMsg:
    """Robot -> server. `state` holds non-image features (canonical policy keys), `images` RGB uint8."""

    state: dict[str, NDArray[Any]]
    images: dict[str, NDArray[Any]]
    task: str = ""
    inference_delay_steps: int = 0
    prefix_model: NDArray[Any] | None = None
    prefix_robot: NDArray[Any] | None = None
    episode_start: bool = False


def encode_observation(msg: ObservationMsg, jpeg_quality: int = 90) -> bytes:
    body: dict[str, Any] = {
        "state": {k: encode_tensor(np.asarray(v, dtype=np.float32)) for k, v in msg.state.items()},
        "images": encode_images(msg.images, jpeg_quality),
        "task": msg.task,
        "inference_delay_steps": int(msg.inference_delay_steps),
        "episode_start": bool(msg.episode_start),
    }
    if msg.prefix_model is not None:
        body["prefix_model"] = encode_tensor(np.asarray(msg.prefix_model, dtype=np.float32))
    if msg.prefix_robot is not None:
        body["prefix_robot"] = encode_tensor(np.asarray(msg.prefix_robot, dtype=np.float32))
    return pack(body)


def decode_observation(
    data: bytes | bytearray | memoryview | None,
    limits: WireLimits = DEFAULT_LIMITS,
    targets: dict[str, tuple[int, int]] | None = None,
) -> ObservationMsg:
    """Validates everything (sizes, dtypes, NaN state, JPEG dims) before decoding pixels.

    `targets`: camera key -> (height, width) the model resizes to; much larger JPEGs are decoded at a DCT
    scale still >= that size (images.decode_image)."""
    targets = targets or {}
    body = unpack_map(data, "ObservationMsg", limits, limits.max_payload_bytes)
    state = _map(body.get("state", {}), "state", limits)
    images = _map(body.get("images", {}), "images", limits)
    task = body.get("task", "")
    if not isinstance(task, str):
        raise WireError("task", "expected a string")
    delay = body.get("inference_delay_steps", 0)
    if type(delay) is not int or not 0 <= delay <= 100_000:
        raise WireError("inference_delay_steps", f"expected a non-negative int, got {delay!r}")
    start = body.get("episode_start", False)
    if type(start) is not bool:
        raise WireError("episode_start", "expected a bool")
    prefixes = {}
    for name in ("prefix_model", "prefix_robot"):
        raw = body.get(name)
        prefixes[name] = None if raw is None else decode_tensor(raw, name, limits, finite=True, dtype="float32", ndim=2)
    return ObservationMsg(
        state={k: decode_tensor(v, f"state.{k}", limits, finite=True, dtype="float32") for k, v in state.items()},
        images=decode_images(images, limits, targets),
        task=task,
        inference_delay_steps=delay,
        episode_start=start,
        **prefixes,
    )


@dataclass
class ActionChunkMsg:
    """Server -> robot. Both spaces when the robot merges with RTC (its prefix is model space); robot space only
    otherwise (negotiated in the session: `SessionAck.reply_model_space`)."""

    chunk_model: NDArray[Any]
    chunk_robot: NDArray[Any]
    session_id: str = ""
    seq_id_echo: int = 0
    client_mono_ns_echo: int = 0
    queue_wait_ms: float = 0.0
    inference_ms: float = 0.0
    superseded_seqs: int = 0
    server_load: float = 0.0


_CHUNK_SCALARS: dict[str, type] = {
    "session_id": str,
    "seq_id_echo": int,
    "client_mono_ns_echo": int,
    "queue_wait_ms": float,
    "inference_ms": float,
    "superseded_seqs": int,
    "server_load": float,
}


REPLY_DTYPES = ("float32", "float16")


def float16_fits(array: NDArray[Any], max_error: float) -> bool:
    """True when `array` survives float16 with every value finite and within `max_error` (absolute).

    One pass, per chunk on the server: a NaN, an infinity or a value past float16's range (which becomes infinite)
    makes the error NaN or infinite, and neither compares <= `max_error`."""
    arr = np.asarray(array, dtype=np.float32)
    if not arr.size:
        return True
    with np.errstate(over="ignore", invalid="ignore"):  # the overflow and the NaN are the answer, not a problem
        err = arr.astype(np.float16).astype(np.float32)
        np.subtract(err, arr, out=err)
    np.abs(err, out=err)
    return bool(err.max() <= max_error)


def encode_chunk(msg: ActionChunkMsg, *, dtype: str = "float32", model_space: bool = True) -> bytes:
    """`dtype` float16 halves the reply (the caller checks `float16_fits`); `model_space=False` leaves out
    `chunk_model` (a robot that merges without RTC executes only `chunk_robot`, docs/wire.md)."""
    if dtype not in REPLY_DTYPES:
        raise ValueError(f"reply dtype must be one of {REPLY_DTYPES}, got {dtype!r}")
    np_dtype = np.float16 if dtype == "float16" else np.float32
    body: dict[str, Any] = {
        "chunk_robot": encode_tensor(np.asarray(msg.chunk_robot, dtype=np.float32).astype(np_dtype))
    }
    if model_space:
        body["chunk_model"] = encode_tensor(np.asarray(msg.chunk_model, dtype=np.float32).astype(np_dtype))
    for name, tp in _CHUNK_SCALARS.items():
        body[name] = tp(getattr(msg, name))
    return pack(body)


def decode_chunk(data: bytes | bytearray | memoryview | None, limits: WireLimits = DEFAULT_LIMITS) -> ActionChunkMsg:
    """Refuses NaN/Inf, wrong dtypes and ragged shapes: a robot never executes such a chunk.

    Tensors may be float16 or float32 (always float32 after decoding, finiteness checked after widening);
    a chunk without `chunk_model` (robot space only) gets `chunk_model = chunk_robot`."""
    body = unpack_map(data, "ActionChunkMsg", limits, CONTROL_MAX_BYTES * 16)
    robot = _chunk_tensor(body.get("chunk_robot"), "chunk_robot", limits)
    model = robot if body.get("chunk_model") is None else _chunk_tensor(body.get("chunk_model"), "chunk_model", limits)
    if model.shape[0] != robot.shape[0] or model.shape[0] == 0:
        raise WireError("chunk_robot.shape", f"chunk lengths differ or are empty: {model.shape} vs {robot.shape}")
    scalars: dict[str, Any] = {}
    for name, tp in _CHUNK_SCALARS.items():
        if name not in body:
            continue
        value = body[name]
        ok = isinstance(value, str) if tp is str else (type(value) is int if tp is int else type(value) in (int, float))
        if not ok:
            raise WireError(name, f"expected {tp.__name__}, got {type(value).__name__}")
        scalars[name] = tp(value)
    return ActionChunkMsg(chunk_model=model, chunk_robot=robot, **scalars)


def _chunk_tensor(value: Any, name: str, limits: WireLimits) -> NDArray[Any]:
    dtype = value.get("dtype") if isinstance(value, dict) else None
    want = dtype if dtype in REPLY_DTYPES else "float32"
    arr = decode_tensor(value, name, limits, finite=True, dtype=want, ndim=2)
    return arr if arr.dtype == np.float32 else arr.astype(np.float32)


def _map(value: Any, field_name: str, limits: WireLimits) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > 64:
        raise WireError(field_name, "expected a map of at most 64 entries")
    for k in value:
        if not isinstance(k, str) or not k or len(k) > 256:
            raise WireError(field_name, f"bad feature name {k!r}")
    return value
