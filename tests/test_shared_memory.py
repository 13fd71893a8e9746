"""Which sessions a zenoh session reaches over shared memory (logic only: stand-ins for `session.info`)."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_policy_remote.shared_memory import MAX_ZIDS, reaches_over_shm, shm_zids


@dataclass
class T:
    zid: str
    is_shm: bool


class Info:
    def __init__(self, me: str, transports: list[T]) -> None:
        self.me, self.ts = me, transports

    def zid(self) -> str:
        return self.me

    def transports(self) -> list[T]:
        return self.ts


class S:
    def __init__(self, me: str, transports: list[T]) -> None:
        self.info = Info(me, transports)


def closed() -> S:
    """What a closed zenoh session answers (checked with zenoh 1.10): its zid, and no transports."""
    return S("gone", [])


def test_a_server_offers_itself_and_its_shared_memory_routers():
    assert shm_zids(S("srv", [T("r1", True), T("r2", False)])) == ["srv", "r1"]


def test_a_server_without_a_shared_memory_link_offers_nothing():
    assert shm_zids(S("srv", [T("r1", False)])) == []
    assert shm_zids(closed()) == []


def test_a_robot_needs_its_own_shared_memory_link_to_one_of_them():
    offered = ["srv", "r1"]
    assert reaches_over_shm(S("bot", [T("r1", True)]), offered)  # same router, both by shared memory
    assert reaches_over_shm(S("bot", [T("srv", True)]), offered)  # peer mode: straight to the server
    assert not reaches_over_shm(S("bot", [T("r1", False)]), offered)  # its router link crosses a network
    assert not reaches_over_shm(S("bot", [T("r9", True)]), offered)  # another router (a mesh): frames would cross
    assert not reaches_over_shm(S("bot", [T("r1", True)]), [])  # an old server says nothing
    assert not reaches_over_shm(closed(), offered)


def test_hostile_lists_are_bounded_and_typed():
    flood = [f"z{i}" for i in range(10_000)] + ["r1"]
    assert not reaches_over_shm(S("bot", [T("r1", True)]), flood)  # only the first MAX_ZIDS are looked at
    assert not reaches_over_shm(S("bot", [T("1", True)]), [1, None])  # type: ignore[list-item]
    assert len(shm_zids(S("srv", [T(f"r{i}", True) for i in range(100)]))) == MAX_ZIDS
