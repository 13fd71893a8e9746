"""Handshake failures carry typed codes: `pick()` over hand-built replicas, and the startup advice chosen by code."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.advice import contract_advice
from lerobot_policy_remote.engine.handshake import HandshakeError, pick
from lerobot_policy_remote.engine.startup import handshake_failed
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus, SessionAck, SessionOpen


def status(replica: str, *, draining: bool = False, active: int = 0) -> ServerStatus:
    return ServerStatus(
        replica=replica, model=ModelInfo(fingerprint="fp"), max_sessions=2, active_sessions=active, draining=draining
    )


def refusing(code: str, message: str = ""):
    return lambda st: SessionAck(ok=False, code=code, message=message, active_sessions=2, max_sessions=2)


def test_all_replicas_full_is_refused_with_server_full_as_the_last_reason():
    with pytest.raises(HandshakeError) as info:
        pick([status("a"), status("b")], refusing("server_full", "server full: 2/2 sessions active"))
    exc = info.value
    assert (exc.code, exc.last, exc.refusal, exc.fatal) == (
        Refusal.REFUSED,
        Refusal.SERVER_FULL,
        Refusal.SERVER_FULL,
        False,
    )


def test_a_full_ack_without_the_words_still_says_server_full_by_code():
    with pytest.raises(HandshakeError) as info:
        pick([status("a")], refusing("server_full", "no room"))  # the code decides, not the text
    assert info.value.last is Refusal.SERVER_FULL and "server full: 2/2" in str(info.value)


def test_every_replica_draining_is_refused_with_draining():
    with pytest.raises(HandshakeError) as info:
        pick([status("a", draining=True), status("b", draining=True)], refusing("ok"))
    assert (info.value.code, info.value.refusal) == (Refusal.REFUSED, Refusal.DRAINING)


def test_a_contract_refusal_is_fatal_and_typed():
    with pytest.raises(HandshakeError) as info:
        pick([status("a"), status("b")], refusing("camera_mismatch", "camera mismatch: ..."))
    exc = info.value
    assert (
        exc.fatal
        and exc.code is Refusal.CAMERA_MISMATCH
        and exc.last is None
        and exc.refusal is Refusal.CAMERA_MISMATCH
    )


def test_unknown_codes_and_silence_leave_no_last_reason():
    with pytest.raises(HandshakeError) as info:
        pick([status("a")], refusing("a_code_from_a_newer_server", "try later"))
    assert (info.value.code, info.value.last, info.value.fatal) == (Refusal.REFUSED, None, False)
    with pytest.raises(HandshakeError) as info:
        pick([status("a")], lambda st: "replica a did not answer the session open within 1s")
    assert info.value.last is None and "did not answer" in str(info.value)


def test_startup_advice_follows_the_code():
    req = SessionOpen(client_uuid="r", action_names=[], model_id="m", revision="main", service="t")
    never = lambda timeout: pytest.fail("services are listed only when no server answered")  # noqa: E731
    full = HandshakeError(
        "replica a: server full: 2/2 sessions active", fatal=False, code=Refusal.REFUSED, last=Refusal.SERVER_FULL
    )
    assert str(handshake_failed(never, req, full)).endswith(f". To fix: {contract_advice(Refusal.SERVER_FULL)}")
    draining = HandshakeError("replica a is draining", fatal=False, code=Refusal.REFUSED, last=Refusal.DRAINING)
    assert str(handshake_failed(never, req, draining)).endswith(f". To fix: {contract_advice(Refusal.DRAINING)}")
    contract = HandshakeError("session refused (fps_mismatch)", fatal=True, code=Refusal.FPS_MISMATCH)
    assert str(handshake_failed(never, req, contract)).endswith(f". To fix: {contract_advice(Refusal.FPS_MISMATCH)}")
    # the words alone give no advice: only the code does
    silent = HandshakeError("replica a: server full (as text only)", fatal=False, code=Refusal.REFUSED)
    assert "To fix" not in str(handshake_failed(never, req, silent))


def test_no_server_lists_the_services():
    req = SessionOpen(client_uuid="r", action_names=[], model_id="m", revision="main", service="t")
    err = handshake_failed(lambda timeout: [], req, HandshakeError("nobody", fatal=False, code=Refusal.NO_SERVER))
    assert "the router has no policy server at all" in str(err)


def _ok(replica: str) -> SessionAck:
    return SessionAck(ok=True, code="ok", session_id="s" * 32, replica=replica, max_sessions=2)


def test_a_drain_rehandshake_tries_the_last_discovery_before_asking_every_replica(monkeypatch):
    """Known replicas (the last discovery, without the draining one) are asked first: no status query at all."""
    from lerobot_policy_remote.engine import handshake

    asked: list[str] = []
    monkeypatch.setattr(
        handshake, "discover", lambda *a, **k: pytest.fail("discovered although a known replica had room")
    )
    monkeypatch.setattr(
        handshake, "ask_session", lambda z, keys, replica, req, t: asked.append(replica) or _ok(replica)
    )
    opened = handshake.open_session(
        None,
        None,
        SessionOpen(client_uuid="r1", action_names=["a"]),
        1.0,
        known=[status("b"), status("gone", draining=True)],
    )
    assert opened.status.replica == "b" and asked == ["b"]


def test_known_replicas_that_refuse_fall_back_to_a_fresh_discovery(monkeypatch):
    from lerobot_policy_remote.engine import handshake

    asked: list[str] = []
    fresh = [status("b", active=2), status("c")]
    monkeypatch.setattr(handshake, "discover", lambda *a, **k: fresh)

    def ask(z, keys, replica, req, t):
        asked.append(replica)
        return (
            _ok(replica)
            if replica == "c"
            else SessionAck(ok=False, code="server_full", active_sessions=2, max_sessions=2)
        )

    monkeypatch.setattr(handshake, "ask_session", ask)
    seen: list[ServerStatus] = []
    opened = handshake.open_session(
        None, None, SessionOpen(client_uuid="r1", action_names=["a"]), 1.0, known=[status("b")], seen=seen
    )
    assert opened.status.replica == "c" and asked[0] == "b" and "c" in asked
    assert [s.replica for s in seen] == ["b", "c"]  # remembered for the next drain
