"""The fleet router's rollout controller: answers the rollout keys, watches the fleet, sends each step's moves.

It runs in the `lerobot-fleet router` process, on the router's own Zenoh session, so the rollout lives where the fleet
lives: a console or a verb started later reads it there, and its state file survives a router restart. Zenoh
callbacks only deposit (telemetry, liveliness, control queries) or answer from memory (status); one thread decides
(`plan.Plan`), sends the moves and writes the state.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import zenoh

from lerobot_policy_remote.discovery import free_seats, query_statuses
from lerobot_policy_remote.wire.codec import decode, encode
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.keys import ROLLOUT_CONTROL_KEY, ROLLOUT_STATUS_KEY, Namespace, ServiceKeys, parse_key
from lerobot_policy_remote.wire.messages import RobotTelemetry
from lerobot_policy_remote.wire.rollout import (
    MoveAck,
    MoveCommand,
    Phase,
    RobotMove,
    RolloutCommand,
    RolloutReply,
    RolloutStatus,
)
from lerobot_policy_remote.wire.text import printable

from ..data.model_compare import ModelFigures, ModelWindow
from ..data.store import FleetStore
from . import state_file
from .guard import GuardError, parse_guard, tripped
from .plan import MAX_EVENTS, MoveOrder, Plan, RolloutError, SeenReplica, SeenRobot, describe, resolve, utc_now

logger = logging.getLogger(__name__)
ANY = ServiceKeys.any()
TICK_S = 0.5
MOVE_ACK_TIMEOUT_S = 3.0
GUARD_AFTER_S = 10.0  # the guard judges a new model only once its first robot streamed from it this long


class _Declared(Protocol):
    def undeclare(self) -> None: ...


class RolloutController:
    """One per router. `say`: where each step's line goes (the router's log: who, what, when)."""

    def __init__(
        self,
        session: zenoh.Session,
        path: Path,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._session = session
        self._path = path
        self._say = say
        self._clock = clock
        # the guard's figures are the console's: the same store and per-model window, fed from what this router sees
        self._store = FleetStore(clock=clock, router="rollout", connection="connected")
        self._window = ModelWindow()
        self._fed: dict[str, float] = {}  # robot -> receipt time of the telemetry sample last fed to the store
        self._tokens: collections.deque[tuple[str, bool, Namespace]] = collections.deque(maxlen=4096)
        self._lock = threading.Lock()
        self._plan: Plan | None = None
        self._reply = encode(RolloutReply(True, "no rollout has been started on this router"))
        self._telemetry: dict[str, tuple[str, bytes, float]] = {}  # robot -> (key, payload, received at)
        self._alive: dict[str, Namespace] = {}  # robot -> the namespace of its liveliness token
        self._queries: collections.deque[zenoh.Query] = collections.deque(maxlen=64)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._objs: list[_Declared] = []
        self._thread: threading.Thread | None = None
        self._streamed_since: float | None = None
        self._saved = b""

    # -- lifecycle
    def start(self) -> RolloutController:
        status, problem = state_file.load(self._path)
        if problem:
            self._say(f"rollout: {problem}")
        if status is not None:
            self._plan = Plan(status)
            self._publish()
            if not Phase(status.phase).final:
                self._say(f"rollout {status.rollout_id}: resumed from {self._path} ({status.phase}: {status.message})")
        s = self._session
        self._objs += [
            s.declare_subscriber(ANY.robot("*", "telemetry"), self._on_telemetry),
            s.liveliness().declare_subscriber(ANY.robot("*", "alive"), self._on_alive, history=True),
            s.declare_queryable(ROLLOUT_STATUS_KEY, self._on_status),
            s.declare_queryable(ROLLOUT_CONTROL_KEY, self._on_control),
        ]
        self._thread = threading.Thread(target=self._run, name="rollout", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        for obj in self._objs:
            try:
                obj.undeclare()
            except Exception as exc:  # the session closed first: nothing left to release
                logger.debug("undeclare: %s", exc)

    # -- zenoh callbacks: deposit, or answer from memory
    def _on_telemetry(self, sample: zenoh.Sample) -> None:
        key = str(sample.key_expr)
        robot = key.rsplit("/", 2)[-2]
        self._telemetry[robot] = (key, sample.payload.to_bytes(), self._clock())

    def _on_alive(self, sample: zenoh.Sample) -> None:
        try:
            parsed = parse_key(str(sample.key_expr))
        except WireError:
            return
        if parsed.robot is None:
            return
        alive = sample.kind == zenoh.SampleKind.PUT
        self._tokens.append((parsed.robot, alive, parsed.namespace))
        if alive:
            self._alive[parsed.robot] = parsed.namespace
        elif self._alive.get(parsed.robot) == parsed.namespace:
            self._alive.pop(parsed.robot, None)  # a moved robot's old token leaves after its new one came

    def _on_status(self, query: zenoh.Query) -> None:
        with query:
            query.reply(ROLLOUT_STATUS_KEY, self._reply)

    def _on_control(self, query: zenoh.Query) -> None:
        self._queries.append(query)
        self._wake.set()

    # -- the controller's thread
    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(TICK_S)
            self._wake.clear()
            try:
                while self._queries:
                    self._command(self._queries.popleft())
                self._tick()
            except Exception as exc:  # one bad pass is logged; the next one starts from the fleet as it is then
                logger.exception("rollout pass failed: %s", exc)

    def _command(self, query: zenoh.Query) -> None:
        try:
            cmd = decode(RolloutCommand, query.payload.to_bytes() if query.payload is not None else None)
            message = self._apply(cmd)
            reply = RolloutReply(True, message)
        except (WireError, RolloutError, GuardError) as exc:
            reply = RolloutReply(False, str(exc))
        if self._plan is not None:
            reply.status = self._plan.status
        with query:
            query.reply(ROLLOUT_CONTROL_KEY, encode(reply))

    def _apply(self, cmd: RolloutCommand) -> str:
        who = printable(cmd.requested_by, 80) or "an operator"
        plan = self._plan
        if cmd.action == "status":
            return plan.status.message if plan else "no rollout"
        if cmd.action == "start":
            if plan is not None and not Phase(plan.status.phase).final:
                raise RolloutError(
                    f"rollout {plan.status.rollout_id} is {plan.status.phase}: "
                    "promote or abort it before starting another"
                )
            parse_guard(cmd.abort_if)
            status = resolve(cmd, list(self._robots().values()), self._replicas())
            now = utc_now()
            status.rollout_id = "ro-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
            status.started_at = status.updated_at = now
            self._plan = Plan(status)
            self._streamed_since = None
            text = (
                f"started by {who}: canary {status.canary:.0%} of {len(status.robots)} robot(s) of service "
                f"{status.service!r} from {describe(status.from_model)} to {describe(status.to_model)}"
                + (f", abort if {status.abort_if}" if status.abort_if else "")
            )
        elif plan is None:
            raise RolloutError("no rollout has been started on this router: `lerobot-fleet rollout start --to NEW`")
        elif cmd.action == "promote":
            text = f"{plan.promote(self._clock())} (by {who})"
        elif cmd.action in ("abort", "rollback"):
            text = plan.abort(f"by {who}", self._clock())
        else:
            raise RolloutError(f"unknown rollout action {cmd.action!r}: start, status, promote or abort")
        self._event(text)
        self._tick()
        return text

    def _tick(self) -> None:
        plan = self._plan
        if plan is None or Phase(plan.status.phase).final:
            return
        self._ask_telemetry(plan.in_flight())
        robots = self._robots()
        orders, events = plan.tick(robots, self._replicas(), self._clock())
        for line in events:
            self._event(line)
        self._send(orders)
        self._guard()
        self._save()

    def _guard(self) -> None:
        plan = self._plan
        if plan is None or not plan.status.abort_if:
            return
        if Phase(plan.status.phase) not in (Phase.CANARY, Phase.PROMOTING):
            return
        moved = any(r.state == RobotMove.MOVED.value for r in plan.status.robots)
        now = self._clock()
        if not moved:
            self._streamed_since = None
            return
        self._streamed_since = self._streamed_since or now
        if now - self._streamed_since < GUARD_AFTER_S:
            return
        old, new = self._compare(plan.status)
        why = tripped(parse_guard(plan.status.abort_if), old, new)
        if why:
            self._event(plan.abort(why, now))

    def _send(self, orders: list[MoveOrder]) -> None:
        """Each order's move query, all asked before any answer is read (a step's robots move together)."""
        plan = self._plan
        if plan is None or not orders:
            return
        st = plan.status
        asked = []
        for order in orders:
            cmd = MoveCommand(
                order.to.model_id,
                order.to.revision,
                order.to_ns.service,
                order.to.fingerprint,
                rollout_id=st.rollout_id,
                reason=f"rollout {st.rollout_id} ({st.phase})",
                requested_by=st.started_by,
            )
            key = order.at.keys.robot(order.robot, "move")
            asked.append((order, self._session.get(key, payload=encode(cmd), timeout=MOVE_ACK_TIMEOUT_S)))
        for order, replies in asked:
            why = "did not answer the move (not connected, or a robot too old to move)"
            for reply in replies:
                if reply.ok is None:
                    continue
                try:
                    ack = decode(MoveAck, reply.ok.payload.to_bytes())
                except WireError as exc:
                    why = f"answered the move with a malformed ack ({exc})"
                    continue
                why = "" if ack.ok else f"refused the move: {printable(ack.message, 200)}"
                break
            if why:
                plan.refused(order.robot, why)
                self._event(f"{order.robot} {why}")

    # -- what the fleet shows
    def _ask_telemetry(self, robots: list[str]) -> None:
        """A moving robot's report, asked now: a quiet robot's telemetry slows down, and the step waits on it."""
        asked = [self._session.get(ANY.robot(r, "telemetry"), timeout=TICK_S) for r in robots]
        for replies in asked:
            for reply in replies:
                if reply.ok is not None:
                    self._on_telemetry(reply.ok)

    def _compare(self, status: RolloutStatus) -> tuple[ModelFigures | None, ModelFigures | None]:
        """The old and the new model's figures now, as the console's per-model view computes them."""
        figures = self._window.advance(self._store.capture())[0]

        def of(fingerprint: str) -> ModelFigures | None:
            return next((m for m in figures if m.service == status.service and m.fingerprint == fingerprint), None)

        return of(status.from_model.fingerprint), of(status.to_model.fingerprint)

    def _robots(self) -> dict[str, SeenRobot]:
        """Every robot as its latest telemetry shows it; the new samples and tokens also go into the guard's store."""
        while self._tokens:
            robot, alive, token_ns = self._tokens.popleft()
            self._store.on_robot_alive(robot, alive, token_ns)
        now = self._clock()
        out = {}
        for robot, (key, payload, at) in list(self._telemetry.items()):
            try:
                t = decode(RobotTelemetry, payload)
                ns = parse_key(key).namespace
            except WireError:
                continue
            if self._fed.get(robot) != at:
                self._fed[robot] = at
                self._store.on_telemetry(t, ns)
            alive_ns = self._alive.get(robot)
            age = now - at if alive_ns is None else 0.0
            out[robot] = SeenRobot(robot, alive_ns or ns, t.fingerprint, t.state, age)
        return out

    def _replicas(self) -> list[SeenReplica]:
        return [
            SeenReplica(st.replica, ns, st.model.fingerprint, 0 if st.draining else free_seats(st))
            for st, ns in query_statuses(self._session, 1.0)
        ]

    # -- the state, shown and kept
    def _event(self, text: str) -> None:
        plan = self._plan
        if plan is None:
            return
        st = plan.status
        st.events = (st.events + [f"{datetime.now(UTC).strftime('%H:%M:%S')} {text}"])[-MAX_EVENTS:]
        self._say(f"rollout {st.rollout_id}: {text}")
        self._save()

    def _save(self) -> None:
        """Write the state when it changed (each tick asks; most change nothing)."""
        plan = self._plan
        if plan is None:
            return
        stamp, plan.status.updated_at = plan.status.updated_at, ""
        body = encode(plan.status)
        if body == self._saved:
            plan.status.updated_at = stamp
            return
        self._saved = body
        plan.status.updated_at = utc_now()
        self._publish()
        try:
            state_file.save(self._path, plan.status)
        except OSError as exc:
            logger.warning("cannot write the rollout state %s: %s", self._path, exc)

    def _publish(self) -> None:
        plan = self._plan
        if plan is not None:
            self._reply = encode(RolloutReply(True, plan.status.message, plan.status))
