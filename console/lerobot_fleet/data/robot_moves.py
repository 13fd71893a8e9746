"""One robot, one row, when a rollout moves it: its token leaves one namespace of its service for another.

The store keys robots by (namespace, id) because one id in two services is two robots. A robot a rollout moves
stays in its service but changes model or revision, so its token leaves the old namespace and appears in the new
one (in either order). Without this rule the old namespace would keep a second, GONE row of the same robot.
"""

from __future__ import annotations

from lerobot_policy_remote.wire.keys import Namespace

from .aggregates import ReplicaRtts
from .records import RobotEntry


def forget_moved(
    robots: dict[tuple[Namespace, str], RobotEntry],
    ids: dict[str, set[Namespace]],
    rtts: ReplicaRtts,
    r: RobotEntry,
    alive: bool,
) -> str:
    """Apply the rule for `r`'s token appearing (`alive`) or leaving; returns an event line when a move was seen.

    - appearing: the same id's rows in other namespaces of the same service whose token is gone are dropped;
    - leaving while the same id is alive in another namespace of the same service: `r` is dropped at once (it is
      no robot that left, it moved), never shown GONE.
    The caller holds the store's lock."""
    peers = [
        robots[(ns, r.robot_id)]
        for ns in ids.get(r.robot_id, ())
        if ns != r.ns and ns[2] == r.ns[2] and (ns, r.robot_id) in robots  # [2]: the service (a key may be a tuple)
    ]
    if alive:
        dropped = [o for o in peers if o.alive is False]
    else:
        dropped = [r] if any(o.alive is True for o in peers) else []
    for o in dropped:
        del robots[(o.ns, o.robot_id)]
        ids[o.robot_id].discard(o.ns)
        rtts.update(o.key, "", 0.0)
    if not dropped:
        return ""
    to = r.ns if alive else next(o.ns for o in peers if o.alive is True)
    return f"{r.robot_id}: moved to {to[0]}@{to[1]}"


def moved_away(
    robots: dict[tuple[Namespace, str], RobotEntry], ids: dict[str, set[Namespace]], robot_id: str, ns: Namespace
) -> bool:
    """A sample of `robot_id` in `ns`, where it has no row, while its token is alive in another namespace of the same
    service: the last report it sent before it moved, arriving after the move was seen. It makes no row (nothing would
    ever remove it: no token event follows for that namespace). The caller holds the store's lock."""
    if (ns, robot_id) in robots:
        return False
    return any(
        other != ns and other[2] == ns[2] and (o := robots.get((other, robot_id))) is not None and o.alive is True
        for other in ids.get(robot_id, ())
    )
