"""Camera frames on the wire: JPEG (quality setting) or raw, always RGB order, 1 or 3 channels uint8.

A JPEG's dimensions are read from its frame header (SOF marker) and checked against the declared
shape and the limits *before* it is decoded, so a small file claiming a huge image is refused.

The JPEG codec is libjpeg-turbo through simplejpeg (a self-contained wheel): it encodes and decodes RGB
directly (no colour-conversion pass, no BGR scratch) and is faster than cv2 on both sides (`bench/codec.py`),
and it can decode straight to 1/2, 1/4 or 1/8 scale in the DCT domain when the model eats a much smaller
image than the camera sends (`target`), which skips most of the inverse DCT and the later resize.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import simplejpeg
from numpy.typing import NDArray

from .errors import Reason, WireError
from .limits import DEFAULT_LIMITS, WireLimits

CODECS = ("jpeg", "raw")
# Start-of-frame markers carrying the image size (C4 DHT, C8 JPG, CC DAC are not frames).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_MAX_SEGMENTS = 256
DCT_SCALE_MIN = 2  # decode at reduced scale only when the frame is at least this many times the target per side
# The cameras of one observation are encoded (robot) and decoded (server) at the same time when there are several and
# they are large: libjpeg-turbo runs without the GIL, so two 640x480 frames took 0.71 ms instead of 1.21 to encode and
# 0.85 instead of 1.32 to decode on a 2-core box. Small frames go one after another (a thread hop costs more).
PARALLEL_MIN_PIXELS = 100_000
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
K = TypeVar("K")
V = TypeVar("V")


def _codec_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(2, min(4, os.cpu_count() or 2)), thread_name_prefix="jpeg")
        return _pool


def each_frame(items: Mapping[K, Any], fn: Callable[[K, Any], V], parallel: bool) -> dict[K, V]:
    """`fn` over every item, in key order; when `parallel`, the first on this thread while the codec pool does the rest.

    The pool's items are submitted first and the first one runs here meanwhile: a thread hop costs about 0.1 ms on
    a 2-core box (a pool thread's wake-up), so this way no frame waits for one. The first error (in key order) is
    raised. Public: the one place where `encode_images`/`decode_images` hand over their parallel decision (tests
    watch it)."""
    if not parallel or len(items) < 2:
        return {k: fn(k, v) for k, v in items.items()}
    pool = _codec_pool()
    keys = list(items)
    futures = {k: pool.submit(fn, k, items[k]) for k in keys[1:]}
    try:
        first = fn(keys[0], items[keys[0]])
    except BaseException:
        for f in futures.values():
            f.cancel()
        raise
    return {keys[0]: first, **{k: f.result() for k, f in futures.items()}}


def encode_images(images: Mapping[str, NDArray[Any]], quality: int = 90) -> dict[str, dict[str, Any]]:
    """Every camera of one observation, as `encode_image` does one; large JPEG frames at the same time."""

    def pixels(v: NDArray[Any]) -> int:
        shape = np.shape(v)
        return shape[0] * shape[1] if len(shape) >= 2 else 0

    big = quality > 0 and sum(pixels(v) >= PARALLEL_MIN_PIXELS for v in images.values()) >= 2
    return each_frame(images, lambda _k, v: encode_image(v, quality), big)


def decode_images(
    values: Mapping[str, Any], limits: WireLimits = DEFAULT_LIMITS, targets: Mapping[str, tuple[int, int]] | None = None
) -> dict[str, NDArray[Any]]:
    """Every camera of one observation (`images.<key>` in errors), as `decode_image` does one; large JPEGs at once."""
    targets = targets or {}

    def big(v: Any) -> bool:
        shape = v.get("shape") if isinstance(v, dict) else None
        return (
            isinstance(v, dict)
            and v.get("codec") == "jpeg"
            and isinstance(shape, list)
            and len(shape) == 3
            and all(type(d) is int for d in shape)
            and shape[0] * shape[1] >= PARALLEL_MIN_PIXELS
        )

    parallel = sum(big(v) for v in values.values()) >= 2
    return each_frame(values, lambda k, v: decode_image(v, f"images.{k}", limits, targets.get(k)), parallel)


def encode_image(rgb: NDArray[Any], quality: int = 90) -> dict[str, Any]:
    """HxW, HxWx1 or HxWx3 uint8 RGB -> wire dict. `quality` 0 sends raw bytes."""
    img = np.asarray(rgb)
    if img.dtype != np.uint8:
        raise WireError("image", f"expected uint8 pixels, got {img.dtype}")
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3):
        raise WireError("image", f"expected HxWx1 or HxWx3, got shape {tuple(img.shape)}", Reason.BAD_SHAPE)
    h, w, c = (int(x) for x in img.shape)
    if quality <= 0:  # a view, not a copy: msgpack copies it once into the message (a 640x480 frame is 0.9 MB)
        return {"codec": "raw", "shape": [h, w, c], "data": memoryview(np.ascontiguousarray(img)).cast("B")}
    try:  # 4:2:0 chroma, as cv2 wrote: the same bytes on the wire for the same quality
        buf = simplejpeg.encode_jpeg(
            np.ascontiguousarray(img),
            quality=int(min(quality, 100)),
            colorspace="GRAY" if c == 1 else "RGB",
            colorsubsampling="420",
        )
    except (ValueError, RuntimeError) as exc:
        raise WireError("image", f"JPEG encoding failed: {exc}") from exc
    return {"codec": "jpeg", "shape": [h, w, c], "data": buf}


def decode_image(
    value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS, target: tuple[int, int] | None = None
) -> NDArray[Any]:
    """Wire dict -> HxWxC uint8 RGB array.

    `target` (height, width): the size the model will resize this frame to. When the JPEG is at least
    DCT_SCALE_MIN times larger per side it is decoded at the smallest DCT scale that is still >= target
    (the caller's resize does the rest); raw frames and small JPEGs come back at full size.
    """
    if not isinstance(value, dict):
        raise WireError(field, f"expected an image map, got {type(value).__name__}")
    codec, shape, data = value.get("codec"), value.get("shape"), value.get("data")
    if codec not in CODECS:
        raise WireError(f"{field}.codec", f"{codec!r} is not one of {CODECS}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"{field}.data", "expected bytes")
    h, w, c = _check_shape(shape, field, limits)
    if codec == "raw":
        if len(data) != h * w * c:
            raise WireError(
                f"{field}.data", f"raw {h}x{w}x{c} needs {h * w * c} bytes, got {len(data)}", Reason.BAD_SHAPE
            )
        return np.frombuffer(data, dtype=np.uint8).reshape(h, w, c)
    _check_jpeg_header(data, (h, w, c), field)
    th, tw = target if target is not None else (0, 0)
    scaled = target is not None and h >= DCT_SCALE_MIN * th and w >= DCT_SCALE_MIN * tw
    try:
        decoded: NDArray[Any] = simplejpeg.decode_jpeg(
            bytes(data),
            colorspace="GRAY" if c == 1 else "RGB",
            min_height=th if scaled else 0,
            min_width=tw if scaled else 0,
        )
    except (ValueError, RuntimeError) as exc:
        raise WireError(f"{field}.data", f"JPEG data is corrupt: {exc}") from exc
    dh, dw = decoded.shape[:2]
    if not (scaled and target is not None and target[0] <= dh <= h and target[1] <= dw <= w) and (dh, dw) != (h, w):
        raise WireError(f"{field}.data", "JPEG data is corrupt")
    return decoded.reshape(dh, dw, c)


def _check_shape(shape: Any, field: str, limits: WireLimits) -> tuple[int, int, int]:
    if not isinstance(shape, list) or len(shape) != 3 or any(type(d) is not int for d in shape):
        raise WireError(f"{field}.shape", f"expected [height, width, channels], got {shape!r}", Reason.BAD_SHAPE)
    h, w, c = shape
    if c not in (1, 3):
        raise WireError(f"{field}.shape", f"channels must be 1 or 3, got {c}", Reason.BAD_SHAPE)
    if not (0 < h <= limits.max_image_side and 0 < w <= limits.max_image_side) or h * w > limits.max_image_pixels:
        raise WireError(
            f"{field}.shape", f"{h}x{w} is outside the limits ({limits.max_image_side} per side)", Reason.BAD_SHAPE
        )
    return h, w, c


def jpeg_frame_size(data: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """(height, width, components) from the first SOF segment; None if there is none."""
    n = len(data)
    if n < 4 or data[0] != 0xFF or data[1] != 0xD8:
        return None
    pos = 2
    for _ in range(_MAX_SEGMENTS):
        while pos < n and data[pos] == 0xFF and pos + 1 < n and data[pos + 1] == 0xFF:
            pos += 1  # fill bytes
        if pos + 4 > n or data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        length = (data[pos + 2] << 8) | data[pos + 3]
        if marker in _SOF:
            if pos + 10 > n or length < 8:
                return None
            height = (data[pos + 5] << 8) | data[pos + 6]
            width = (data[pos + 7] << 8) | data[pos + 8]
            return height, width, data[pos + 9]
        if marker == 0xDA or length < 2:  # start of scan before any frame header, or a broken length
            return None
        pos += 2 + length
    return None


def _check_jpeg_header(data: bytes | bytearray | memoryview, expected: tuple[int, int, int], field: str) -> None:
    got = jpeg_frame_size(data)
    if got is None:
        raise WireError(f"{field}.data", "not a readable JPEG (no frame header)")
    if got != expected:
        raise WireError(
            f"{field}.data",
            f"JPEG header says {got[0]}x{got[1]}x{got[2]} but the message declared {expected}",
            Reason.BAD_SHAPE,
        )
