"""What the robot does when no fresh action is queued (pure: memory only, control thread)."""

from __future__ import annotations

import torch

from .config import FallbackBehavior


def fallback_action(fb: FallbackBehavior, last_action: torch.Tensor | None, vel_mask: torch.Tensor, streaming_began: bool) -> torch.Tensor | None:
    """None means "send nothing" (the robot holds its last commanded position).

    Before the first chunk of an episode there is nothing to repeat or to zero, whatever the fallback.
    """
    if not streaming_began or fb is FallbackBehavior.HOLD:
        return None
    if fb is FallbackBehavior.REPEAT_LAST:
        return last_action.clone() if last_action is not None else None
    if fb is FallbackBehavior.ZERO and bool(vel_mask.any()):
        if last_action is None and not bool(vel_mask.all()):
            return None  # positions unknown: zeroing would command joints to 0
        base = last_action.clone() if last_action is not None else torch.zeros(len(vel_mask))
        base[vel_mask] = 0.0
        return base
    return None
