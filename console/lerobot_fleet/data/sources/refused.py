"""Servers the router refuses: each router's board of them (`lerobot-fleet router --inventory`, refused_board.py).

A server whose certificate may not serve its namespace has every declaration dropped by the router, so no status,
token or audit line of it ever reaches the console; only the router's ACL log sees it. Each router answers
`REFUSED_KEY/<zid>` with the servers it refused in the last minute; under the ACL only operators and viewers of
every namespace may ask (acl.py). Replies are checked and cut to size (`refused_board.parse_board`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lerobot_fleet.router.refused_board import MAX_REFUSED, REFUSED_KEY, parse_board
from lerobot_policy_remote.discovery import namespace_flag
from lerobot_policy_remote.wire.keys import Namespace


@dataclass(frozen=True)
class RefusedServer:
    router: str  # zid of the router that refused it
    cn: str
    replica: str
    model: str
    revision: str
    service: str
    what: str
    key: str
    count: float
    age_s: float

    def intake(self) -> tuple[str, str, Namespace, str, float]:
        """What `FleetStore.set_refused` takes: (CN, replica, namespace, notice, seconds since last refused)."""
        return self.cn, self.replica, Namespace(self.model, self.revision, self.service), self.notice(), self.age_s

    def notice(self) -> str:
        """One line for the operator: who, where, and the fix."""
        ns = namespace_flag(self.model, self.revision, self.service)
        return (
            f"server {self.replica}: refused by router {self.router[:8]} (CN={self.cn} may not serve {self.model} "
            f"task {self.service!r}; {self.what} on {self.key}, {self.count:.0f}x, last {self.age_s:.0f}s ago): "
            f"lerobot-fleet pki issue DIR {self.cn} --role server --namespace '{ns}', then restart the router"
        )


def query_refused(session: Any, timeout: float = 1.0) -> tuple[RefusedServer, ...]:
    """Every router's board; a router that does not answer (no --inventory, or this certificate may not ask) adds
    nothing."""
    import zenoh

    out: dict[tuple[str, str], RefusedServer] = {}
    for reply in session.get(f"{REFUSED_KEY}/*", timeout=timeout, consolidation=zenoh.ConsolidationMode.NONE):
        if reply.ok is None:
            continue
        router = str(reply.ok.key_expr).rsplit("/", 1)[-1][:32]
        for e in parse_board(reply.ok.payload.to_bytes()):
            server = RefusedServer(
                router,
                e["cn"],
                e["replica"],
                e["model"],
                e["revision"],
                e["service"],
                e["what"],
                e["key"],
                e["count"],
                e["age_s"],
            )
            seen = out.get((server.cn, server.replica))
            if seen is None or server.age_s < seen.age_s:  # in a mesh, the router that refused it last
                out[(server.cn, server.replica)] = server
        if len(out) >= MAX_REFUSED:
            break
    return tuple(sorted(out.values(), key=lambda s: (s.replica, s.cn)))[:MAX_REFUSED]
