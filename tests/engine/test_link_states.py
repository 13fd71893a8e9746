"""The link state machine, one transition per test, with an injected clock (every `now` is given).

Bounds used throughout: degraded_after_s=1.0 (a request outstanding longer is late), max_offline_s=10.
"""

from __future__ import annotations

import pytest

from lerobot_policy_remote.engine.inflight import RequestTracker
from lerobot_policy_remote.engine.link import LinkState, LinkStateMachine

S = LinkState


def streaming(at: float = 0.0) -> LinkStateMachine:
    m = LinkStateMachine(degraded_after_s=1.0, max_offline_s=10.0, now=at)
    m.on_handshake_ok(at)
    m.on_merge(at)
    assert m.state is S.STREAMING
    return m


def test_starts_connecting_and_only_a_merge_means_streaming():
    m = LinkStateMachine(1.0, 10.0, now=0.0)
    assert m.state is S.CONNECTING
    m.on_handshake_ok(0.1)
    assert m.state is S.CONNECTING
    m.on_merge(0.2)
    assert m.state is S.STREAMING


def test_no_chunk_needed_is_streaming_however_long_it_lasts():
    """The old flapping: a 100-step chunk lasts 3.3 s at 30 fps; nothing is outstanding, so no DEGRADED."""
    m = streaming()
    for t in (1.0, 2.0, 3.3, 9.9):
        m.evaluate(t, fresh_actions=50, streaming_began=True, request_age=None)
        assert m.state is S.STREAMING


def test_a_request_answered_within_the_bound_stays_streaming():
    m = streaming()
    m.evaluate(5.0, 20, True, request_age=0.99)
    assert m.state is S.STREAMING


def test_a_late_request_is_degraded_at_the_bound():
    m = streaming()
    assert not m.evaluate(5.0, 20, True, request_age=1.0)
    assert m.evaluate(5.01, 20, True, request_age=1.01)
    assert m.state is S.DEGRADED and "degraded_after_s" in m.history[-1][2]


def test_a_failed_request_is_degraded_while_the_queue_holds():
    m = streaming()
    m.evaluate(0.5, 20, True, request_age=None, failing=True)
    assert m.state is S.DEGRADED and m.history[-1][2] == "a request failed"


def test_degraded_recovers_on_a_merge():
    m = streaming()
    m.evaluate(2.0, 20, True, request_age=1.5)
    m.on_merge(2.1)
    assert m.state is S.STREAMING


@pytest.mark.parametrize("start", [S.STREAMING, S.DEGRADED])
def test_no_fresh_action_is_stalled(start):
    m = streaming()
    if start is S.DEGRADED:
        m.evaluate(1.5, 5, True, request_age=1.2)
    assert m.state is start
    m.evaluate(1.6, fresh_actions=0, streaming_began=True, request_age=1.3)
    assert m.state is S.STALLED


def test_empty_queue_before_the_first_action_of_an_episode_is_not_stalled():
    m = streaming()
    m.evaluate(0.5, fresh_actions=0, streaming_began=False)
    assert m.state is S.STREAMING


def test_stalled_recovers_on_a_merge():
    m = streaming()
    m.evaluate(1.0, 0, True)
    m.on_merge(1.2)
    assert m.state is S.STREAMING


def test_link_lost_is_reconnecting_and_a_late_chunk_does_not_skip_the_handshake():
    m = streaming()
    m.on_link_lost(2.0, "2 request timeouts in a row")
    assert m.state is S.RECONNECTING
    m.on_merge(2.1)
    assert m.state is S.RECONNECTING
    m.on_handshake_ok(3.0)
    assert m.state is S.CONNECTING


def test_offline_longer_than_max_offline_is_dead_and_terminal():
    m = streaming()
    m.on_link_lost(1.0, "liveliness")
    m.evaluate(10.0, 0, True)
    assert m.state is S.RECONNECTING
    m.evaluate(10.01, 0, True)
    assert m.state is S.DEAD and "max_offline_s" in m.dead_reason
    m.on_merge(11.0)
    m.on_handshake_ok(11.0)
    assert m.state is S.DEAD


def test_pause_does_not_count_as_offline():
    m = streaming()
    m.on_link_lost(1.0, "x")
    assert not m.evaluate(100.0, 0, True, paused=True)
    m.restart_offline_clock(100.0)
    m.evaluate(101.0, 0, True)
    assert m.state is S.RECONNECTING


def test_contract_violation_is_dead():
    m = LinkStateMachine(1.0, 60.0, now=0.0)
    m.on_fatal(0.5, "model_mismatch")
    assert m.state is S.DEAD and m.dead_reason == "model_mismatch"


def test_request_tracker_feeds_the_bound():
    r = RequestTracker()
    assert r.age(5.0) is None and not r.failing
    r.begin(mono_ns=1, t_obs=4.0, t_send=5.0, idx_before=0, episode_id=0, epoch=1)
    assert r.age(5.5) == pytest.approx(0.5)
    assert r.expire(6.0, timeout_s=2.0) is None
    out = r.expire(7.5, timeout_s=2.0)
    assert out is not None and out.seq_id == 1 and r.failing and r.timeouts == 1 and r.age(7.5) is None
    r.begin(mono_ns=2, t_obs=7.5, t_send=7.6, idx_before=0, episode_id=0, epoch=1)
    r.succeed()
    assert not r.failing and r.timeouts == 0 and r.last_outcome == "ok"
    r.begin(mono_ns=3, t_obs=8.0, t_send=8.0, idx_before=0, episode_id=0, epoch=1)
    r.drop()  # an episode reset is not a failure
    assert not r.failing and r.age(9.0) is None
