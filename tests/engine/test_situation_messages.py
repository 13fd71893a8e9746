"""Messages that match the situation (robot side). A robot whose only server went away
after a session does not blame the endpoint or the namespace; it says its servers are gone and it retries."""

from __future__ import annotations

from lerobot_policy_remote.engine.handshake import HandshakeError, namespace_hint, reconnect_failure
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.keys import ServiceKeys


def test_reconnect_failure_after_a_session_says_the_servers_are_gone():
    keys = ServiceKeys("m", "main", "t")
    exc = HandshakeError(namespace_hint(keys, keys.server("*", "status")), fatal=False, code=Refusal.NO_SERVER)
    text = reconnect_failure(exc, "gpu-0")
    assert "namespace does not match" not in text and "endpoint is wrong" not in text
    assert "gpu-0" in text and "drained" in text and "retrying" in text
    # before any session the namespace/endpoint advice stays (a first connection may well be misconfigured)
    assert "namespace does not match" in reconnect_failure(exc, "")
    other = HandshakeError(
        "server full: 2/2 sessions active", fatal=False, code=Refusal.REFUSED, last=Refusal.SERVER_FULL
    )
    assert reconnect_failure(other, "gpu-0") == str(other)
