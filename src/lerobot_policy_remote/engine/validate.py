"""Checking what the robot receives (pure): which request a reply answers, and whether a chunk is safe.

A robot never executes a chunk that is not for the request it is waiting for, not for its session,
of the wrong shape, non-finite, or whose echo does not match (tests/engine/test_validate.py).
"""

from __future__ import annotations

import numpy as np

from ..wire.data import ActionChunkMsg
from ..wire.header import Header
from .request import Outstanding


def answers(header: Header, outstanding: Outstanding | None, epoch: int, episode_id: int) -> bool:
    """True when a chunk's header answers the request in flight of this session and episode."""
    return (
        outstanding is not None
        and header.seq_id == outstanding.seq_id
        and header.session_epoch == epoch
        and header.episode_id == episode_id
    )


def chunk_problem(msg: ActionChunkMsg, *, session_id: str, action_dim: int, outstanding: Outstanding) -> str:
    """Why this decoded chunk must not be executed, or "" when it is safe."""
    model, robot = msg.chunk_model, msg.chunk_robot
    if msg.session_id != session_id:
        return f"session_id {msg.session_id!r} is not ours ({session_id!r})"
    if robot.ndim != 2 or robot.shape[1] != action_dim or model.ndim != 2 or model.shape[0] != robot.shape[0]:
        return f"wrong shape {tuple(robot.shape)} (expected (T, {action_dim}))"
    if not (np.isfinite(robot).all() and np.isfinite(model).all()):
        return "NaN/Inf values"
    if msg.seq_id_echo not in (0, outstanding.seq_id) or (msg.client_mono_ns_echo and msg.client_mono_ns_echo != outstanding.mono_ns):
        return "echo does not match the request"
    return ""
