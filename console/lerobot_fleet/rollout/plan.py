"""What a rollout does next, from what the fleet shows now (pure: no zenoh, no clock of its own).

The rules it keeps (docs/rollouts.md):
- a step moves at most `step` robots, and never more than the new model's replicas have free seats;
- the next step starts only when every robot of the last one streams from its target or failed: at most one
  step's robots are between two models at any time;
- a robot that streams from the old model again after it moved (it restarted) is moved again, in no new step;
- `abort` moves the robots that moved back to the old model by the same rules, bounded by the old model's seats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.rollout import ModelRef, Phase, RobotMove, RolloutCommand, RolloutRobot, RolloutStatus

ALIVE_S = 5.0  # a robot whose telemetry is older than this is not counted (gone, or not reporting)
GONE_S = 60.0  # a robot still to move that nobody has seen this long fails its move: the rollout does not wait on it
MOVE_TIMEOUT_S = 30.0  # a moving robot that does not stream from its target within this failed its move
MAX_EVENTS = 40
STREAMING = "STREAMING"


@dataclass(frozen=True)
class SeenRobot:
    """A robot as its latest telemetry shows it."""

    robot: str
    ns: Namespace
    fingerprint: str
    state: str
    age_s: float

    @property
    def alive(self) -> bool:
        return self.age_s < ALIVE_S


@dataclass(frozen=True)
class SeenReplica:
    """A replica as its latest status shows it: `seats` free now (0 when cordoned or draining)."""

    replica: str
    ns: Namespace
    fingerprint: str
    seats: int


@dataclass(frozen=True)
class MoveOrder:
    """Tell `robot`, now in namespace `at`, to move to `to` (in `to_ns`)."""

    robot: str
    at: Namespace
    to_ns: Namespace
    to: ModelRef


class RolloutError(ValueError):
    """A command that cannot be carried out; its text says what to do instead, in one line."""


def ref(ns: Namespace, fingerprint: str) -> ModelRef:
    return ModelRef(ns.model_id, ns.revision, fingerprint)


def ns_of(model: ModelRef, service: str) -> Namespace:
    return Namespace(model.model_id, model.revision, service)


def describe(model: ModelRef) -> str:
    return f"{model.model_id}@{model.revision} ({model.fingerprint[:12]})"


def resolve(command: RolloutCommand, robots: Sequence[SeenRobot], replicas: Sequence[SeenReplica]) -> RolloutStatus:
    """A new rollout's status from a `start` command: the target model, the model the service's robots run now, and
    every robot that will move; RolloutError when any of them is missing or ambiguous."""
    to = command.to.strip()
    if not to:
        raise RolloutError("say which model to roll out to: --to REVISION or --to FINGERPRINT")
    if not 0.0 < command.canary <= 1.0:
        raise RolloutError(f"--canary {command.canary:g} is not a share of the robots: give one in (0, 1], e.g. 10%")
    matches = {
        (r.ns, r.fingerprint)
        for r in replicas
        if r.fingerprint
        and (r.ns.revision == to or r.fingerprint.startswith(to))
        and (not command.service or r.ns.service == command.service)
    }
    if not matches:
        raise RolloutError(
            f"no replica serves revision or fingerprint {to!r}: start the new model's replicas first "
            "(lerobot-policy-server), then `lerobot-fleet status` shows their revision and fingerprint"
        )
    if len(matches) > 1:
        names = ", ".join(sorted(f"{ns.service}: {describe(ref(ns, fp))}" for ns, fp in matches))
        raise RolloutError(f"{to!r} names {len(matches)} models ({names}): give --service or a longer fingerprint")
    ((to_ns, to_fp),) = matches
    on_service = [r for r in robots if r.alive and r.ns.service == to_ns.service and r.fingerprint != to_fp]
    sources = {(r.ns, r.fingerprint) for r in on_service if r.fingerprint}
    if not sources:
        raise RolloutError(f"no robot of service {to_ns.service!r} runs another model: nothing to roll out")
    if len(sources) > 1:
        names = ", ".join(sorted(describe(ref(ns, fp)) for ns, fp in sources))
        raise RolloutError(
            f"the robots of service {to_ns.service!r} run {len(sources)} models ({names}): one rollout moves the "
            "robots of one model; finish or abort the other move first"
        )
    ((from_ns, from_fp),) = sources
    chosen = sorted(r.robot for r in on_service if (r.ns, r.fingerprint) == (from_ns, from_fp))
    return RolloutStatus(
        phase=Phase.CANARY.value,
        service=to_ns.service,
        from_model=ref(from_ns, from_fp),
        to_model=ref(to_ns, to_fp),
        canary=command.canary,
        step=max(0, command.step),
        abort_if=command.abort_if,
        started_by=command.requested_by,
        robots=[RolloutRobot(robot=r) for r in chosen],
    )


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def canary_count(status: RolloutStatus) -> int:
    """Robots the canary moves: the share of the rollout's robots, rounded up, at least one."""
    return max(1, math.ceil(status.canary * len(status.robots) - 1e-9))


