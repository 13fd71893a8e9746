"""Two client sessions through the embedded router exchange a put, a query and a liveliness token."""

from __future__ import annotations

import threading

import pytest

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.wire import ServiceKeys


def test_put_query_and_liveliness_through_router(zenoh_client):
    a, b = zenoh_client(), zenoh_client()
    keys = ServiceKeys.for_service("test/model", "main", "router test")
    got: list[tuple[str, bytes, bytes | None]] = []
    arrived = threading.Event()

    def on_sample(sample):
        att = sample.attachment.to_bytes() if sample.attachment is not None else None
        got.append((str(sample.key_expr), sample.payload.to_bytes(), att))
        arrived.set()

    sub = b.declare_subscriber(keys.robot("robot-1", "action"), on_sample)

    def pong(query) -> None:
        with query:
            query.reply(query.key_expr, b"pong:" + query.payload.to_bytes())

    qbl = b.declare_queryable(keys.server("rep-1", "status"), pong)
    alive: list[tuple[str, str]] = []
    live_evt = threading.Event()

    def on_token(sample):
        alive.append((str(sample.kind), str(sample.key_expr)))
        live_evt.set()

    lsub = a.liveliness().declare_subscriber(ServiceKeys.any().robot("*", "alive"), on_token, history=True)

    # the subscription reaches the router asynchronously: put until one arrives
    wait_until(
        lambda: a.put(keys.robot("robot-1", "action"), b"chunk", attachment=b"hdr") or arrived.is_set(),
        timeout=5,
        interval=0.1,
        message="a put delivered through the router",
    )
    assert got and set(got) == {(keys.robot("robot-1", "action"), b"chunk", b"hdr")}

    replies = list(a.get(keys.server("*", "status"), payload=b"ping", timeout=5.0))
    assert [r.ok.payload.to_bytes() for r in replies if r.ok] == [b"pong:ping"]

    token = b.liveliness().declare_token(keys.robot("robot-1", "alive"))
    assert live_evt.wait(5)
    assert "PUT" in alive[0][0] and alive[0][1] == keys.robot("robot-1", "alive")
    live_evt.clear()
    token.undeclare()
    assert live_evt.wait(5)
    assert "DELETE" in alive[-1][0]
    for d in (sub, qbl, lsub):
        d.undeclare()


@pytest.mark.slow
def test_router_restart_clients_reconnect(own_router):
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    settings = ZenohSettings(mode="client", connect_endpoints=[own_router.endpoint])
    a, b = open_session(settings), open_session(settings)
    try:
        got = threading.Event()
        sub = b.declare_subscriber("@lerobot/x/y/z/robot/r/action", lambda s: got.set())
        own_router.restart()
        wait_until(
            lambda: a.put("@lerobot/x/y/z/robot/r/action", b"x") or got.is_set(),
            timeout=10,
            message="a delivery after the router restart",
        )
        sub.undeclare()
    finally:
        a.close()
        b.close()
