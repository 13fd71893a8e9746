"""The codes the two sides exchange: why a session open was refused, and what an event on the action key says.

`StrEnum`s: a member *is* its string value (equal, same hash, encoded by msgpack and JSON as a plain
string), so the wire format is unchanged and a peer's plain-string code compares equal to the member.
Match codes by value, never by searching a message's text. Standard library only (the control plane
stays torch-, numpy- and cv2-free).
"""

from __future__ import annotations

from enum import StrEnum


class Refusal(StrEnum):
    """`SessionAck.code`: `ok`, or why the server refused the session; also `HandshakeError.code`."""

    OK = "ok"
    DRAINING = "draining"  # this replica is shutting down: try another
    SERVER_FULL = "server_full"  # max_sessions reached (checked last: the contract passed)
    CORDONED = "cordoned"  # an operator cordoned this replica: it admits no new sessions, try another
    # Contract mismatches: the robot cannot use this service as configured (fatal for the rollout).
    SCHEMA_MISMATCH = "schema_mismatch"
    MODEL_MISMATCH = "model_mismatch"
    ACTION_MISMATCH = "action_mismatch"
    ACTION_ORDER_UNCHECKED = "action_order_unchecked"  # strict_action_names and the policy names no actions
    CAMERA_MISMATCH = "camera_mismatch"
    STATE_DIM_MISMATCH = "state_dim_mismatch"
    TASK_MISMATCH = "task_mismatch"
    FPS_MISMATCH = "fps_mismatch"
    BAD_REQUEST = "bad_request"  # the session open itself was malformed
    IDENTITY_MISMATCH = "identity_mismatch"  # the body's client_uuid is not the robot id in the key it came on
    # Robot-side outcomes of a handshake (never sent by a server).
    NO_SERVER = "no_server"  # no replica answered the status query
    REFUSED = "refused"  # every replica was tried; `HandshakeError.last` says why the last one said no

    @classmethod
    def parse(cls, code: str) -> Refusal | None:
        """A code received from a peer -> its member; None for a code this version does not know."""
        try:
            return cls(code)
        except ValueError:
            return None


CONTRACT_REFUSALS: frozenset[Refusal] = frozenset(
    {
        Refusal.ACTION_MISMATCH,
        Refusal.ACTION_ORDER_UNCHECKED,
        Refusal.CAMERA_MISMATCH,
        Refusal.STATE_DIM_MISMATCH,
        Refusal.SCHEMA_MISMATCH,
        Refusal.MODEL_MISMATCH,
        Refusal.TASK_MISMATCH,
        Refusal.FPS_MISMATCH,
        Refusal.BAD_REQUEST,
        Refusal.IDENTITY_MISMATCH,
    }
)
"""Refusals that no other replica of the same service would lift: the rollout cannot go on."""


class EventKind(StrEnum):
    """`EventMsg.event`: what the server tells a robot on its action key, besides chunks."""

    UNKNOWN_SESSION = "unknown_session"  # no session for this robot on this replica: re-handshake
    DRAINING = "draining"  # the replica is draining: move to another one
    BAD_REQUEST = "bad_request"  # this observation was refused (the message says why)
    ERROR = "error"  # inference failed for this observation
