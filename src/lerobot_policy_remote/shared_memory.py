"""Which sessions a zenoh session reaches over shared memory, and so whether a robot and its replica share a host.

Zenoh turns shared memory on for a link only when both ends enable it and can map each other's segments, so a
link that reports `is_shm` joins two sessions on one host. When the robot's link and the replica's link reach
the same session (their router, or each other in peer mode) over shared memory, a camera frame never crosses a
network: JPEG would spend CPU on both sides to save bytes nobody pays for, so the robot sends raw frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_ZIDS = 16  # a replica links to one router (two in a mesh failover); more on the wire is ignored


def shm_zids(session: Any) -> list[str]:
    """This session's zid and the zids of the sessions it is linked to over shared memory ([] when none is)."""
    linked = [str(t.zid) for t in session.info.transports() if t.is_shm]  # a closed session lists none
    return [str(session.info.zid()), *linked][:MAX_ZIDS] if linked else []


def reaches_over_shm(session: Any, zids: Sequence[str]) -> bool:
    """True when this session is linked over shared memory to one of `zids` (a replica's `shm_zids`)."""
    wanted = {z for z in list(zids)[:MAX_ZIDS] if isinstance(z, str)}
    if not wanted:
        return False
    return any(t.is_shm and str(t.zid) in wanted for t in session.info.transports())
