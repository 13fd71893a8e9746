"""`lerobot-fleet doctor`'s report: one line per check, a fix under each failure, a closing verdict.

The checks produce `Check` values and know nothing of how they are shown; this module turns them into the
text report and the `--json` document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lerobot_fleet.data.model import FleetSnapshot
from lerobot_policy_remote.discovery import ServiceInfo

PASS, FAIL, INFO, WARN, SKIP = "PASS", "FAIL", "INFO", "WARN", "SKIP"  # WARN: works, but the operator should act


@dataclass
class Check:
    name: str
    status: str  # PASS | FAIL | WARN | INFO | SKIP (the given certificate's role may not do this check)
    detail: str
    fix: str = ""


def render(checks: list[Check]) -> str:
    lines = []
    for c in checks:
        if c.status == INFO:
            lines.append(f"      {c.detail}")
            continue
        lines.append(f"{c.status:<4}  {c.name:<13} {c.detail}")
        if c.fix:
            lines.append(f"      fix: {c.fix}")
    ok = all(c.status != FAIL for c in checks)
    skipped = any(c.status == SKIP for c in checks)
    if ok and skipped:
        lines.append("Everything checked is in place; the SKIP lines need another certificate to be checked.")
    else:
        lines.append(
            "Everything a rollout needs is in place." if ok else "Not ready: fix the FAIL lines above, in order."
        )
    return "\n".join(lines)


def service_json(svc: ServiceInfo, fleet: FleetSnapshot | None) -> dict[str, Any]:
    """A service as discovery lists it, each replica with the console's capacity figures (`room` and `room_limit`,
    `n_max`, `requests_per_s` and where that comes from; absent when the fleet watch did not hear the replica)."""
    d = svc.to_dict()
    for r in d["replicas"]:
        row = fleet.server(r["replica"]) if fleet is not None else None
        if row is not None and not row.is_stale:
            r.update(
                room=row.headroom,
                room_limit=row.room_limit,
                n_max=row.n_max,
                requests_per_s=row.requests_per_s,
                rate_source=row.rate_source,
            )
    return d
