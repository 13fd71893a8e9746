"""Which routers exist and which one this session goes through, from the routers' admin space.

Each router answers `@/<zid>/router` with JSON (`zid`, `locators`, `sessions`); in a mesh the query reaches
every router. Needs `adminspace` on the routers (`lerobot-fleet router` enables it) and, under the ACL, an
operator certificate (robots, servers and viewers may not read the admin space: their list says unknown).
"""

from __future__ import annotations

import json
from typing import Any

from ..model import RouterInfo

ADMIN_ROUTERS = "@/*/router"


def query_routers(session: Any, timeout: float = 1.0) -> tuple[RouterInfo, ...]:
    """Every router that answered; `connected` marks the one(s) this session is linked to."""
    try:
        linked = {str(z) for z in session.info.routers_zid()}
    except Exception:
        linked = set()
    out: dict[str, RouterInfo] = {}
    for reply in session.get(ADMIN_ROUTERS, timeout=timeout):
        if reply.ok is None:
            continue
        try:
            data = json.loads(reply.ok.payload.to_bytes())
            zid = str(data.get("zid") or str(reply.ok.key_expr).split("/")[1])
            locators = tuple(str(x) for x in data.get("locators") or ())
            sessions = len(data.get("sessions") or ())
        except (ValueError, AttributeError, IndexError, TypeError):
            continue  # a malformed admin reply is skipped, never fatal
        out[zid] = RouterInfo(zid, locators, sessions, zid in linked)
    return tuple(out.values())


def routers_line(routers: tuple[RouterInfo, ...]) -> str:
    """One header line: `routers 2: via 3f2a… (tls/10.0.0.5:7447); also 9b1c…`."""
    if not routers:
        return "routers: unknown (admin space off, or this certificate may not read it: only operators may)"
    via = [r for r in routers if r.connected]
    others = [r for r in routers if not r.connected]
    parts = [f"via {r.zid[:8]}… ({', '.join(r.locators) or '?'})" for r in via] or ["via ?"]
    if others:
        parts.append("also " + ", ".join(f"{r.zid[:8]}…" for r in others))
    return f"routers {len(routers)}: " + "; ".join(parts)
