"""The fleet router's rollout status as the console last read it, and how old that read is.

Every figure the console shows is true now or marked old: the rollout source reads the status about once a
second, and a view older than `ROLLOUT_OLD_S`, or whose latest read failed, shows the last good one as old.
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_policy_remote.wire.rollout import ModelRef, RolloutStatus

__all__ = ["MOVE_STATES", "ROLLOUT_OLD_S", "RolloutRead", "RolloutReads", "model_text", "robot_counts", "summary_lines"]

ROLLOUT_OLD_S = 3.0  # a rollout status read longer ago than this is shown as old


@dataclass(frozen=True)
class RolloutRead:
    """The last good status and how the latest read went; `age_s` relative to when it was copied out."""

    status: RolloutStatus | None = None  # the last status a read returned (None: none returned yet)
    ok: bool = False  # the latest read returned a status
    error: str = ""  # why the latest read failed
    age_s: float | None = None  # since the last good read

    @property
    def is_old(self) -> bool:
        """The figures are not true now: the latest read failed, or the last good one is older than 3 s."""
        return not self.ok or self.age_s is None or self.age_s > ROLLOUT_OLD_S


class RolloutReads:
    """The store's record of the reads (changed and read under the store's lock; instants on its clock)."""

    def __init__(self) -> None:
        self.status: RolloutStatus | None = None
        self.error = ""
        self.good_at: float | None = None
        self.ok = False

    def read(self, status: RolloutStatus | None, error: str, now: float) -> None:
        """A read at `now`: a status, or None and why it failed (the last good status is kept, as old)."""
        self.ok = status is not None
        self.error = "" if status is not None else (error or "no reply")
        if status is not None:
            self.status, self.good_at = status, now

    def at(self, now: float) -> RolloutRead:
        age = None if self.good_at is None else max(0.0, now - self.good_at)
        return RolloutRead(self.status, self.ok, self.error, age)


MOVE_STATES = ("waiting", "moving", "moved", "returning", "returned", "failed")  # wire/rollout.RobotMove, in order


def model_text(ref: ModelRef) -> str:
    """`model@revision fingerprint[:12]`, as the rollout names a model."""
    fp = f" {ref.fingerprint[:12]}" if ref.fingerprint else ""
    return f"{ref.model_id or '?'}@{ref.revision or '?'}{fp}"


def robot_counts(status: RolloutStatus) -> dict[str, int]:
    """Robots per move state, every state present (0 when none), in `MOVE_STATES` order; others after."""
    counts = dict.fromkeys(MOVE_STATES, 0)
    for r in status.robots:
        counts[r.state] = counts.get(r.state, 0) + 1
    return counts


def summary_lines(status: RolloutStatus) -> list[str]:
    """The rollout in three lines: phase and models, robots per state, what it does now (as both the console and
    `lerobot-fleet rollout status` write it)."""
    if not status.rollout_id:
        return ["no rollout has started on this router"]
    service = f" service {status.service!r}" if status.service else ""
    canary = f"canary {100 * status.canary:g}%" + (f", step {status.step}" if status.step else "")
    guard = f", abort if {status.abort_if}" if status.abort_if else ""
    return [
        f"rollout {status.rollout_id}: {status.phase or '?'}{service}  "
        f"{model_text(status.from_model)} -> {model_text(status.to_model)}  {canary}{guard}",
        "robots: " + "  ".join(f"{n} {state}" for state, n in robot_counts(status).items()),
        status.message or "—",
    ]
