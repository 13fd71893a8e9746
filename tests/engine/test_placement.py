"""Placement: robots that start together spread over the replicas with room, not in a herd.

The engines are real `RemoteInferenceEngine`s with their own `MemoryLink`s; the links share two
in-memory replicas whose seats are taken atomically, as a server's registry takes them.
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import lerobot.rollout  # noqa: F401
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.handshake import free_seats, rank
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing.memory_link import MemoryLink, MemoryReplica
from lerobot_policy_remote.wire.messages import ServerStatus

NAMES = [f"j{i}.pos" for i in range(3)]
HW = {"observation.state": {"dtype": "float32", "shape": (3,), "names": NAMES}}


def status(replica: str, active: int, seats: int = 6, *, draining: bool = False, load: float = 0.0) -> ServerStatus:
    return ServerStatus(
        replica=replica, max_sessions=seats, active_sessions=active, draining=draining, load=load, warmed_up=True
    )


def test_full_and_draining_replicas_are_never_tried_first():
    rng = random.Random(7)
    for _ in range(200):
        order = [
            s.replica
            for s in rank([status("full", 6), status("drain", 0, draining=True), status("a", 5), status("b", 2)], rng)
        ]
        assert order[2:] == ["full", "drain"], order
        assert set(order[:2]) == {"a", "b"}


def test_more_free_seats_wins_the_two_choices():
    # two replicas: both are always drawn, so the one with more room comes first, whatever the load
    rng = random.Random(1)
    for _ in range(100):
        assert rank([status("busy", 5, load=0.0), status("roomy", 1, load=0.9)], rng)[0].replica == "roomy"


def test_equal_replicas_are_chosen_at_random_not_by_reply_order():
    rng = random.Random(3)
    firsts = Counter(rank([status(f"r{i}", 0) for i in range(4)], rng)[0].replica for _ in range(2000))
    assert set(firsts) == {"r0", "r1", "r2", "r3"}
    assert min(firsts.values()) > 350, firsts  # about 500 each


def test_many_replicas_favour_free_seats():
    rng = random.Random(5)
    statuses = [status("nearly-full", 5), *[status(f"r{i}", 1) for i in range(3)]]
    firsts = Counter(rank(statuses, rng)[0].replica for _ in range(2000))
    assert firsts["nearly-full"] < 40, firsts  # drawn twice only if it was both of the two choices: never
    assert free_seats(status("unbounded", 10, seats=0)) > 1000


def _start_fleet(n: int, replicas: tuple[MemoryReplica, ...]) -> list[RemoteInferenceEngine]:
    engines = [
        RemoteInferenceEngine(
            RemoteInferenceConfig(rtc=RTCConfig(enabled=False), client_uuid=f"arm-{i}"),
            hw_features=HW,
            ordered_action_keys=NAMES,
            task="t",
            fps=30,
            model_id="m",
            transport=MemoryLink(*replicas),
        )
        for i in range(n)
    ]
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def start(e: RemoteInferenceEngine) -> None:
        barrier.wait(10)
        try:
            e.start(worker=False)
        except BaseException as exc:  # reported below, with the run that raised it
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return engines


@pytest.mark.parametrize("run", range(20))
def test_eight_robots_starting_together_spread_over_two_replicas(run: int):
    a, b = MemoryReplica("a", max_sessions=6), MemoryReplica("b", max_sessions=6)
    engines = _start_fleet(8, (a, b))
    try:
        placed = Counter(e.replica for e in engines)
        assert placed["a"] + placed["b"] == 8
        assert abs(placed["a"] - 4) <= 1, f"run {run}: {dict(placed)}"
        assert (len(a.seated), len(b.seated)) == (placed["a"], placed["b"])
    finally:
        for e in engines:
            e.stop()
