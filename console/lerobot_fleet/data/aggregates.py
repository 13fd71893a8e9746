"""Fleet aggregates kept as samples arrive (O(1) per telemetry sample), so a UI tick reads them instead of
walking every robot, so a tick stays cheap at 1,000-2,000 robots."""

from __future__ import annotations


class ReplicaRtts:
    """Each robot's latest reported RTT p50, grouped by the replica it reports (the capacity estimate's input).

    A robot counts under one replica at a time: a sample naming another replica moves it, a sample without a
    replica or without an RTT takes it out (what a walk over the robots' latest telemetry would find)."""

    def __init__(self) -> None:
        self._by_replica: dict[str, dict[str, float]] = {}
        self._where: dict[str, str] = {}

    def update(self, robot: str, replica: str, rtt_ms: float) -> None:
        old = self._where.get(robot)
        keep = bool(replica) and rtt_ms > 0
        if old is not None and (old != replica or not keep):
            members = self._by_replica[old]
            del members[robot]
            if not members:
                del self._by_replica[old]
            del self._where[robot]
        if keep:
            self._by_replica.setdefault(replica, {})[robot] = rtt_ms
            self._where[robot] = replica

    def lists(self) -> dict[str, list[float]]:
        """replica -> its robots' RTT p50s (order not meaningful)."""
        return {rep: list(members.values()) for rep, members in self._by_replica.items()}
