"""Checking what the robot receives (pure): which request a reply answers, and whether a chunk is safe.

A robot never executes a chunk that is not for the request it is waiting for, not for its session,
of the wrong shape, non-finite, or whose echo does not match (tests/engine/test_validate.py).
"""

from __future__ import annotations

import numpy as np

from ..wire.codec import decode
from ..wire.data import ActionChunkMsg, decode_chunk
from ..wire.errors import WireError
from ..wire.header import Header, MsgType
from ..wire.messages import EventMsg
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
    if not (np.isfinite(robot).all() and (model is robot or np.isfinite(model).all())):
        return "NaN/Inf values"
    if msg.seq_id_echo not in (0, outstanding.seq_id) or (
        msg.client_mono_ns_echo and msg.client_mono_ns_echo != outstanding.mono_ns
    ):
        return "echo does not match the request"
    return ""


class InboundError(Exception):
    """A message on the action key that is dropped; `counter` names what was wrong with it."""

    def __init__(self, counter: str, message: str) -> None:
        super().__init__(message)
        self.counter = counter


def read_inbound(payload: bytes, attachment: bytes | None) -> tuple[Header, EventMsg | None]:
    """Header + decoded event (None for a chunk, decoded only if it answers the request in flight)."""
    try:
        header = Header.unpack(attachment)
    except WireError as exc:
        raise InboundError("bad_header", f"bad header on the action key: {exc}") from None
    if header.msg_type is MsgType.CHUNK:
        return header, None
    if header.msg_type is not MsgType.EVENT:
        raise InboundError("bad_header", f"unexpected {header.msg_type.name} message on the action key")
    try:
        return header, decode(EventMsg, payload)
    except WireError as exc:
        raise InboundError("bad_event", f"malformed event: {exc}") from None


def read_chunk(
    payload: bytes, *, session_id: str, action_dim: int, outstanding: Outstanding
) -> tuple[ActionChunkMsg | None, str, bool]:
    """Decode + check a chunk that answers `outstanding`: (chunk, "", False) or (None, why it is refused, foreign).

    `foreign` is True when the chunk is well formed but names another session: the server no longer holds
    ours (replaced, restarted), so the caller re-handshakes at once instead of waiting on a dead session.
    """
    try:
        msg = decode_chunk(payload)
    except WireError as exc:
        return None, str(exc), False
    problem = chunk_problem(msg, session_id=session_id, action_dim=action_dim, outstanding=outstanding)
    return (None, problem, msg.session_id != session_id) if problem else (msg, "", False)
