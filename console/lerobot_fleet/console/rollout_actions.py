"""The rollout steps the per-model screen asks for, run on a worker thread: the command, sent through the source,
and the reply in the result line's words (one `(target, ok, line)` like every other action)."""

from __future__ import annotations

from lerobot_fleet.data.model_compare import ModelFigures
from lerobot_fleet.data.sources.base import FleetSource
from lerobot_fleet.data.sources.rollout import RolloutActor
from lerobot_policy_remote.wire.rollout import RolloutCommand

__all__ = ["CANARY", "ROLLOUT_KINDS", "rollout_command", "run_rollout"]

ROLLOUT_KINDS = ("rollout-start", "rollout-promote", "rollout-abort")
CANARY = 0.1  # the share of the service's robots a start from the console moves first


def rollout_command(kind: str, model: ModelFigures | None, operator: str) -> RolloutCommand | None:
    """The command for `kind`; a start names its model by fingerprint (else revision) in its service. None: a start
    whose model is not shown any more."""
    action = kind.removeprefix("rollout-")
    if action != "start":
        return RolloutCommand(action, requested_by=operator)
    if model is None:
        return None
    return RolloutCommand(
        "start", to=model.fingerprint or model.revision, service=model.service, canary=CANARY, requested_by=operator
    )


def run_rollout(
    source: FleetSource, kind: str, target: str, model: ModelFigures | None, operator: str
) -> list[tuple[str, bool, str]]:
    """Send one rollout step and say how it went (on a worker thread: the query waits for the router)."""
    action = kind.removeprefix("rollout-")
    name = model.label if model is not None else target
    command = rollout_command(kind, model, operator)
    if command is None:
        return [(target, False, f"rollout {action} {name}: FAILED — that model is not shown any more")]
    if not isinstance(source, RolloutActor):
        return [(target, False, f"rollout {action}: FAILED — this console's source sends no commands (fake/replay)")]
    reply = source.rollout(command)
    what = f"rollout {action}" + (f" to {name}" if action == "start" else "")
    said = f" — {reply.message}" if reply.message else ""
    return [(target, reply.ok, f"{what}: {'ok' if reply.ok else 'FAILED'}{said}")]
