"""Moving the robot to another model when a fleet's rollout tells it to (a `MoveCommand` on its `move` key). A mixin of
`RemoteInferenceEngine`, run on its network worker between requests (engine/remote.py calls it each pass); the
control thread never waits on it and keeps executing its queue meanwhile.

The rules it keeps (docs/robot.md, "Moving to another model"):
- make before break: a session in the target namespace, on a replica serving exactly the command's checkpoint, is open
  before the current one is given up; a move that fails leaves the robot on its model and session, said once;
- never two models mixed: the old model's queued actions play (staleness bound as always) until the new model's first
  chunk, which replaces the queue; the old session's chunks are refused (its keys undeclared, a new session epoch);
  an RTC prefix is only ever taken from actions of the model that will be asked.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from ..advice import contract_advice
from ..wire.codec import decode
from ..wire.codes import CONTRACT_REFUSALS, Refusal
from ..wire.errors import WireError
from ..wire.keys import Namespace, ServiceKeys
from ..wire.rollout import MoveAck, MoveCommand
from ..wire.text import printable
from .handshake import HandshakeError

if TYPE_CHECKING:
    from .parts import EngineParts
    from .transport import MoveQuery

# the engine's log lines keep one logger name wherever the code lives (users and tests filter on it)
logger = logging.getLogger(__package__ + ".remote")

MAX_FINGERPRINT_LEN = 128
# why a move failed, where the handshake's own words are about a first connection (CLI flags, a restarted server)
_FAILED = {
    Refusal.NO_SERVER: "no replica answered there",
    Refusal.MODEL_MISMATCH: "its replicas serve a different model/checkpoint",
}


def read_move(payload: bytes | None) -> tuple[MoveCommand, ServiceKeys]:
    """The command and its target namespace's keys; ValueError says in one line what is wrong with it."""
    try:
        cmd = decode(MoveCommand, payload)
        keys = ServiceKeys.for_service(cmd.model_id, cmd.revision, cmd.service)
    except WireError as exc:
        raise ValueError(f"malformed move command: {printable(exc, 200)}") from None
    fp = cmd.fingerprint
    if not fp or len(fp) > MAX_FINGERPRINT_LEN or not fp.isprintable():
        raise ValueError("malformed move command: `fingerprint` must name the checkpoint (1-128 printable characters)")
    return cmd, keys


def model_label(model_id: str, revision: str, fingerprint: str) -> str:
    """How a log line or an ack names a model: `<model_id>@<revision> (<fingerprint[:12]>)`."""
    return f"{printable(model_id, 120)}@{printable(revision, 60)} ({printable(fingerprint[:12], 12) or '?'})"


def move_advice(exc: HandshakeError) -> str:
    """What the operator can do about a move that failed, by the refusal's code."""
    code = exc.refusal
    if code == Refusal.NO_SERVER:
        return (
            "start a replica of that model in that namespace (`lerobot-fleet status` lists what runs), then move again"
        )
    if code == Refusal.SERVER_FULL:
        return "its replicas are full: start another replica or raise max_sessions, then move again"
    if code == Refusal.DRAINING:
        return "its replicas are draining: start or undrain one, then move again"
    if code == Refusal.MODEL_MISMATCH:
        return "no replica there serves that checkpoint: check the rollout's target (`lerobot-fleet status`)"
    if code in CONTRACT_REFUSALS:
        return contract_advice(code)
    return "check the target's replicas (`lerobot-fleet status`), then move again"


