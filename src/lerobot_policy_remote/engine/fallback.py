"""What the robot does when no fresh action is queued (pure: memory only, control thread)."""

from __future__ import annotations

import torch

from .config import FallbackBehavior


def fallback_action(
    fb: FallbackBehavior,
    last_action: torch.Tensor | None,
    vel_mask: torch.Tensor,
    streaming_began: bool,
    measured: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """None means "send nothing" (the robot holds its last commanded position).

    - `hold`: always None.
    - `repeat_last`: the last action executed in this episode; None before the episode's first chunk.
    - `zero`: from the first tick of every episode (also before the first chunk, and through a slow or
      failed first request), every velocity feature (`.vel`) is commanded 0, because for a velocity joint
      "send nothing" means "keep the last velocity". Position features hold: the last command of this episode,
      or before any, `measured` (the positions of the latest observation, in action order). None when a
      position is unknown (a partial command cannot be sent) and on a position-only robot (nothing to zero).
    """
    if fb is FallbackBehavior.HOLD:
        return None
    if fb is FallbackBehavior.REPEAT_LAST:
        return last_action.clone() if streaming_began and last_action is not None else None
    if fb is FallbackBehavior.ZERO and bool(vel_mask.any()):
        if bool(vel_mask.all()):
            return torch.zeros(len(vel_mask))
        base = last_action if last_action is not None else measured
        if base is None or bool(torch.isnan(base[~vel_mask]).any()):
            return None  # a position we do not know: zeroing would command it to 0
        out = base.clone()
        out[vel_mask] = 0.0
        return out
    return None


def zero_warning(fb: FallbackBehavior, action_names: list[str]) -> str:
    """The start-time warning for `zero` on a robot it cannot help (no velocity features); "" otherwise."""
    if fb is FallbackBehavior.ZERO and not any(n.endswith(".vel") for n in action_names):
        return (
            "--inference.fallback=zero has no effect on this robot: its actions are all positions "
            f"({', '.join(action_names[:4])}{', ...' if len(action_names) > 4 else ''}), so it holds exactly like "
            "fallback=hold. zero is for velocity joints (.vel features), where sending nothing keeps the last velocity"
        )
    return ""
