"""Sort orders of the fleet tables: each column's key, then the row's identity (a total order, never dict order)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TypeVar

from .model import RobotRow, ServerRow

__all__ = ["ROBOT_SORT_KEYS", "SERVER_SORT_KEYS", "SERVER_HEALTH_RANK", "sort_rows", "sort_robots", "sort_servers"]

SERVER_HEALTH_RANK = {"refused": 0, "gone": 0, "stale": 1, "draining": 2, "cordoned": 3, "full": 4, "cold": 5, "ok": 6}
RTC_RANK = {"on": 0, "off": 1}  # then unknown
SortKey = tuple[object, ...]  # a column's key: compared element-wise (numbers with numbers, text with text)
Row = TypeVar("Row", RobotRow, ServerRow)


def _num(v: float | None) -> float:
    return -math.inf if v is None else v


ROBOT_SORT_KEYS: dict[str, Callable[[RobotRow], SortKey]] = {
    "state": lambda r: (r.state.rank,),
    "robot": lambda r: (),
    "stale": lambda r: (-_num(r.staleness_s),),
    "queue": lambda r: (_num(r.queue_s),),
    "rtt": lambda r: (-(r.rtt_p95_ms or 0.0),),
    "net": lambda r: (-(r.network_ms or 0.0),),
    "delay": lambda r: (-(r.delay_steps or 0),),
    "rtc": lambda r: (RTC_RANK.get(r.rtc, 2), -(r.delay_steps or 0)),
    "episode": lambda r: (-r.episode_id,),
    "server": lambda r: (r.replica,),
    "sup": lambda r: (-_num(r.superseded_pct),),
    "errors": lambda r: (-r.errors,),
    "outcome": lambda r: (r.waiting or r.last_outcome,),
    "seen": lambda r: (-(r.seen_age_s if r.seen_age_s is not None else math.inf),),
}

SERVER_SORT_KEYS: dict[str, Callable[[ServerRow], SortKey]] = {
    "health": lambda s: (SERVER_HEALTH_RANK.get(s.health, 9), s.model_id, s.service),
    "replica": lambda s: (),
    "model": lambda s: (s.model_id,),
    "revision": lambda s: (s.revision,),
    "service": lambda s: (s.service,),
    "sessions": lambda s: (-s.active_sessions,),
    "load": lambda s: (-s.load,),
    "rps": lambda s: (-_num(s.requests_per_s),),
    "errors": lambda s: (-_num(s.errors),),
    "superseded": lambda s: (-_num(s.superseded),),
    "nmax": lambda s: (-_num(s.n_max),),
    "headroom": lambda s: (math.inf if s.headroom is None else s.headroom,),
}

_ROBOT_IDENTITY = attrgetter("robot_id", "ns")
_SERVER_IDENTITY = attrgetter("replica", "ns")


def sort_rows(
    rows: Sequence[Row], keys: dict[str, Callable[[Row], SortKey]], column: str, reverse: bool = False
) -> list[Row]:
    """By the column's key, ties by identity: two stable sorts (identity first), each with a cheap key."""
    fn = keys.get(column) or next(iter(keys.values()))
    out = sorted(rows, key=_ROBOT_IDENTITY if rows and isinstance(rows[0], RobotRow) else _SERVER_IDENTITY)
    out.sort(key=fn)
    return out[::-1] if reverse else out


def sort_robots(rows: Sequence[RobotRow], sort: str = "state", reverse: bool = False) -> list[RobotRow]:
    return sort_rows(rows, ROBOT_SORT_KEYS, sort, reverse)


def sort_servers(rows: Sequence[ServerRow], sort: str = "health", reverse: bool = False) -> list[ServerRow]:
    return sort_rows(rows, SERVER_SORT_KEYS, sort, reverse)
