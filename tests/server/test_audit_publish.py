"""Audit lines are logged one by one and published in batches: one payload per `flush_s` or `max_lines` lines.

Unit tests of `Auditor` with a list as its sink, and a real replica on the shared router whose drain's last lines
reach a subscriber of its audit key before it stops.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pytest

from lerobot_policy_remote.server.audit import Auditor, audit_log
from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.wire.codec import decode_json, split_audit_payload
from lerobot_policy_remote.wire.messages import AuditLine


def _line(seq: int, client: str = "robot-1") -> AuditLine:
    return AuditLine("2026-01-01T00:00:00+00:00", "s-1", client, seq, 0, 1.0, 20.0, [0, 50], 0, "ok", "rep")


def _lines(payloads: list[str]) -> list[AuditLine]:
    return [decode_json(AuditLine, p) for payload in payloads for p in split_audit_payload(payload.encode())]


def test_lines_emitted_together_leave_as_one_publication_and_are_logged_at_once(caplog):
    sent: list[str] = []
    auditor = Auditor(sent.append, flush_s=0.2, max_lines=64)
    with caplog.at_level(logging.INFO, logger=audit_log.name):
        texts = [auditor.emit(_line(i)) for i in range(5)]
        assert [r.getMessage() for r in caplog.records if r.name == audit_log.name] == texts  # logged one by one
    assert sent == []  # not yet published: the oldest line is younger than flush_s
    wait_until(lambda: sent, timeout=5, interval=0.01, message="the batch")
    assert sent == ["\n".join(texts)] and _lines(sent) == [_line(i) for i in range(5)]
    auditor.close()


def test_a_full_batch_is_published_by_the_emitter_at_once():
    sent: list[str] = []
    auditor = Auditor(sent.append, flush_s=30.0, max_lines=3)
    for i in range(7):
        auditor.emit(_line(i))
    assert _lines(sent) == [_line(i) for i in range(6)] and len(sent) == 2  # two full batches; the 7th waits
    auditor.close()
    assert len(sent) == 3 and _lines(sent)[-1] == _line(6)


def test_a_lone_line_is_published_within_flush_s_without_another_emit():
    sent: list[str] = []
    auditor = Auditor(sent.append, flush_s=0.1)
    t0 = time.monotonic()
    auditor.emit(_line(1))
    wait_until(lambda: sent, timeout=5, interval=0.005, message="the lone line")
    waited = time.monotonic() - t0
    assert 0.09 <= waited < 1.0, waited  # ~flush_s (a shared box may add scheduling delay, never a second flush_s)
    # the flusher sleeps again until the next line, which again waits ~flush_s alone
    auditor.emit(_line(2))
    wait_until(lambda: len(sent) == 2, timeout=5, interval=0.005, message="the second lone line")
    assert _lines(sent) == [_line(1), _line(2)]
    auditor.close()


def test_close_publishes_what_is_buffered_and_later_lines_go_at_once():
    sent: list[str] = []
    auditor = Auditor(sent.append, flush_s=30.0)
    auditor.emit(_line(1))
    auditor.emit(_line(2))
    assert sent == []
    auditor.close()
    assert _lines(sent) == [_line(1), _line(2)] and len(sent) == 1
    auditor.emit(_line(3))  # a line after close (a worker that outlived the stop) is not left in a buffer
    assert _lines(sent)[-1] == _line(3)
    auditor.close()  # idempotent
    assert len(sent) == 2


def test_a_failing_publish_never_raises_into_the_emitter_and_the_flusher_goes_on(caplog):
    calls: list[str] = []

    def publish(text: str) -> None:
        calls.append(text)
        if len(calls) == 1:
            raise RuntimeError("zenoh session closed")

    auditor = Auditor(publish, flush_s=0.05, max_lines=2)
    with caplog.at_level(logging.ERROR, logger="lerobot.policy_server"):
        auditor.emit(_line(1))
        auditor.emit(_line(2))  # a full batch: the emitter's own publish fails, and does not raise
        assert len(calls) == 1 and "audit publish failed" in caplog.text
        auditor.emit(_line(3))  # the flusher's publish works afterwards
        wait_until(lambda: len(calls) == 2, timeout=5, interval=0.005, message="the next batch")
    assert _lines(calls[1:]) == [_line(3)]
    auditor.close()


def test_lines_from_several_threads_are_each_published_once_in_their_order():
    sent: list[str] = []
    auditor = Auditor(sent.append, flush_s=0.002, max_lines=7)
    clients = [f"robot-{n}" for n in range(4)]

    def emit(client: str) -> None:
        for seq in range(300):
            auditor.emit(_line(seq, client))

    threads = [threading.Thread(target=emit, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    auditor.close()
    got = _lines(sent)
    assert len(got) == 4 * 300 and len(sent) < len(got)
    for c in clients:
        assert [x.seq_id for x in got if x.client_uuid == c] == list(range(300))


def test_without_a_sink_nothing_is_buffered_and_no_flusher_starts():
    def flushers() -> int:
        return sum(t.name == "audit-flusher" for t in threading.enumerate())

    before = flushers()
    auditor = Auditor(None)
    assert auditor.emit(_line(1)).startswith("{")  # still logged and returned
    assert flushers() == before
    auditor.close()


@pytest.mark.slow
def test_a_drains_last_lines_reach_the_audit_key_before_the_replica_stops(server_factory, robots, zenoh_client):
    """The flusher is held off (flush_s 30 s): every line of this run is still buffered when the drain ends, and
    `stop()` publishes them, in one payload, before the zenoh session closes."""
    from lerobot_policy_remote.server.stub import StubBackend
    from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES

    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES))
    server.auditor.flush_s = 30.0  # before the first line: the flusher reads it when a line waits
    payloads: list[bytes] = []
    sub: Any = zenoh_client().declare_subscriber(
        server.keys.server(server.replica, "audit"), lambda s: payloads.append(s.payload.to_bytes())
    )
    (robot,) = robots(server, 1)
    assert robot.open(server.replica).ok
    for _ in range(5):
        robot.request(np.zeros(6), timeout=10)
    assert payloads == []  # all five wait in the auditor's buffer
    server.drain("test")
    assert server.wait(10)
    server.stop()
    wait_until(lambda: payloads, timeout=5, message="the drain's audit lines")
    lines = [decode_json(AuditLine, p) for payload in payloads for p in split_audit_payload(payload)]
    assert len(payloads) == 1 and [x.outcome for x in lines] == ["ok"] * 5
    assert [x.seq_id for x in lines] == sorted(x.seq_id for x in lines) and {x.client_uuid for x in lines} == {
        robot.uuid
    }
    sub.undeclare()
