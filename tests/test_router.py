"""Two client sessions through the embedded router exchange a put, a query and a liveliness token."""

from __future__ import annotations

import threading
import time

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
    qbl = b.declare_queryable(keys.server("rep-1", "status"), lambda q: q.reply(q.key_expr, b"pong:" + q.payload.to_bytes()))
    alive: list[tuple[str, str]] = []
    live_evt = threading.Event()

    def on_token(sample):
        alive.append((str(sample.kind), str(sample.key_expr)))
        live_evt.set()

    lsub = a.liveliness().declare_subscriber(ServiceKeys.any().robot("*", "alive"), on_token, history=True)
    time.sleep(0.2)

    a.put(keys.robot("robot-1", "action"), b"chunk", attachment=b"hdr")
    assert arrived.wait(5)
    assert got == [(keys.robot("robot-1", "action"), b"chunk", b"hdr")]

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


def test_router_restart_clients_reconnect(own_router):
    from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

    settings = ZenohSettings(mode="client", connect_endpoints=[own_router.endpoint])
    a, b = open_session(settings), open_session(settings)
    try:
        got = threading.Event()
        sub = b.declare_subscriber("@lerobot/x/y/z/robot/r/action", lambda s: got.set())
        own_router.restart()
        deadline = time.monotonic() + 10
        while not got.is_set() and time.monotonic() < deadline:
            a.put("@lerobot/x/y/z/robot/r/action", b"x")
            time.sleep(0.05)
        assert got.is_set(), "no delivery after router restart"
        sub.undeclare()
    finally:
        a.close()
        b.close()
