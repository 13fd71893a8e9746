import numpy as np
import pytest

from lerobot_policy_remote.wire import SchemaVersionError, WireError
from lerobot_policy_remote.wire.codec import (
    CONTROL_MAX_BYTES,
    decode,
    decode_json,
    encode,
    encode_json,
    join_audit_lines,
    pack,
    split_audit_payload,
)
from lerobot_policy_remote.wire.data import (
    ActionChunkMsg,
    ObservationMsg,
    decode_chunk,
    decode_observation,
    encode_chunk,
    encode_observation,
)
from lerobot_policy_remote.wire.images import encode_image
from lerobot_policy_remote.wire.messages import (
    AuditLine,
    FeatureSpec,
    RobotTelemetry,
    RtcSettings,
    SessionAck,
    SessionOpen,
    negotiate_schema,
)


def test_control_message_round_trip():
    msg = SessionOpen(
        client_uuid="robot-1",
        action_names=["a.pos", "b.pos"],
        features=[
            FeatureSpec("observation.state", "state", [2]),
            FeatureSpec("observation.images.front", "image", [48, 64, 3]),
        ],
        fps=30.0,
        rtc=RtcSettings(enabled=True, execution_horizon=8),
        tags={"lab": "a"},
    )
    assert decode(SessionOpen, encode(msg)) == msg


def test_unknown_keys_are_ignored_and_missing_optionals_default():
    raw = pack({"ok": True, "session_id": "s1", "future_field": {"x": [1, 2]}, "another": 3})
    ack = decode(SessionAck, raw)
    assert ack.ok and ack.session_id == "s1" and ack.warnings == [] and ack.chunk_size == 0


def test_wrong_types_name_the_field():
    with pytest.raises(WireError, match=r"SessionOpen.rtc.execution_horizon: expected an int"):
        decode(SessionOpen, pack({"client_uuid": "r", "action_names": [], "rtc": {"execution_horizon": "10"}}))
    with pytest.raises(WireError, match=r"SessionOpen.client_uuid: required field is missing"):
        decode(SessionOpen, pack({"action_names": []}))


def test_robot_telemetry_rtc_round_trip_and_an_older_robot_reads_as_unknown():
    """`RobotTelemetry.rtc` is additive: "on"/"off" travel under the key `rtc`; a map without it (an older robot)
    is ""."""
    msg = RobotTelemetry(
        client_uuid="arm-1", state="STREAMING", session_id="s-1", replica="gpu-0", delay_steps=2, rtc="on"
    )
    assert decode(RobotTelemetry, encode(msg)) == msg
    assert decode(
        RobotTelemetry, pack({"client_uuid": "arm-1", "state": "STREAMING", "delay_steps": 2, "rtc": "off"})
    ) == RobotTelemetry(client_uuid="arm-1", state="STREAMING", delay_steps=2, rtc="off")
    older = decode(
        RobotTelemetry, pack({"client_uuid": "arm-1", "state": "STREAMING", "session_id": "s-1", "delay_steps": 2})
    )
    assert older.rtc == "" and older.delay_steps == 2
    with pytest.raises(WireError, match=r"RobotTelemetry.rtc"):
        decode(RobotTelemetry, pack({"client_uuid": "arm-1", "state": "STREAMING", "rtc": True}))


def test_schema_negotiation():
    assert negotiate_schema(1, 3, 1, 2) == 2
    with pytest.raises(SchemaVersionError, match="upgrade"):
        negotiate_schema(3, 4, 1, 2)


def test_audit_line_is_json_with_the_spec_fields():
    line = AuditLine("2026-01-01T00:00:00Z", "s", "robot-1", 4, 1, 1.5, 20.0, [0, 50], 2, "ok")
    raw = encode_json(line)
    assert raw.startswith(b"{") and b'"queue_wait_ms":1.5' in raw
    assert decode_json(AuditLine, raw) == line


def test_an_audit_publication_is_one_or_more_lines_split_on_newlines():
    a = AuditLine("t", "s", "robot-1", 4, 1, 1.5, 20.0, error="multi\nline error")  # escaped in JSON: no raw newline
    b = AuditLine("t", "s", "robot-2", 5, 1, 1.5, 20.0)
    texts = [encode_json(x).decode() for x in (a, b)]
    payload = join_audit_lines(texts).encode()
    assert [decode_json(AuditLine, p) for p in split_audit_payload(payload)] == [a, b]
    assert split_audit_payload(texts[0].encode()) == [texts[0].encode()]  # one line per put (an older replica)
    assert split_audit_payload(b"\n" + texts[0].encode() + b"\n\n \n") == [texts[0].encode()]  # blanks skipped
    with pytest.raises(WireError, match="oversize"):
        split_audit_payload(b"x" * (CONTROL_MAX_BYTES + 1))
    with pytest.raises(WireError):
        split_audit_payload(None)


