"""Which namespaces and rows the console accepts: a bound on what remote peers can make it remember.

A certificate may only publish under its own id, but it can pick namespaces (any model/revision/service
string the router lets through), so without a bound one robot could grow the console's rows, maps and
screens without limit. Two bounds:

- **per id**: one robot id (or replica id) counts for at most `max_per_id` namespaces (MAX_NAMESPACES_PER_ID).
  Its samples in any further namespace are dropped, counted per id (`spilled`), and the console raises an
  alert naming it, so one certificate can never use up the namespace budget and hide the robots after it.
- **overall**: the first `max_namespaces` namespaces and `max_rows` (role, id, namespace) rows seen are admitted
  (many ids together: a fleet without access control, where anyone may use any id).

Anything beyond is dropped and counted, and the console shows a note saying so.
"""

from __future__ import annotations

from lerobot_policy_remote.wire.keys import Namespace

MAX_NAMESPACES = 256  # model/revision/service combinations shown; a real fleet has a handful
MAX_ROWS = 20_000  # robot and server rows together (the console is measured at a few thousand)
# Namespaces one robot (or replica) id may appear in. A robot that serves several tasks over a day is in a few;
# a replica in one (a restart with another model makes two). 256 / 4: it takes 64 certificates to fill the budget.
MAX_NAMESPACES_PER_ID = 4


class Admission:
    """Not thread-safe: used by the source's one decoder thread and its poller under the source's lock."""

    def __init__(
        self, max_namespaces: int = MAX_NAMESPACES, max_rows: int = MAX_ROWS, max_per_id: int = MAX_NAMESPACES_PER_ID
    ) -> None:
        self.max_namespaces = max_namespaces
        self.max_rows = max_rows
        self.max_per_id = max_per_id
        self._namespaces: set[Namespace] = set()
        self._rows: set[tuple[str, str, Namespace]] = set()
        self._per_id: dict[tuple[str, str], int] = {}  # (role, id) -> namespaces admitted (bounded by max_rows)
        self.refused = 0  # samples dropped because they would have created a row beyond the caps
        self.spilled: dict[tuple[str, str], int] = {}  # (role, id) -> samples dropped for the per-id cap

    def admit(self, role: str, ident: str, ns: Namespace) -> str:
        """ "" when the row may exist, else why not (the caller counts and shows it)."""
        row = (role, ident, ns)
        if row in self._rows:
            return ""
        who = (role, ident)
        if self._per_id.get(who, 0) >= self.max_per_id:
            self.refused += 1
            self.spilled[who] = self.spilled.get(who, 0) + 1
            return (
                f"{role} {ident} is in more than {self.max_per_id} namespaces: its samples in another "
                f"({ns.model_id} / {ns.service}) are dropped"
            )
        if ns not in self._namespaces and len(self._namespaces) >= self.max_namespaces:
            self.refused += 1
            return f"namespace cap reached ({self.max_namespaces}): {role} {ident} in a new namespace not shown"
        if len(self._rows) >= self.max_rows:
            self.refused += 1
            return f"row cap reached ({self.max_rows}): {role} {ident} not shown"
        self._namespaces.add(ns)
        self._rows.add(row)
        self._per_id[who] = self._per_id.get(who, 0) + 1
        return ""
