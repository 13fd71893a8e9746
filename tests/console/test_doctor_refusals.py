"""`lerobot-fleet doctor`'s verdict on a refused dry-run session open, chosen by the error's code (no router needed)."""

from __future__ import annotations

from lerobot_fleet.verbs.doctor_checks import refusal_checks
from lerobot_fleet.verbs.doctor_report import FAIL, PASS

from lerobot_policy_remote.advice import contract_advice
from lerobot_policy_remote.engine.handshake import HandshakeError
from lerobot_policy_remote.wire.codes import Refusal


def verdict(exc: HandshakeError) -> list[tuple[str, str, str]]:
    return [(c.name, c.status, c.fix) for c in refusal_checks(exc)]


def test_a_full_service_passes_the_contract_and_fails_the_free_session():
    exc = HandshakeError(
        "replica cube-1: server full: 1/1 sessions active", fatal=False, code=Refusal.REFUSED, last=Refusal.SERVER_FULL
    )
    assert verdict(exc) == [("capabilities", PASS, ""), ("free session", FAIL, contract_advice(Refusal.SERVER_FULL))]


def test_every_replica_draining():
    exc = HandshakeError("replica cube-1 is draining", fatal=False, code=Refusal.REFUSED, last=Refusal.DRAINING)
    [(name, status, fix)] = verdict(exc)
    assert (name, status, fix) == ("free session", FAIL, contract_advice(Refusal.DRAINING))
    assert refusal_checks(exc)[0].detail == "every replica is draining (replica cube-1 is draining)"


def test_a_contract_refusal_fails_the_capabilities_with_its_advice():
    exc = HandshakeError(
        "session refused by replica a (action_mismatch): ...", fatal=True, code=Refusal.ACTION_MISMATCH
    )
    assert verdict(exc) == [("capabilities", FAIL, contract_advice(Refusal.ACTION_MISMATCH))]


def test_the_text_alone_decides_nothing():
    """A message that merely mentions 'server full' or 'draining' is not a capacity verdict."""
    for text in ("replica a: server full (quoted by a newer server)", "replica a: draining soon"):
        exc = HandshakeError(text, fatal=False, code=Refusal.REFUSED)
        [(name, status, fix)] = verdict(exc)
        assert (name, status) == ("capabilities", FAIL) and "server's log" in fix


def test_every_replica_cordoned_passes_the_contract_and_names_uncordon():
    exc = HandshakeError(
        "replica cube-1: replica cube-1 is cordoned: it admits no new sessions; try another replica",
        fatal=False,
        code=Refusal.REFUSED,
        last=Refusal.CORDONED,
    )
    assert verdict(exc) == [("capabilities", PASS, ""), ("free session", FAIL, contract_advice(Refusal.CORDONED))]
    assert "lerobot-fleet uncordon REPLICA" in contract_advice(Refusal.CORDONED)