def _obs():
    return ObservationMsg(
        state={"observation.state": np.arange(14, dtype=np.float32)},
        images={"observation.images.front": np.full((48, 64, 3), (255, 0, 0), dtype=np.uint8)},
        task="pick",
        inference_delay_steps=3,
        prefix_model=np.ones((5, 14), dtype=np.float32),
        prefix_robot=np.zeros((5, 14), dtype=np.float32),
        episode_start=True,
    )


def test_observation_round_trip():
    msg = decode_observation(encode_observation(_obs(), jpeg_quality=0))
    ref = _obs()
    assert np.array_equal(msg.state["observation.state"], ref.state["observation.state"])
    assert np.array_equal(msg.images["observation.images.front"], ref.images["observation.images.front"])
    assert np.array_equal(msg.prefix_model, ref.prefix_model) and msg.episode_start and msg.inference_delay_steps == 3


def test_nan_state_is_refused():
    obs = _obs()
    obs.state["observation.state"][3] = np.nan
    with pytest.raises(WireError, match=r"state.observation.state: contains NaN"):
        decode_observation(encode_observation(obs))


def test_chunk_round_trip_and_nan_refused():
    chunk = ActionChunkMsg(
        np.ones((50, 14), np.float32), np.full((50, 14), 2, np.float32), "s", 7, -5, 1.0, 20.0, 1, 0.5
    )
    out = decode_chunk(encode_chunk(chunk))
    assert np.array_equal(out.chunk_robot, chunk.chunk_robot) and out.seq_id_echo == 7 and out.client_mono_ns_echo == -5
    chunk.chunk_robot[10, 3] = np.inf
    with pytest.raises(WireError, match="NaN or Inf"):
        decode_chunk(encode_chunk(chunk))


def test_chunk_with_ragged_lengths_refused():
    chunk = ActionChunkMsg(np.ones((50, 14), np.float32), np.ones((49, 14), np.float32))
    with pytest.raises(WireError, match="lengths differ"):
        decode_chunk(encode_chunk(chunk))


def test_observation_image_dims_checked():
    body = {"images": {"cam": {**encode_image(np.zeros((8, 8, 3), np.uint8), 90), "shape": [16, 8, 3]}}}
    with pytest.raises(WireError, match="images.cam.data"):
        decode_observation(pack(body))


def test_cordon_bodies_and_the_status_fields_of_capacity_and_cordon():
    from lerobot_policy_remote.wire.keys import ServiceKeys, parse_key
    from lerobot_policy_remote.wire.messages import CordonAck, CordonRequest, ServerStatus

    req = CordonRequest(cordon=False, reason="maintenance over", requested_by="alice@lab")
    assert decode(CordonRequest, encode(req)) == req
    assert decode(CordonRequest, pack({})) == CordonRequest(cordon=True)  # an empty body cordons
    ack = CordonAck(ok=True, cordoned=True, message="cordoned", sessions=["s-1"])
    assert decode(CordonAck, encode(ack)) == ack
    status = ServerStatus(replica="gpu-0", requests_per_s=1.95, cordoned=True)
    assert decode(ServerStatus, encode(status)) == status
    old = decode(ServerStatus, pack({"replica": "gpu-0"}))  # an older server says neither
    assert old.requests_per_s is None and old.cordoned is False
    key = ServiceKeys.for_service("lab/act", "main", "pick").server("gpu-0", "cordon")
    assert key.endswith("/server/gpu-0/cordon") and parse_key(key).leaf == "cordon"


def test_rollout_bodies_round_trip_and_an_older_robots_telemetry_reads_as_no_model():
    from lerobot_policy_remote.wire.rollout import (
        ModelRef,
        MoveAck,
        MoveCommand,
        RolloutCommand,
        RolloutReply,
        RolloutRobot,
        RolloutStatus,
    )

    move = MoveCommand("org/pick", "v2", "pick", "b2" * 32, rollout_id="ro-1", requested_by="alice@box")
    assert decode(MoveCommand, encode(move)) == move
    assert decode(MoveAck, encode(MoveAck(True, "moving", "a1" * 32))).fingerprint == "a1" * 32
    cmd = RolloutCommand("start", to="v2", canary=0.25, step=2, abort_if="degraded_rate > 2x")
    assert decode(RolloutCommand, encode(cmd)) == cmd
    status = RolloutStatus(
        "ro-1",
        "canary",
        "pick",
        ModelRef("org/pick", "v1", "a1"),
        ModelRef("org/pick", "v2", "b2"),
        robots=[RolloutRobot("arm-0", "moved", "b2", "2026-11-29T03:00:00+00:00", "step 1")],
        steps=1,
        events=["03:00:00 step 1: moving arm-0"],
    )
    reply = RolloutReply(True, "ok", status)
    assert decode(RolloutReply, encode(reply)) == reply
    assert decode_json(RolloutStatus, encode_json(status)) == status  # the router's state file
    with pytest.raises(WireError, match="MoveCommand.fingerprint"):
        decode(MoveCommand, pack({"model_id": "m", "revision": "r", "service": "s", "fingerprint": 7}))
    old = decode(RobotTelemetry, pack({"client_uuid": "arm-0", "state": "STREAMING"}))
    assert (old.revision, old.fingerprint, old.moves) == ("", "", 0)
