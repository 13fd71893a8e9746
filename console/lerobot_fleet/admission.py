"""Which namespaces and rows the console accepts: a bound on what remote peers can make it remember.

A certificate may only publish under its own id, but it can pick namespaces (any model/revision/service
string the router lets through), so without a bound one robot could grow the console's rows, maps and
screens without limit. The first `max_namespaces` namespaces and `max_rows` (role, id, namespace) rows
seen are admitted; anything beyond is dropped and counted, and the console shows a note saying so.
"""

from __future__ import annotations

from lerobot_policy_remote.wire.keys import Namespace

MAX_NAMESPACES = 256  # model/revision/service combinations shown; a real fleet has a handful
MAX_ROWS = 20_000  # robot and server rows together (the console is measured at a few thousand)


class Admission:
    """Not thread-safe: used by the source's one decoder thread and its poller under the source's lock."""

    def __init__(self, max_namespaces: int = MAX_NAMESPACES, max_rows: int = MAX_ROWS) -> None:
        self.max_namespaces = max_namespaces
        self.max_rows = max_rows
        self._namespaces: set[Namespace] = set()
        self._rows: set[tuple[str, str, Namespace]] = set()
        self.refused = 0  # samples dropped because they would have created a row beyond the caps

    def admit(self, role: str, ident: str, ns: Namespace) -> str:
        """"" when the row may exist, else why not (the caller counts and shows it)."""
        row = (role, ident, ns)
        if row in self._rows:
            return ""
        if ns not in self._namespaces and len(self._namespaces) >= self.max_namespaces:
            self.refused += 1
            return f"namespace cap reached ({self.max_namespaces}): {role} {ident} in a new namespace not shown"
        if len(self._rows) >= self.max_rows:
            self.refused += 1
            return f"row cap reached ({self.max_rows}): {role} {ident} not shown"
        self._namespaces.add(ns)
        self._rows.add(row)
        return ""
