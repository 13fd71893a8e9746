"""Replies as small as they can be: robot space only, float16 within a bound; still refused if unsafe."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from lerobot_policy_remote.engine.resend import (
    LARGE_OBS_BYTES,
    RESEND_FIRST_S,
    RESEND_FLOOR_S,
    is_large,
    resend_after_s,
    resend_due,
)
from lerobot_policy_remote.wire.codec import decode, encode, pack
from lerobot_policy_remote.wire.data import ActionChunkMsg, decode_chunk, encode_chunk, float16_fits
from lerobot_policy_remote.wire.errors import WireError
from lerobot_policy_remote.wire.messages import SessionAck, SessionOpen
from lerobot_policy_remote.wire.tensors import encode_tensor


def _chunk(t: int = 50, a: int = 14, scale: float = 30.0) -> ActionChunkMsg:
    rng = np.random.default_rng(0)
    robot = rng.uniform(-scale, scale, (t, a)).astype(np.float32)
    return ActionChunkMsg(robot * 0.1, robot, uuid.uuid4().hex, 123456, 987654321012345, 3.25, 41.5, 2, 0.37)


def test_50x14_float16_robot_only_reply_fits_3kb():
    msg = _chunk()
    full = encode_chunk(msg)
    lean = encode_chunk(msg, dtype="float16", model_space=False)
    assert len(full) > 5600  # the old reply: both spaces, float32
    assert len(lean) <= 3000, len(lean)
    assert len(lean) <= 50 * 14 * 2 + 300  # the tensor plus a small header
    back = decode_chunk(lean)
    assert back.chunk_robot.dtype == np.float32 and back.chunk_model is back.chunk_robot
    assert float(np.abs(back.chunk_robot - msg.chunk_robot).max()) <= 30.0 * 2**-11
    assert back.session_id == msg.session_id and back.seq_id_echo == msg.seq_id_echo


def test_float32_robot_only_is_exact():
    msg = _chunk()
    back = decode_chunk(encode_chunk(msg, model_space=False))
    assert np.array_equal(back.chunk_robot, msg.chunk_robot)


def test_float16_fits_bounds_the_error():
    assert float16_fits(np.array([[1.0, -2.5, 64.0]], np.float32), 0.05)
    assert not float16_fits(np.array([[200.06]], np.float32), 0.05)  # float16 step at 128..256 is 0.125
    assert not float16_fits(np.array([[70000.0]], np.float32), 1e6)  # outside float16 range
    assert not float16_fits(np.array([[np.nan]], np.float32), 1.0)


@pytest.mark.parametrize("bad", [np.inf, np.nan, -np.inf])
def test_non_finite_float16_chunk_is_refused(bad):
    arr = np.zeros((4, 3), np.float16)
    arr[1, 2] = bad
    with pytest.raises(WireError):
        decode_chunk(pack({"chunk_robot": encode_tensor(arr), "session_id": "s"}))


def test_other_dtypes_refused_and_lengths_checked():
    with pytest.raises(WireError):
        decode_chunk(pack({"chunk_robot": encode_tensor(np.zeros((4, 3), np.float64))}))
    with pytest.raises(WireError):
        decode_chunk(
            pack(
                {
                    "chunk_robot": encode_tensor(np.zeros((4, 3), np.float16)),
                    "chunk_model": encode_tensor(np.zeros((5, 3), np.float32)),
                }
            )
        )
    with pytest.raises(WireError):
        decode_chunk(pack({"session_id": "s"}))  # no robot-space chunk at all
    with pytest.raises(ValueError):
        encode_chunk(_chunk(), dtype="bfloat16")


def test_session_fields_are_additive():
    """Old peers: an ack without the new keys reads float32 + both spaces + no sizes; an old open asks nothing."""
    ack = decode(SessionAck, pack({"ok": True}))
    assert (ack.reply_dtype, ack.reply_model_space, ack.image_sizes) == ("float32", True, {})
    req = decode(SessionOpen, pack({"client_uuid": "r1", "action_names": ["a"]}))
    assert (req.reply_dtype, req.reply_max_error, req.reply_robot_only) == ("float32", 0.0, False)
    new = SessionAck(
        True, image_sizes={"observation.images.front": [120, 160]}, reply_dtype="float16", reply_model_space=False
    )
    assert decode(SessionAck, encode(new)) == new


def test_reply_terms():
    from lerobot_policy_remote.server.sessions import reply_terms

    ask = SessionOpen("r1", ["a"], reply_dtype="float16", reply_max_error=0.05, reply_robot_only=True)
    assert reply_terms(ask, rtc_active=False) == ("float16", 0.05, False)
    assert reply_terms(ask, rtc_active=True) == ("float16", 0.05, True)  # RTC merges need model space
    assert reply_terms(SessionOpen("r1", ["a"]), rtc_active=False) == ("float32", 0.0, True)  # old robot: as before
    assert (
        reply_terms(SessionOpen("r1", ["a"], reply_dtype="float16"), rtc_active=False)[0] == "float32"
    )  # no bound given
    assert (
        reply_terms(SessionOpen("r1", ["a"], reply_dtype="float16", reply_max_error=float("inf")), False)[0]
        == "float32"
    )


def test_resend_follows_the_round_trip():
    assert resend_after_s(None) == RESEND_FIRST_S
    assert resend_after_s(0.010) == RESEND_FLOOR_S
    assert resend_after_s(0.200) == pytest.approx(0.6)
    small, large = 10_000, LARGE_OBS_BYTES + 1
    assert is_large(large) and not is_large(small)
    assert not resend_due(body_bytes=small, age_s=0.05, since_last_send_s=0.05, rtt_p50_s=0.02)
    assert resend_due(body_bytes=small, age_s=0.11, since_last_send_s=0.11, rtt_p50_s=0.02)
    assert not resend_due(body_bytes=large, age_s=10.0, since_last_send_s=10.0, rtt_p50_s=0.02)  # BLOCK: never re-sent
    assert not resend_due(body_bytes=small, age_s=None, since_last_send_s=10.0, rtt_p50_s=0.02)