def step_size(status: RolloutStatus) -> int:
    return status.step if status.step > 0 else canary_count(status)


class Plan:
    """Advances one rollout's status; the caller persists it after every call that returns True or orders."""

    def __init__(self, status: RolloutStatus, wall: Callable[[], str] = utc_now) -> None:
        self.status = status
        self._wall = wall  # the UTC time stamped on each robot's state change (instants shown to people only)
        self._deadline: dict[str, float] = {}  # robot -> monotonic instant its move fails (not persisted: re-armed)
        self._seen_at: dict[str, float] = {}  # robot -> when it was last seen alive (since this plan was loaded)

    # -- commands
    def promote(self, now: float) -> str:
        phase = Phase(self.status.phase)
        if phase != Phase.CANARY:
            raise RolloutError(f"the rollout is {phase.value}: only a canary can be promoted")
        for r in self.status.robots:
            if r.state == RobotMove.FAILED.value:
                self._set(r, RobotMove.WAITING, "retried by promote")
        self.status.phase = Phase.PROMOTING.value
        return f"promoted: the rest of the {len(self.status.robots)} robots move to the new model step by step"

    def abort(self, why: str, now: float) -> str:
        phase = Phase(self.status.phase)
        if phase == Phase.ABORTED or phase == Phase.ABORTING:
            raise RolloutError(f"the rollout is already {phase.value}")
        self.status.phase = Phase.ABORTING.value
        return f"aborting ({why}): every robot that moved goes back to {describe(self.status.from_model)}"

    def refused(self, robot: str, why: str) -> None:
        """The robot did not take its move: it stays where it is, failed, and the step goes on without it."""
        for r in self.status.robots:
            if r.robot == robot:
                self._set(r, RobotMove.FAILED, why)
                self._deadline.pop(robot, None)

    def in_flight(self) -> list[str]:
        return [r.robot for r in self.status.robots if r.state in (RobotMove.MOVING.value, RobotMove.RETURNING.value)]

    # -- the reconcile step
    def tick(
        self, robots: Mapping[str, SeenRobot], replicas: Sequence[SeenReplica], now: float
    ) -> tuple[list[MoveOrder], list[str]]:
        """The moves to send now and the events to log (one line each)."""
        st = self.status
        phase = Phase(st.phase)
        events: list[str] = []
        orders: list[MoveOrder] = []
        old, new = st.from_model, st.to_model
        for r in st.robots:
            seen = robots.get(r.robot)
            if seen is not None and seen.alive:
                r.model = seen.fingerprint
                self._seen_at[r.robot] = now
            self._follow(r, seen, now, events, orders)
        if phase in (Phase.CANARY, Phase.PROMOTING):
            known = {r.robot for r in st.robots}
            for seen in sorted(robots.values(), key=lambda s: s.robot):
                if seen.robot not in known and seen.alive and self._on(seen, old):
                    st.robots.append(RolloutRobot(robot=seen.robot, model=seen.fingerprint))
                    events.append(f"{seen.robot} joined on {describe(old)}: it waits its turn")
        in_flight = self.in_flight()
        if in_flight:
            st.message = f"step {st.steps}: waiting for {', '.join(in_flight[:8])} to stream from the target"
            return orders, events
        if phase.final:
            return orders, events
        back = phase == Phase.ABORTING
        target = old if back else new
        # still to move: waiting robots (or, on abort, those that moved); unseen ones are waited for, up to GONE_S
        pending = [
            r
            for r in st.robots
            if (
                r.state in (RobotMove.MOVED.value, RobotMove.FAILED.value)
                if back
                else r.state == RobotMove.WAITING.value
            )
            and not ((seen := robots.get(r.robot)) is not None and seen.alive and self._on(seen, target))
        ]
        candidates = []
        for r in pending:
            seen = robots.get(r.robot)
            if seen is not None and seen.alive:
                candidates.append(r)
            elif now - self._seen_at.setdefault(r.robot, now) >= GONE_S and r.state != RobotMove.FAILED.value:
                self._set(r, RobotMove.FAILED, f"not seen for {GONE_S:g} s (stopped or gone?)")
                events.append(f"{r.robot} {r.detail}: the rollout goes on without it")
        pending = [r for r in pending if r.state != RobotMove.FAILED.value or back]
        want = len(candidates)
        if phase == Phase.CANARY:
            moved = sum(r.state == RobotMove.MOVED.value for r in st.robots)
            want = min(want, canary_count(st) - moved)
            if canary_count(st) - moved <= 0 or not pending:
                self._finish(phase, events)
                return orders, events
        elif not pending or (back and not candidates and all(r.state == RobotMove.FAILED.value for r in pending)):
            self._finish(phase, events)
            return orders, events
        if want <= 0:
            unseen = len(pending) - len(candidates)
            st.message = f"{unseen} robot(s) still to move are not seen now: waiting for them (up to {GONE_S:g} s)"
            return orders, events
        seats = sum(
            rep.seats
            for rep in replicas
            if rep.fingerprint == target.fingerprint and rep.ns == ns_of(target, st.service)
        )
        take = min(want, step_size(st), seats)
        if take <= 0:
            st.message = (
                f"{want} robot(s) wait: {describe(target)} has no free seat (its replicas are full, cordoned or "
                "draining); add a replica or free seats"
            )
            return orders, events
        st.steps += 1
        chosen = candidates[:take]
        state = RobotMove.RETURNING if back else RobotMove.MOVING
        for r in chosen:
            seen = robots[r.robot]
            self._set(r, state, f"step {st.steps}")
            self._deadline[r.robot] = now + MOVE_TIMEOUT_S
            orders.append(MoveOrder(r.robot, seen.ns, ns_of(target, st.service), target))
        waiting = want - take
        why = (
            ""
            if not waiting
            else f"; {waiting} wait for the next step"
            + (f" (only {seats} free seat(s) on the target)" if seats < min(want, step_size(st)) else "")
        )
        verb = "back to" if back else "to"
        events.append(f"step {st.steps}: moving {', '.join(r.robot for r in chosen)} {verb} {describe(target)}{why}")
        st.message = events[-1]
        return orders, events

    def _follow(
        self, r: RolloutRobot, seen: SeenRobot | None, now: float, events: list[str], orders: list[MoveOrder]
    ) -> None:
        """One robot's state from what it shows: arrived, failed, or (moved, then restarted) back on the old model."""
        st = self.status
        going = {
            RobotMove.MOVING.value: (st.to_model, RobotMove.MOVED),
            RobotMove.RETURNING.value: (st.from_model, RobotMove.RETURNED),
        }
        if r.state in going:
            target, done = going[r.state]
            if seen is not None and seen.alive and self._on(seen, target) and seen.state == STREAMING:
                self._set(r, done, f"streaming from {describe(target)}")
                self._deadline.pop(r.robot, None)
                events.append(f"{r.robot} streams from {describe(target)}")
            elif now >= self._deadline.setdefault(r.robot, now + MOVE_TIMEOUT_S):
                shown = f"{seen.state} on {seen.fingerprint[:12] or '?'}" if seen is not None and seen.alive else "gone"
                self._set(
                    r, RobotMove.FAILED, f"not streaming from {describe(target)} after {MOVE_TIMEOUT_S:g} s ({shown})"
                )
                self._deadline.pop(r.robot, None)
                events.append(f"{r.robot} failed to move: {r.detail}; it stays where it is")
        elif Phase(st.phase) == Phase.ABORTING:
            return
        elif r.state == RobotMove.WAITING.value and self._runs(seen, st.to_model):
            self._set(r, RobotMove.MOVED, f"already on {describe(st.to_model)}")
            events.append(f"{r.robot} already runs {describe(st.to_model)}: counted as moved")
        elif seen is not None and r.state == RobotMove.MOVED.value and self._runs(seen, st.from_model):
            self._set(r, RobotMove.MOVING, "back on the old model (restarted?): moved again")
            self._deadline[r.robot] = now + MOVE_TIMEOUT_S
            orders.append(MoveOrder(r.robot, seen.ns, ns_of(st.to_model, st.service), st.to_model))
            events.append(f"{r.robot} runs {describe(st.from_model)} again (restarted?): moving it again, no new step")

    def _finish(self, phase: Phase, events: list[str]) -> None:
        st = self.status
        counts = {s: sum(r.state == s.value for r in st.robots) for s in RobotMove}
        failed = counts[RobotMove.FAILED]
        tail = f", {failed} failed (see `rollout status`)" if failed else ""
        if phase == Phase.CANARY:
            st.message = (
                f"canary: {counts[RobotMove.MOVED]} robot(s) on {describe(st.to_model)}, "
                f"{counts[RobotMove.WAITING]} on {describe(st.from_model)}{tail}: compare, then promote or abort"
            )
            return
        if phase == Phase.PROMOTING:
            st.phase = Phase.COMPLETE.value
            st.message = f"complete: {counts[RobotMove.MOVED]} robot(s) on {describe(st.to_model)}{tail}"
        elif phase == Phase.ABORTING:
            st.phase = Phase.ABORTED.value
            st.message = f"aborted: every robot is back on {describe(st.from_model)}{tail}"
        events.append(st.message)

    @staticmethod
    def _on(seen: SeenRobot, model: ModelRef) -> bool:
        return seen.fingerprint == model.fingerprint

    @staticmethod
    def _runs(seen: SeenRobot | None, model: ModelRef) -> bool:
        """The robot is seen now, running `model`."""
        return seen is not None and seen.alive and seen.fingerprint == model.fingerprint

    def _set(self, r: RolloutRobot, state: RobotMove, detail: str) -> None:
        r.state, r.detail, r.since = state.value, detail, self._wall()
