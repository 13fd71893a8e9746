"""Camera frames on the wire: JPEG (quality setting) or raw, always RGB order, 1 or 3 channels uint8.

A JPEG's dimensions are read from its header (Pillow's lazy open) and checked against the declared
shape and the limits *before* it is decoded, so a small file claiming a huge image is refused.
"""

from __future__ import annotations

import io
import warnings
from typing import Any

import cv2
import numpy as np
from PIL import Image

from .errors import WireError
from .limits import DEFAULT_LIMITS, WireLimits

CODECS = ("jpeg", "raw")
_PIL_CHANNELS = {"L": 1, "RGB": 3}


def encode_image(rgb: np.ndarray, quality: int = 90) -> dict[str, Any]:
    """HxW, HxWx1 or HxWx3 uint8 RGB -> wire dict. `quality` 0 sends raw bytes."""
    img = np.asarray(rgb)
    if img.dtype != np.uint8:
        raise WireError("image", f"expected uint8 pixels, got {img.dtype}")
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3):
        raise WireError("image", f"expected HxWx1 or HxWx3, got shape {tuple(img.shape)}")
    h, w, c = (int(x) for x in img.shape)
    if quality <= 0:
        return {"codec": "raw", "shape": [h, w, c], "data": np.ascontiguousarray(img).tobytes()}
    src = img[:, :, 0] if c == 1 else cv2.cvtColor(img, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", src, [cv2.IMWRITE_JPEG_QUALITY, int(min(quality, 100))])
    if not ok:
        raise WireError("image", "JPEG encoding failed")
    return {"codec": "jpeg", "shape": [h, w, c], "data": buf.tobytes()}


def decode_image(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> np.ndarray:
    """Wire dict -> HxWxC uint8 RGB array."""
    if not isinstance(value, dict):
        raise WireError(field, f"expected an image map, got {type(value).__name__}")
    codec, shape, data = value.get("codec"), value.get("shape"), value.get("data")
    if codec not in CODECS:
        raise WireError(f"{field}.codec", f"{codec!r} is not one of {CODECS}")
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"{field}.data", "expected bytes")
    h, w, c = _check_shape(shape, field, limits)
    if codec == "raw":
        if len(data) != h * w * c:
            raise WireError(f"{field}.data", f"raw {h}x{w}x{c} needs {h * w * c} bytes, got {len(data)}")
        return np.frombuffer(data, dtype=np.uint8).reshape(h, w, c)
    _check_jpeg_header(data, (h, w, c), field)
    flag = cv2.IMREAD_GRAYSCALE if c == 1 else cv2.IMREAD_COLOR
    decoded = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), flag)
    if decoded is None or decoded.shape[:2] != (h, w):
        raise WireError(f"{field}.data", "JPEG data is corrupt")
    if c == 1:
        return decoded[:, :, None]
    return cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)


def _check_shape(shape: Any, field: str, limits: WireLimits) -> tuple[int, int, int]:
    if not isinstance(shape, list) or len(shape) != 3 or any(type(d) is not int for d in shape):
        raise WireError(f"{field}.shape", f"expected [height, width, channels], got {shape!r}")
    h, w, c = shape
    if c not in (1, 3):
        raise WireError(f"{field}.shape", f"channels must be 1 or 3, got {c}")
    if not (0 < h <= limits.max_image_side and 0 < w <= limits.max_image_side) or h * w > limits.max_image_pixels:
        raise WireError(f"{field}.shape", f"{h}x{w} is outside the limits ({limits.max_image_side} per side)")
    return h, w, c


def _check_jpeg_header(data: bytes | bytearray, expected: tuple[int, int, int], field: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data), formats=["JPEG"]) as im:
                width, height = im.size
                mode = im.mode
    except Exception as exc:  # Pillow raises many types for hostile bytes; all mean "not a JPEG"
        raise WireError(f"{field}.data", f"not a readable JPEG ({type(exc).__name__})") from None
    got = (height, width, _PIL_CHANNELS.get(mode, 0))
    if got != expected:
        raise WireError(f"{field}.data", f"JPEG header says {got[0]}x{got[1]}x{got[2]} but the message declared {expected}")
