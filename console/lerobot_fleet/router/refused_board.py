"""The board of servers the router refuses, kept by the ACL log filter (`acl_log.py`) and read by the console.

A certificate whose declaration of a replica's own status, liveliness or session keys the router refused
announced a server that no robot or console can find. The filter keeps those announcements (`RefusedServers`)
and hands them, as one JSON line, to the router process on a second pipe; the router answers it on
`REFUSED_KEY/<zid>` so the console can list such servers (`sources/refused.py`). Clients choose the names and
keys: the board is bounded (`MAX_REFUSED` entries, oldest forgotten first, fields cut to `MAX_FIELD` characters,
keys to `MAX_KEY`), its entries expire, and a reply is checked field by field (`parse_board`).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import ROOT, parse_key
from lerobot_policy_remote.wire.text import printable

MAX_LINE_BYTES = 4000  # below PIPE_BUF: a line is written whole or not at all
MAX_REFUSED = 32  # refused servers remembered (the board line carries the newest that fit in it)
MAX_FIELD = 100  # characters kept of a refused server's name, replica and namespace (the client chose them)
MAX_KEY = 300  # characters kept of the refused key (escaped free text makes keys long)
REFUSED_TTL_S = 60.0  # a refused server not refused again for this long has gone (its process exited or was fixed)
BOARD_EVERY_S = 1.0  # the board goes to the router at most this often
BOARD_MAX_BYTES = MAX_LINE_BYTES - 1  # one board line: below PIPE_BUF, so the filter's write never blocks nor splits
REFUSED_KEY = f"{ROOT}/fleet/refused"  # + /<router zid>: each router answers with its own board
# A server announces itself on these leaves of its replica's keys; a refusal on one means robots cannot find it
ANNOUNCE_LEAVES = ("status", "alive", "session")
ANNOUNCE_MESSAGES = ("declare_queryable", "liveliness_token", "reply")


class RefusedServers:
    """The servers whose own announcement keys the router refused, by (certificate CN, replica, namespace key prefix).

    Bounded: at most `MAX_REFUSED` entries (the least recently refused forgotten first), each field cut to
    `MAX_FIELD` characters (the key `MAX_KEY`); an entry expires `REFUSED_TTL_S` after its last refusal."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self.changed = False

    def observe(self, cn: str, what: str, flow: str, key: str) -> bool:
        """A refused message; True when it was a server announcing itself (and is now on the board)."""
        if flow != "ingress" or what not in ANNOUNCE_MESSAGES or "/server/" not in key:
            return False
        try:
            parsed = parse_key(key)
        except WireError:
            return False
        if parsed.role != "server" or parsed.leaf not in ANNOUNCE_LEAVES or parsed.ident == "*":
            return False
        ns = parsed.namespace
        cut: Callable[[str], str] = lambda text: printable(text, MAX_FIELD)  # noqa: E731
        entry_key = (cut(cn), cut(parsed.ident), cut("/".join(key.split("/")[:4])))
        now = self.clock()
        entry = self._entries.pop(entry_key, None) or {
            "cn": entry_key[0],
            "replica": entry_key[1],
            "model": cut(ns.model_id),
            "revision": cut(ns.revision),
            "service": cut(ns.service),
            "first": now,
            "count": 0,
        }
        entry.update(what=what, key=printable(key, MAX_KEY), last=now, count=entry["count"] + 1)
        self._entries[entry_key] = entry
        while len(self._entries) > MAX_REFUSED:
            self._entries.popitem(last=False)
        self.changed = True
        return True

    def board(self) -> list[dict[str, Any]]:
        """The live entries, newest refusal first, with `age_s` (seconds since the last refusal) instead of instants."""
        now = self.clock()
        for k in [k for k, e in self._entries.items() if now - e["last"] > REFUSED_TTL_S]:
            del self._entries[k]
        return [
            {
                **{k: v for k, v in e.items() if k not in ("first", "last")},
                "age_s": round(now - e["last"], 1),
                "for_s": round(now - e["first"], 1),
            }
            for e in reversed(self._entries.values())
        ]


def board_line(entries: list[dict[str, Any]]) -> str:
    """One JSON line for the router process; entries dropped from the end (the oldest) until it fits."""
    entries = list(entries)
    while True:
        line = json.dumps({"servers": entries}, separators=(",", ":"))
        if len(line) <= BOARD_MAX_BYTES or not entries:
            return line
        entries.pop()


def parse_board(raw: bytes | str) -> list[dict[str, Any]]:
    """A board line (from the filter, or a router's reply) -> its entries, each checked; [] for anything else.

    The console reads replies through the router: only fields of the right type, cut to size, pass."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return []
    items = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    out = []
    for item in items[:MAX_REFUSED]:
        if not isinstance(item, dict):
            continue
        text = {k: item.get(k) for k in ("cn", "replica", "model", "revision", "service", "what", "key")}
        # Any: JSON values, each checked to be a number just below
        nums: dict[str, Any] = {k: item.get(k) for k in ("count", "age_s", "for_s")}
        if not all(isinstance(v, str) for v in text.values()) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in nums.values()
        ):
            continue
        cut = {k: printable(v, MAX_KEY if k == "key" else MAX_FIELD) for k, v in text.items()}
        out.append({**cut, **{k: float(v) for k, v in nums.items()}})
    return out
