"""Unit tests of reply checks (engine/validate.py): which request a chunk answers, and whether it is safe."""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_policy_remote.engine.request import Outstanding
from lerobot_policy_remote.engine.validate import answers, chunk_problem
from lerobot_policy_remote.wire.data import ActionChunkMsg
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION

OUT = Outstanding(seq_id=7, mono_ns=123, t_obs=1.0, t_send=1.0, idx_before=0, episode_id=2, epoch=3)


def header(seq=7, episode=2, epoch=3) -> Header:
    return Header(SCHEMA_VERSION, MsgType.CHUNK, seq, episode, 123, epoch)


def chunk(arr=None, **kw) -> ActionChunkMsg:
    arr = np.zeros((5, 3), np.float32) if arr is None else arr
    base = {"chunk_model": arr, "chunk_robot": arr, "session_id": "s", "seq_id_echo": 7, "client_mono_ns_echo": 123}
    return ActionChunkMsg(**{**base, **kw})


def test_answers_only_the_request_in_flight_of_this_session_and_episode():
    assert answers(header(), OUT, epoch=3, episode_id=2)
    assert not answers(header(seq=6), OUT, 3, 2)  # an older request
    assert not answers(header(epoch=2), OUT, 3, 2)  # a previous session
    assert not answers(header(episode=1), OUT, 3, 2)  # the previous episode
    assert not answers(header(), None, 3, 2)  # nothing in flight


def test_a_good_chunk_has_no_problem():
    assert chunk_problem(chunk(), session_id="s", action_dim=3, outstanding=OUT) == ""
    assert (
        chunk_problem(chunk(seq_id_echo=0, client_mono_ns_echo=0), session_id="s", action_dim=3, outstanding=OUT) == ""
    )


@pytest.mark.parametrize(
    ("msg", "why"),
    [
        (chunk(session_id="someone-else"), "not ours"),
        (chunk(np.zeros((5, 4), np.float32)), "wrong shape"),
        (chunk(chunk_model=np.zeros((4, 3), np.float32)), "wrong shape"),
        (chunk(np.array([[0, np.nan, 0]] * 5, np.float32)), "NaN/Inf"),
        (chunk(np.array([[0, np.inf, 0]] * 5, np.float32)), "NaN/Inf"),
        (chunk(seq_id_echo=6), "echo"),
        (chunk(client_mono_ns_echo=999), "echo"),
    ],
    ids=["foreign_session", "wrong_width", "model_robot_lengths", "nan", "inf", "seq_echo", "mono_echo"],
)
def test_unsafe_chunks_are_named(msg, why):
    assert why in chunk_problem(msg, session_id="s", action_dim=3, outstanding=OUT)
