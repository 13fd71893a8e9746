"""Rollout bodies: moving robots from one model to another under a running fleet (docs/rollouts.md).

Two conversations, both queries:
- operator -> fleet router, on `ROLLOUT_CONTROL_KEY` (start / promote / abort) and `ROLLOUT_STATUS_KEY` (read):
  `RolloutCommand` in, `RolloutReply` (with the whole `RolloutStatus`) out. The router keeps the state on disk.
- fleet router -> robot, on the robot's `move` key in the namespace it runs in now: `MoveCommand` in, `MoveAck`
  out. The robot acks at once and moves on its network worker (engine/moves.py).

Stdlib only, like `messages.py`: the console and the verbs load it. Every field added later has a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Phase(StrEnum):
    """Where a rollout stands. `canary` and `promoting` move robots to the new model, `aborting` back to the old one;
    `complete` and `aborted` are final (a new `start` may follow)."""

    CANARY = "canary"
    PROMOTING = "promoting"
    COMPLETE = "complete"
    ABORTING = "aborting"
    ABORTED = "aborted"

    @property
    def final(self) -> bool:
        return self in (Phase.COMPLETE, Phase.ABORTED)


class RobotMove(StrEnum):
    """One robot's place in a rollout."""

    WAITING = "waiting"  # on the old model, not chosen yet
    MOVING = "moving"  # told to move to the new model; not streaming from it yet
    MOVED = "moved"  # streaming from the new model
    RETURNING = "returning"  # told to move back (abort); not streaming from the old model yet
    RETURNED = "returned"  # streaming from the old model again
    FAILED = "failed"  # did not stream from its target within the step's time; left where it is, said why


@dataclass
class ModelRef:
    """A model as the fleet names it: its namespace's model id and revision, and the checkpoint's fingerprint."""

    model_id: str = ""
    revision: str = ""
    fingerprint: str = ""


@dataclass
class MoveCommand:
    """Fleet router -> robot: open a session in `(model_id, revision, service)` on a replica serving `fingerprint`,
    and from then on refuse every other model. The first chunk of the new model replaces the robot's queue."""

    model_id: str
    revision: str
    service: str
    fingerprint: str
    rollout_id: str = ""
    reason: str = ""
    requested_by: str = ""


@dataclass
class MoveAck:
    ok: bool
    message: str = ""
    fingerprint: str = ""  # the model the robot ran when it answered


@dataclass
class RolloutCommand:
    """Operator -> fleet router. `to`: a revision or a fingerprint (or its first characters) that at least one
    replica of the service serves; `canary`: the share of the service's robots `start` moves (0 < canary <= 1);
    `step`: robots per promote/abort step (0: as many as the canary moved); `abort_if`: the guard (docs/rollouts.md)."""

    action: str  # start | promote | abort | status
    to: str = ""
    service: str = ""  # the service name, when the fleet runs several
    canary: float = 0.1
    step: int = 0
    abort_if: str = ""
    requested_by: str = ""  # user@host of the operator: the router logs it with every step


@dataclass
class RolloutRobot:
    robot: str
    state: str = RobotMove.WAITING.value
    model: str = ""  # the fingerprint its telemetry reported last
    since: str = ""  # UTC time of the last state change (ISO 8601)
    detail: str = ""


@dataclass
class RolloutStatus:
    rollout_id: str = ""  # "" : no rollout ever started on this router
    phase: str = ""
    service: str = ""
    from_model: ModelRef = field(default_factory=ModelRef)
    to_model: ModelRef = field(default_factory=ModelRef)
    canary: float = 0.0
    step: int = 0
    abort_if: str = ""
    started_by: str = ""
    started_at: str = ""
    updated_at: str = ""
    robots: list[RolloutRobot] = field(default_factory=list)
    steps: int = 0  # steps taken so far (each moves at most `step` robots; a restart resumes the count)
    events: list[str] = field(default_factory=list)  # the latest step explanations, oldest first
    message: str = ""  # what the rollout does now, in one line


@dataclass
class RolloutReply:
    ok: bool
    message: str = ""
    status: RolloutStatus = field(default_factory=RolloutStatus)
