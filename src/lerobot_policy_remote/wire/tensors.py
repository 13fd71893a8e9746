"""Tensors on the wire: raw little-endian bytes + dtype name + shape. Exact round trip."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .errors import Reason, WireError
from .limits import DEFAULT_LIMITS, WireLimits

# Allowlist: name on the wire -> little-endian numpy dtype. Nothing else is ever decoded.
DTYPES: dict[str, np.dtype[Any]] = {
    name: np.dtype(code)
    for name, code in {
        "bool": "?",
        "uint8": "u1",
        "int8": "i1",
        "uint16": "<u2",
        "int16": "<i2",
        "uint32": "<u4",
        "int32": "<i4",
        "uint64": "<u8",
        "int64": "<i8",
        "float16": "<f2",
        "float32": "<f4",
        "float64": "<f8",
    }.items()
}
_NAME_BY_KIND = {(dt.kind, dt.itemsize): name for name, dt in DTYPES.items()}


def encode_tensor(array: Any) -> dict[str, Any]:
    """numpy array (or anything `np.asarray` accepts) -> wire dict."""
    arr = np.asarray(array)
    name = _NAME_BY_KIND.get((arr.dtype.kind, arr.dtype.itemsize))
    if name is None:
        raise WireError(
            "tensor.dtype",
            f"dtype {arr.dtype} is not allowed on the wire (allowed: {', '.join(DTYPES)})",
            Reason.BAD_DTYPE,
        )
    data = np.ascontiguousarray(arr, dtype=DTYPES[name]).tobytes()
    return {"dtype": name, "shape": list(arr.shape), "data": data}


def decode_tensor(
    value: Any,
    field: str,
    limits: WireLimits = DEFAULT_LIMITS,
    *,
    finite: bool = False,
    dtype: str | None = None,
    ndim: int | None = None,
) -> NDArray[Any]:
    """Wire dict -> read-only numpy array, validating sizes before touching the data."""
    if not isinstance(value, dict):
        raise WireError(field, f"expected a tensor map, got {type(value).__name__}")
    name = value.get("dtype")
    shape = value.get("shape")
    data = value.get("data")
    if not isinstance(name, str) or name not in DTYPES:
        raise WireError(f"{field}.dtype", f"{name!r} is not an allowed dtype", Reason.BAD_DTYPE)
    if dtype is not None and name != dtype:
        raise WireError(f"{field}.dtype", f"expected {dtype}, got {name}", Reason.BAD_DTYPE)
    if not isinstance(shape, list) or len(shape) > limits.max_tensor_ndim:
        raise WireError(f"{field}.shape", f"expected a list of at most {limits.max_tensor_ndim} dims", Reason.BAD_SHAPE)
    if any(type(d) is not int or d < 0 for d in shape):
        raise WireError(f"{field}.shape", f"dims must be non-negative ints, got {shape!r}", Reason.BAD_SHAPE)
    if ndim is not None and len(shape) != ndim:
        raise WireError(f"{field}.shape", f"expected {ndim} dims, got {len(shape)}", Reason.BAD_SHAPE)
    count = math.prod(shape)
    if count > limits.max_tensor_elements:
        raise WireError(
            f"{field}.shape", f"{count} elements exceeds the limit {limits.max_tensor_elements}", Reason.OVERSIZE
        )
    if not isinstance(data, (bytes, bytearray)):
        raise WireError(f"{field}.data", "expected bytes")
    dt = DTYPES[name]
    if len(data) != count * dt.itemsize:
        raise WireError(
            f"{field}.data",
            f"shape {shape} {name} needs {count * dt.itemsize} bytes, got {len(data)}",
            Reason.BAD_SHAPE,
        )
    arr = np.frombuffer(data, dtype=dt).reshape(shape)
    if finite and dt.kind == "f" and not np.isfinite(arr).all():
        raise WireError(field, "contains NaN or Inf", Reason.NON_FINITE)
    return arr
