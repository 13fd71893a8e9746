"""Refusal and event codes: the same strings on the wire as before they were enums, and plain strings in
msgpack/JSON."""

from __future__ import annotations

import subprocess
import sys

import msgpack
import pytest

from lerobot_policy_remote.wire.codec import decode, decode_json, encode, encode_json
from lerobot_policy_remote.wire.codes import CONTRACT_REFUSALS, EventKind, Refusal
from lerobot_policy_remote.wire.messages import EventMsg, SessionAck

# The codes as they were spelled before they became enums: the wire format must not move.
OLD_REFUSALS = {
    "ok",
    "draining",
    "server_full",
    "schema_mismatch",
    "model_mismatch",
    "action_mismatch",
    "camera_mismatch",
    "state_dim_mismatch",
    "task_mismatch",
    "fps_mismatch",
    "bad_request",
    "no_server",
    "refused",
}
OLD_CONTRACT = {
    "action_mismatch",
    "camera_mismatch",
    "state_dim_mismatch",
    "schema_mismatch",
    "model_mismatch",
    "task_mismatch",
    "fps_mismatch",
    "bad_request",
}
OLD_EVENTS = {"unknown_session", "bad_request", "draining", "error"}
# Codes added since (additive: an older robot that does not know one retries with backoff, as for any refusal it
# cannot place).
ADDED_REFUSALS = {"action_order_unchecked", "identity_mismatch"}  # strict_action_names; identity in the key
# Added since, not contract refusals: an older robot that does not know one tries the next replica, as for
# `server_full`.
ADDED_RETRYABLE = {"cordoned"}  # an operator cordoned the replica


def test_values_are_the_old_strings():
    assert {r.value for r in Refusal} == OLD_REFUSALS | ADDED_REFUSALS | ADDED_RETRYABLE
    assert {r.value for r in CONTRACT_REFUSALS} == OLD_CONTRACT | ADDED_REFUSALS
    assert {e.value for e in EventKind} == OLD_EVENTS
    for member in [*Refusal, *EventKind]:
        assert member == member.value and str(member) == member.value and f"{member}" == member.value
        assert hash(member) == hash(member.value)  # a plain-string code finds the member in sets and dict keys


def test_plain_strings_from_a_peer_match_by_value():
    assert "server_full" == Refusal.SERVER_FULL and "action_mismatch" in CONTRACT_REFUSALS
    assert "server_full" not in CONTRACT_REFUSALS and "draining" == EventKind.DRAINING
    assert Refusal.parse("fps_mismatch") is Refusal.FPS_MISMATCH
    assert Refusal.parse("a_code_from_a_newer_server") is None


@pytest.mark.parametrize("code", list(Refusal))
def test_session_ack_code_round_trips_as_a_plain_string(code: Refusal):
    typed = encode(SessionAck(ok=False, code=code, message="m"))
    assert typed == encode(SessionAck(ok=False, code=code.value, message="m"))  # byte for byte
    raw = msgpack.unpackb(typed, raw=False)
    assert type(raw["code"]) is str and raw["code"] == code.value
    back = decode(SessionAck, typed)
    assert back.code == code and Refusal.parse(back.code) is code
    assert decode_json(SessionAck, encode_json(SessionAck(ok=False, code=code))).code == code.value


@pytest.mark.parametrize("kind", list(EventKind))
def test_event_kind_round_trips_as_a_plain_string(kind: EventKind):
    typed = encode(EventMsg(kind, "why", "s-1", 7))
    assert typed == encode(EventMsg(kind.value, "why", "s-1", 7))
    assert type(msgpack.unpackb(typed, raw=False)["event"]) is str
    assert decode(EventMsg, typed).event == kind


def test_codes_module_imports_only_the_standard_library():
    probe = (
        "import sys; import lerobot_policy_remote.wire.codes; "
        "print(','.join(m for m in ('numpy', 'cv2', 'torch', 'zenoh', 'msgpack') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""
