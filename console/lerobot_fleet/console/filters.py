"""The filter languages of the fleet and events screens (pure: a row or event and the words typed)."""

from __future__ import annotations

from lerobot_fleet.data.model import FleetEvent, RobotRow, ServerRow

__all__ = ["robot_matches", "server_matches", "event_matches"]


def _filter_match(haystacks: list[str], query: str) -> bool:
    """Case-insensitive substring match; a leading `!` inverts."""
    q = query.strip()
    if not q:
        return True
    invert = q.startswith("!")
    q = q[1:].strip().lower() if invert else q.lower()
    hit = any(q in h.lower() for h in haystacks) if q else True
    return hit != invert


def robot_matches(row: RobotRow, query: str) -> bool:
    return _filter_match(
        [row.robot_id, row.state.name, row.replica, row.last_outcome, row.model_id, row.service, row.session_id], query
    )


def server_matches(row: ServerRow, query: str) -> bool:
    return _filter_match([row.replica, row.health, row.model_id, row.service, row.revision, *row.session_robots], query)


def event_matches(e: FleetEvent, query: str) -> bool:
    """Filter words: `robot:ID`, `server:ID`, `sev:warn` (that severity or worse), `kind:drain`; other words
    must all appear in the text. Case-insensitive."""
    rank = {"info": 0, "warn": 1, "error": 2}
    for word in query.lower().split():
        field, _, value = word.partition(":")
        if value and field == "robot":
            ok = value in e.robot.lower()
        elif value and field == "server":
            ok = value in e.server.lower()
        elif value and field in ("sev", "severity"):
            ok = rank.get(e.severity, 0) >= rank.get(value, 0)
        elif value and field == "kind":
            ok = e.kind == value
        else:
            ok = word in f"{e.text} {e.robot} {e.server} {e.kind}".lower()
        if not ok:
            return False
    return True