class Moves:
    """Move methods of `RemoteInferenceEngine`, run on its network worker."""

    _moving: MoveCommand | None  # a move whose first chunk has not merged yet (set by the engine)
    _move_due: tuple[MoveCommand, ServiceKeys] | None  # answered, not performed yet (the newest wins)

    @property
    def handshake_due(self: EngineParts) -> bool:
        """A step would block on a handshake: a re-handshake or a move. A caller stepping many engines on one thread
        steps this one with `handshake=True` on a thread of its own (the fleet simulator)."""
        return self.reconnect.needed or self._move_due is not None

    def _apply_moves(self: EngineParts, perform: bool = True) -> None:
        """Each pass: note a move whose first chunk merged, answer the moves asked since, and (`perform`) make the
        newest one."""
        cmd = self._moving
        if cmd is not None and not self.requests.session_fresh:  # a chunk merged on the target's session
            self._moving = None
            self.counters["moves"] += 1
            logger.info(
                "Moved to model %s on replica %s: first chunk replaced the queue",
                model_label(cmd.model_id, cmd.revision, self.fingerprint),
                self.replica,
            )
            self.report_telemetry(force=True)
        for query in self.transport.move_queries():
            self._answer_move(query)
        due, self._move_due = self._move_due, None
        if due is not None and not perform:
            self._move_due = due
        elif due is not None:
            self._move(*due)

    def _answer_move(self: EngineParts, query: MoveQuery) -> None:
        """Answer at once (a refusal, a no-op, or "moving"), then move, on this worker."""
        try:
            cmd, keys = read_move(query.payload)
        except ValueError as exc:  # nothing else changes
            self.counters["move_refused"] += 1
            logger.warning("Refused a move command: %s", exc)
            query.answer(MoveAck(ok=False, message=str(exc), fingerprint=self.fingerprint))
            return
        target = model_label(cmd.model_id, cmd.revision, cmd.fingerprint)
        here = Namespace(cmd.model_id, cmd.revision, cmd.service) == self.namespace
        if here and cmd.fingerprint == self.fingerprint:
            query.answer(MoveAck(ok=True, message=f"already on {target}", fingerprint=self.fingerprint))
            return
        query.answer(MoveAck(ok=True, message=f"moving to {target}", fingerprint=self.fingerprint))
        self._move_due = (cmd, keys)

    def _move(self: EngineParts, cmd: MoveCommand, keys: ServiceKeys) -> None:
        """Make before break: open the target's session first; only then leave the current one."""
        req = self.session_open_request()
        req.model_id, req.revision, req.service = cmd.model_id, cmd.revision, cmd.service
        req.expect_fingerprint = cmd.fingerprint
        try:
            opened = self.transport.handshake(
                req, min(self.cfg.request_timeout_s, 5.0), cmd.fingerprint, keys=None if keys == self.keys else keys
            )
            session = dataclasses.replace(self.session)  # the current session stays whole until the move is sure
            session.accept(opened, self.action_names, bool(self.cfg.rtc.enabled), repin=cmd.fingerprint)
        except HandshakeError as exc:
            self.counters["move_failed"] += 1
            why = _FAILED.get(exc.code) or printable(exc, 300)
            logger.warning(
                "Move to model %s (service %s) failed: %s. Still on model %s on replica %s: %s",
                model_label(cmd.model_id, cmd.revision, cmd.fingerprint),
                printable(cmd.service, 120),
                why,
                model_label(self.namespace.model_id, self.namespace.revision, self.fingerprint),
                self.replica or "(none)",
                move_advice(exc),
            )
            return
        if keys != self.keys:  # from here on the old session's chunks cannot arrive, and its epoch is past
            self.transport.retarget(keys)
        self.keys, self.namespace, self.model_id = (
            keys,
            Namespace(cmd.model_id, cmd.revision, cmd.service),
            cmd.model_id,
        )
        self.session = session
        self._moving = cmd
        self._session_opened(opened)  # a fresh session: its first chunk replaces the queue
        self.report_telemetry(force=True)  # the fleet router reads the new fingerprint from it

    def _prefix_allowed(self: EngineParts) -> bool:
        """An RTC prefix is taken only from actions of the pinned model: model A's leftovers never guide model B (the
        queue holds one model's actions only: a new session's first chunk replaces it)."""
        head = self.queue.head_meta()
        return head is None or head.fingerprint == self.fingerprint
