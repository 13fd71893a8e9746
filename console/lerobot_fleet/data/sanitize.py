"""Wire strings made safe before the console stores, shows, prints or exports them.

Everything a robot or a server controls (telemetry, audit lines, status replies, acks, the free-text parts of
a key) goes through `clean` on its way into the console, so no row, detail, event, note, `lerobot-fleet
status` line or export can carry a terminal escape. The one sanitiser is `wire.text.printable`; this module
only walks the decoded messages. (Rich markup is not a risk: the console builds `Text` with `append`, never
markup; see render/.)
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.text import printable

T = TypeVar("T")
FIELD_LIMIT = 500  # characters kept of one free-text field (an error message, a task)


def clean_text(text: str, limit: int = FIELD_LIMIT) -> str:
    return printable(text, limit)


def clean(obj: T) -> T:
    """`obj` with every string in it (nested dataclasses, lists, dicts) made printable; in place for dataclasses."""
    return _clean(obj)  # type: ignore[no-any-return]


_PLAIN = (int, float, bool, type(None))
_FIELDS: dict[type, tuple[str, ...]] = {}  # field names per dataclass type (dataclasses.fields is slow per sample)


def _clean(v: Any) -> Any:
    t = type(v)
    if t in _PLAIN:
        return v
    if t is str:
        return printable(v, FIELD_LIMIT)
    if isinstance(v, Namespace):
        return clean_namespace(v)
    names = _FIELDS.get(t)
    if names is None and dataclasses.is_dataclass(v) and not isinstance(v, type):
        names = _FIELDS[t] = tuple(f.name for f in dataclasses.fields(v))
    if names is not None:
        for name in names:
            cur = getattr(v, name)
            if type(cur) in _PLAIN:
                continue
            new = _clean(cur)
            if new is not cur:
                object.__setattr__(v, name, new)
        return v
    if isinstance(v, str):  # a str subclass
        return printable(v, FIELD_LIMIT)
    if isinstance(v, list):
        return [_clean(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_clean(x) for x in v)
    if isinstance(v, dict):
        return {_clean(k): _clean(x) for k, x in v.items()}
    return v


@functools.lru_cache(maxsize=1024)
def clean_namespace(ns: Namespace) -> Namespace:
    """The namespace as shown: its decoded segments may hold anything percent-escaping allows (cached: every
    sample carries one, and a fleet has few)."""
    return Namespace(*(printable(s, FIELD_LIMIT) for s in ns))
