"""Pure pieces of the server: the audit-line builder, typed reason codes, pass statistics, the batch pick."""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_policy_remote.server.audit import audit_line
from lerobot_policy_remote.server.scheduler import MicroBatch, RoundRobin, scheduler_for
from lerobot_policy_remote.server.sessions import Session
from lerobot_policy_remote.server.worker import PassStats
from lerobot_policy_remote.wire.codec import pack
from lerobot_policy_remote.wire.data import ObservationMsg, decode_observation, encode_observation
from lerobot_policy_remote.wire.errors import Reason, WireError
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.limits import WireLimits
from lerobot_policy_remote.wire.tensors import encode_tensor


def test_audit_line_takes_ids_from_the_header_or_the_session():
    s = Session("sid", "robot-1", None, None, 1, episode_id=7)
    h = Header(1, MsgType.OBS, 42, 9, 123, 2)
    ok = audit_line(s, h, "ok", "rep", queue_wait_s=0.0012345, infer_s=0.02, chunk_len=50, superseded=3)
    assert (ok.session_id, ok.client_uuid, ok.seq_id, ok.episode_id, ok.replica) == ("sid", "robot-1", 42, 9, "rep")
    assert (ok.queue_wait_ms, ok.inference_ms, ok.chunk_range, ok.superseded, ok.outcome, ok.error) == (
        1.234,
        20.0,
        [0, 50],
        3,
        "ok",
        "",
    )
    refused = audit_line(s, None, "bad_request", "rep", error="x" * 1000)
    assert (refused.seq_id, refused.episode_id, refused.chunk_range) == (0, 7, [])  # no header read yet
    assert len(refused.error) == 300  # bounded: a hostile message cannot grow the audit stream


def _obs_bytes(**state: np.ndarray) -> bytes:
    return encode_observation(ObservationMsg(state=dict(state), images={}))


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xc1not msgpack", Reason.MALFORMED),
        (pack({"state": {"s": {"dtype": "complex64", "shape": [1], "data": b"\0" * 8}}}), Reason.BAD_DTYPE),
        (pack({"state": {"s": {"dtype": "float32", "shape": [3], "data": b"\0" * 4}}}), Reason.BAD_SHAPE),
        (_obs_bytes(s=np.array([1.0, np.nan], dtype=np.float32)), Reason.NON_FINITE),
        (_obs_bytes(s=np.zeros(5000, dtype=np.float32)), Reason.OVERSIZE),
    ],
)
def test_decoders_carry_a_typed_reason(payload, reason):
    limits = WireLimits(max_tensor_elements=4096)
    with pytest.raises(WireError) as err:
        decode_observation(payload, limits)
    assert err.value.reason is reason
    assert str(err.value.reason) == reason.value  # the metric label is the enum's value


def test_header_errors_are_bad_header_and_the_reason_survives_rewording():
    with pytest.raises(WireError) as err:
        Header.unpack(b"\x01\x02", expect=MsgType.OBS)
    assert err.value.reason is Reason.BAD_HEADER
    assert WireError("x", "contains NaN (reworded)").reason is Reason.MALFORMED  # never parsed from the text


def test_pass_stats_capacity_at_current_batch_sizes():
    st = PassStats()
    assert (st.pass_ms_p50(), st.mean_batch(), st.chunks_per_s()) == (0.0, 0.0, 0.0)
    for b, t in ((4, 0.1), (4, 0.1), (2, 0.05)):
        st.add(b, t)
    assert st.mean_batch() == pytest.approx(10 / 3)
    assert st.chunks_per_s() == pytest.approx(10 / 0.25)
    assert st.pass_ms_p50() == pytest.approx(100.0)


def test_micro_batch_takes_up_to_max_in_ring_order():
    assert scheduler_for(1).select([1, 2, 3]) == [1] and isinstance(scheduler_for(1), RoundRobin)
    mb = scheduler_for(4)
    assert (
        isinstance(mb, MicroBatch) and mb.select([5, 6, 7]) == [5, 6, 7] and mb.select(list(range(9))) == [0, 1, 2, 3]
    )
    with pytest.raises(ValueError):
        MicroBatch(0)


def test_tensor_encoder_refuses_bad_dtype_with_reason():
    with pytest.raises(WireError) as err:
        encode_tensor(np.zeros(2, dtype=np.complex64))
    assert err.value.reason is Reason.BAD_DTYPE
