"""The one body codec: msgpack (JSON for audit lines) <-> typed dataclasses, validated on the way in.

Rules (schema discipline): unknown keys are ignored, missing keys take the field default, a key that
is present with the wrong type is an error naming the field. No pickle, no ext types.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Sequence
from typing import Any, TypeVar, Union, get_args, get_origin

import msgpack

from .errors import Reason, WireError
from .limits import DEFAULT_LIMITS, WireLimits

T = TypeVar("T")
CONTROL_MAX_BYTES = 1024 * 1024


def pack(obj: Any) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True)  # msgpack ships no types: its result is typed here
    return packed


def unpack_map(
    data: bytes | bytearray | memoryview | None, field: str, limits: WireLimits, max_bytes: int
) -> dict[str, Any]:
    """msgpack bytes -> dict, refusing oversize input before parsing and bounding every container."""
    if data is None:
        raise WireError(field, "empty payload")
    if len(data) > max_bytes:
        raise WireError(field, f"payload of {len(data)} bytes exceeds the limit {max_bytes}", Reason.OVERSIZE)
    try:
        obj = msgpack.unpackb(
            bytes(data),
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=limits.max_str_len,
            max_bin_len=max_bytes,
            max_array_len=limits.max_items,
            max_map_len=limits.max_items,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, TypeError, StackError, ... for hostile bytes
        raise WireError(field, f"not a valid msgpack body ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise WireError(field, f"expected a map, got {type(obj).__name__}")
    return obj


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


_EXACT = (str, int, bool, float)  # annotations whose check is "this exact type" (coerce returns the value itself)


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, Any, bool, bool], ...]:
    """(name, annotation, required, exact-type fast path) per field of `cls`, computed once per class: the
    console decodes ~20,000 telemetry samples/s and `dataclasses.fields` + a path string per field dominated."""
    hints = _hints(cls)
    return tuple(
        (
            f.name,
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            hints[f.name] in _EXACT,
        )
        for f in dataclasses.fields(cls)
    )


def from_dict(cls: type[T], value: Any, field: str) -> T:
    """Build dataclass `cls` from a decoded map, ignoring unknown keys."""
    if not isinstance(value, dict):
        raise WireError(field, f"expected a map, got {type(value).__name__}")
    kwargs: dict[str, Any] = {}
    plan_of: type = cls  # a class is hashable; the checker cannot tell for `type[T]` (the cache's key must be)
    for name, tp, required, exact in _plan(plan_of):
        if name in value:
            v = value[name]
            kwargs[name] = v if exact and type(v) is tp else coerce(v, tp, f"{field}.{name}")
        elif required:
            raise WireError(f"{field}.{name}", "required field is missing")
    return cls(**kwargs)


_LEAVES = frozenset({str, int, float, bool, bytes, type(None)})


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def to_dict(obj: Any) -> Any:
    """Dataclass tree -> plain maps/lists (inverse of :func:`from_dict`). Exact leaf types and cached field names
    first: every robot encodes its telemetry each second (`dataclasses.fields` per object was 160 us a message)."""
    t = type(obj)
    if t in _LEAVES:
        return obj
    if dataclasses.is_dataclass(t):  # leaves inline: a flat message (telemetry) makes no call per field
        return {n: v if type(v) in _LEAVES else to_dict(v) for n in _field_names(t) for v in (getattr(obj, n),)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def coerce(value: Any, tp: Any, field: str) -> Any:
    """Check `value` against the annotation `tp`; returns the (possibly converted) value."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return coerce(value, inner, field)
    if tp is bool:
        if type(value) is not bool:
            raise WireError(field, f"expected a bool, got {type(value).__name__}")
        return value
    if tp is int:
        if type(value) is not int:
            raise WireError(field, f"expected an int, got {type(value).__name__}")
        return value
    if tp is float:
        if type(value) not in (int, float):
            raise WireError(field, f"expected a number, got {type(value).__name__}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise WireError(field, f"expected a string, got {type(value).__name__}")
        return value
    if tp is bytes:
        if not isinstance(value, (bytes, bytearray)):
            raise WireError(field, f"expected bytes, got {type(value).__name__}")
        return bytes(value)
    if origin is list:
        if not isinstance(value, list):
            raise WireError(field, f"expected a list, got {type(value).__name__}")
        (item,) = get_args(tp)
        return [coerce(v, item, f"{field}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(field, f"expected a map, got {type(value).__name__}")
        _, item = get_args(tp)
        return {str(k): coerce(v, item, f"{field}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a dataclass annotation is its class
        return from_dict(tp, value, field)
    raise TypeError(f"unsupported annotation {tp!r} for {field}")  # a bug in our schema, not hostile input


def encode(msg: Any) -> bytes:
    """Dataclass -> msgpack bytes."""
    return pack(to_dict(msg))


def decode(
    cls: type[T],
    data: bytes | bytearray | memoryview | None,
    limits: WireLimits = DEFAULT_LIMITS,
    max_bytes: int = CONTROL_MAX_BYTES,
) -> T:
    """msgpack bytes -> dataclass `cls`; only WireError comes out for bad input."""
    return from_dict(cls, unpack_map(data, cls.__name__, limits, max_bytes), cls.__name__)


def encode_json(msg: Any) -> bytes:
    return json.dumps(to_dict(msg), separators=(",", ":"), allow_nan=False).encode()


def decode_json(cls: type[T], data: bytes | bytearray | memoryview | None, max_bytes: int = CONTROL_MAX_BYTES) -> T:
    if data is None or len(data) > max_bytes:
        raise WireError(cls.__name__, "missing or oversize JSON payload", Reason.OVERSIZE)
    try:
        obj = json.loads(bytes(data))
    except (ValueError, RecursionError) as exc:
        raise WireError(cls.__name__, f"not valid JSON ({exc})") from None
    return from_dict(cls, obj, cls.__name__)


AUDIT_SEPARATOR = "\n"  # between the JSON lines of one audit publication: `json.dumps` never writes a raw newline


def join_audit_lines(lines: Sequence[str]) -> str:
    """One audit publication: a replica's buffered JSON lines, oldest first (docs/wire.md "AuditLine")."""
    return AUDIT_SEPARATOR.join(lines)


def split_audit_payload(data: bytes | bytearray | memoryview | None, max_bytes: int = CONTROL_MAX_BYTES) -> list[bytes]:
    """The JSON lines of one audit publication, each decoded alone (`decode_json(AuditLine, piece)`) so that a malformed
    one costs only itself. A replica publishes its lines in batches; a payload of one line (an older replica, the test
    kit) is one piece. Blank pieces are skipped; the whole payload keeps the control-payload bound."""
    if data is None or len(data) > max_bytes:
        raise WireError("AuditLine", "missing or oversize audit payload", Reason.OVERSIZE)
    return [piece for piece in bytes(data).split(AUDIT_SEPARATOR.encode()) if piece.strip()]
