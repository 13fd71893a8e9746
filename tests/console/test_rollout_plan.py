"""The rollout's plan (pure): who moves when, bounded by steps and seats, and what it says."""

from __future__ import annotations

import pytest
from lerobot_fleet.rollout.guard import GuardError, parse_guard, tripped
from lerobot_fleet.rollout.plan import (
    GONE_S,
    MOVE_TIMEOUT_S,
    Plan,
    RolloutError,
    SeenReplica,
    SeenRobot,
    canary_count,
    resolve,
)

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.rollout import Phase, RolloutCommand

A = Namespace("org/pick", "v1", "pick")
B = Namespace("org/pick", "v2", "pick")


def robots(on: dict[str, tuple[Namespace, str]], state: str = "STREAMING") -> dict[str, SeenRobot]:
    return {r: SeenRobot(r, ns, fp, state, 0.1) for r, (ns, fp) in on.items()}


def fleet(n: int = 8) -> dict[str, tuple[Namespace, str]]:
    return {f"arm-{i}": (A, "fpA") for i in range(n)}


REPLICAS = [SeenReplica("a-1", A, "fpA", 4), SeenReplica("a-2", A, "fpA", 4), SeenReplica("b-1", B, "fpB", 8)]


def start(canary: float = 0.25, step: int = 0, replicas: list[SeenReplica] = REPLICAS) -> Plan:
    status = resolve(
        RolloutCommand("start", to="v2", canary=canary, step=step), list(robots(fleet()).values()), replicas
    )
    return Plan(status, wall=lambda: "t")


def arrive(on: dict[str, tuple[Namespace, str]], orders: list) -> None:
    for o in orders:
        on[o.robot] = (o.to_ns, o.to.fingerprint)


def test_start_resolves_the_target_by_revision_and_the_source_from_the_robots():
    plan = start()
    st = plan.status
    assert (st.from_model.revision, st.from_model.fingerprint) == ("v1", "fpA")
    assert (st.to_model.revision, st.to_model.fingerprint) == ("v2", "fpB")
    assert len(st.robots) == 8 and canary_count(st) == 2
    by_fp = resolve(RolloutCommand("start", to="fpB"), list(robots(fleet()).values()), REPLICAS)
    assert by_fp.to_model.fingerprint == "fpB"


@pytest.mark.parametrize(
    ("to", "replicas", "says"),
    [
        ("v3", REPLICAS, "no replica serves"),
        ("fp", REPLICAS, "names 2 models"),
        ("", REPLICAS, "say which model"),
    ],
)
def test_start_refuses_what_it_cannot_resolve_in_one_line(to, replicas, says):
    with pytest.raises(RolloutError, match=says) as exc:
        resolve(RolloutCommand("start", to=to), list(robots(fleet()).values()), replicas)
    assert "\n" not in str(exc.value)


def test_start_refuses_a_service_whose_robots_run_two_models():
    on = fleet()
    on["arm-0"] = (Namespace("org/pick", "v0", "pick"), "fp0")
    with pytest.raises(RolloutError, match="run 2 models"):
        resolve(RolloutCommand("start", to="v2"), list(robots(on).values()), REPLICAS)


def test_the_canary_moves_its_share_then_waits_for_promote():
    plan, on = start(), fleet()
    orders, events = plan.tick(robots(on), REPLICAS, 0.0)
    assert [o.robot for o in orders] == ["arm-0", "arm-1"] and all(o.at == A and o.to_ns == B for o in orders)
    assert "step 1: moving arm-0, arm-1 to org/pick@v2" in events[-1]
    # nothing new while the step's robots have not arrived
    assert plan.tick(robots(on), REPLICAS, 1.0)[0] == []
    arrive(on, orders)
    orders, events = plan.tick(robots(on), REPLICAS, 2.0)
    assert orders == [] and plan.status.phase == Phase.CANARY
    assert plan.status.message.startswith("canary: 2 robot(s) on org/pick@v2")
    assert sum(r.state == "moved" for r in plan.status.robots) == 2


def test_promote_moves_the_rest_in_steps_never_more_than_one_step_in_flight():
    plan, on = start(), fleet()
    arrive(on, plan.tick(robots(on), REPLICAS, 0.0)[0])
    plan.tick(robots(on), REPLICAS, 1.0)
    plan.promote(1.0)
    sizes = []
    for t in range(2, 20):
        orders, _ = plan.tick(robots(on), REPLICAS, float(t))
        in_flight = sum(r.state == "moving" for r in plan.status.robots)
        assert in_flight <= 2
        sizes.append(len(orders))
        arrive(on, orders)
    assert [s for s in sizes if s] == [2, 2, 2] and plan.status.phase == Phase.COMPLETE
    assert all(fp == "fpB" for _, fp in on.values())


def test_a_step_never_exceeds_the_targets_free_seats_and_says_why_robots_wait():
    few = [SeenReplica("a-1", A, "fpA", 8), SeenReplica("b-1", B, "fpB", 1)]
    plan, on = start(canary=0.5, replicas=few), fleet()
    orders, events = plan.tick(robots(on), few, 0.0)
    assert len(orders) == 1 and "3 wait for the next step (only 1 free seat(s) on the target)" in events[-1]
    arrive(on, orders)
    arrive(on, plan.tick(robots(on), few, 1.0)[0])
    full = [SeenReplica("a-1", A, "fpA", 8), SeenReplica("b-1", B, "fpB", 0)]
    assert plan.tick(robots(on), full, 2.0)[0] == []
    assert "has no free seat" in plan.status.message


def test_abort_from_the_middle_brings_every_moved_robot_back():
    plan, on = start(step=3), fleet()
    arrive(on, plan.tick(robots(on), REPLICAS, 0.0)[0])
    plan.tick(robots(on), REPLICAS, 1.0)
    plan.promote(1.0)
    arrive(on, plan.tick(robots(on), REPLICAS, 2.0)[0])
    in_flight, _ = plan.tick(robots(on), REPLICAS, 3.0)  # the third step is under way when the operator aborts
    assert sum(fp == "fpB" for _, fp in on.values()) == 5 and len(in_flight) == 3
    plan.abort("by test", 3.0)
    arrive(on, in_flight)
    for t in range(4, 12):
        orders, _ = plan.tick(robots(on), REPLICAS, float(t))
        assert all(o.to.fingerprint == "fpA" and o.to_ns == A for o in orders)
        arrive(on, orders)
    assert plan.status.phase == Phase.ABORTED and all(fp == "fpA" for _, fp in on.values())
    assert plan.status.message.startswith("aborted: every robot is back on org/pick@v1")


def test_a_robot_that_does_not_arrive_fails_and_the_rollout_goes_on():
    plan, on = start(), fleet()
    orders, _ = plan.tick(robots(on), REPLICAS, 0.0)
    on[orders[0].robot] = (B, "fpB")  # only the first arrives
    plan.tick(robots(on), REPLICAS, 1.0)
    _, events = plan.tick(robots(on), REPLICAS, MOVE_TIMEOUT_S + 1)
    failed = [r for r in plan.status.robots if r.state == "failed"]
    assert [r.robot for r in failed] == [orders[1].robot] and "STREAMING on fpA" in failed[0].detail
    assert any("failed to move" in e for e in events)


def test_a_moved_robot_that_restarts_on_the_old_model_is_moved_again_in_no_new_step():
    plan, on = start(), fleet()
    orders, _ = plan.tick(robots(on), REPLICAS, 0.0)
    arrive(on, orders)
    plan.tick(robots(on), REPLICAS, 1.0)
    steps = plan.status.steps
    on["arm-0"] = (A, "fpA")  # restarted with its old flags
    again, events = plan.tick(robots(on), REPLICAS, 2.0)
    assert [o.robot for o in again] == ["arm-0"] and plan.status.steps == steps
    assert "moving it again, no new step" in events[0]


def test_the_guard_reads_relative_and_absolute_bounds():
    class F:
        def __init__(self, robots: int, **kw: float) -> None:
            self.robots = robots
            self.__dict__.update(kw)

    g = parse_guard("degraded_rate > 2x, rtt_p95_ms > 300")
    assert tripped(g, F(6, degraded_rate=0.1, rtt_p95_ms=100), F(2, degraded_rate=0.15, rtt_p95_ms=120)) == ""
    assert "degraded_rate 0.5 > 0.2" in tripped(g, F(6, degraded_rate=0.1), F(2, degraded_rate=0.5))
    assert "rtt_p95_ms 400 > 300" in tripped(g, F(6, rtt_p95_ms=100), F(2, rtt_p95_ms=400))
    # over a zero baseline a relative bound has a floor: one blip is not twice nothing
    assert tripped(g, F(6, degraded_rate=0.0), F(2, degraded_rate=0.05)) == ""
    assert tripped(g, F(6, degraded_rate=0.0), F(0, degraded_rate=1.0)) == ""  # nothing on the new model yet
    with pytest.raises(GuardError, match="FIGURE > N"):
        parse_guard("latency is bad")


def test_a_resumed_rollout_waits_for_robots_it_cannot_see_yet_and_fails_them_only_after_a_while():
    plan, on = start(), fleet()
    arrive(on, plan.tick(robots(on), REPLICAS, 0.0)[0])
    plan.tick(robots(on), REPLICAS, 1.0)
    plan.promote(1.0)
    resumed = Plan(plan.status, wall=lambda: "t")  # the router restarted: no telemetry heard yet
    assert resumed.tick({}, REPLICAS, 100.0) == ([], [])
    assert resumed.status.phase == Phase.PROMOTING and "not seen now: waiting" in resumed.status.message
    orders, _ = resumed.tick(robots(on), REPLICAS, 101.0)  # they report: the next step goes, not a doubled one
    assert len(orders) == 2 and resumed.status.steps == 2
    arrive(on, orders)

    def gone() -> dict[str, SeenRobot]:
        return {k: v for k, v in robots(on).items() if k != "arm-7"}

    for t in range(102, 110):
        arrive(on, resumed.tick(gone(), REPLICAS, float(t))[0])
    assert resumed.status.phase == Phase.PROMOTING  # arm-7 is waited for
    _, events = resumed.tick(gone(), REPLICAS, 102.0 + GONE_S + 1)
    assert resumed.status.phase == Phase.COMPLETE and any("arm-7 not seen for" in e for e in events)
    assert "1 failed" in resumed.status.message


def test_a_robot_already_on_the_new_model_counts_as_moved():
    plan, on = start(), fleet()
    on["arm-5"] = (B, "fpB")  # restarted with the new flags
    plan.tick(robots(on), REPLICAS, 0.0)
    assert next(r for r in plan.status.robots if r.robot == "arm-5").state == "moved"
