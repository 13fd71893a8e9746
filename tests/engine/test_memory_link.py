"""The engine driven through the in-memory link: every robot-side rule without a network.

The test plays the server (`MemoryLink`) and steps the engine's worker by hand (`engine.step()`),
so each case is deterministic. Real-Zenoh versions of these paths live in test_engine_link.py.
"""

from __future__ import annotations

import logging
import time

import lerobot.rollout  # noqa: F401
import numpy as np
import pytest
from lerobot.policies.rtc.configuration_rtc import RTCConfig

from lerobot_policy_remote.engine import provenance
from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.testing.memory_link import MemoryLink, MemoryReplica
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import SCHEMA_VERSION

NAMES = [f"j{i}.pos" for i in range(3)]
HW = {"observation.state": {"dtype": "float32", "shape": (3,), "names": NAMES}}
OBS = {n: 1.0 for n in NAMES}


def ramp(header: Header, _obs) -> np.ndarray:
    """A chunk whose values name the request: row i = seq + i/100."""
    return np.full((10, 3), float(header.seq_id), np.float32) + np.arange(10, dtype=np.float32)[:, None] / 100


def unstarted(link: MemoryLink, cfg: RemoteInferenceConfig, **kw) -> RemoteInferenceEngine:
    """The test robot's engine over `link`, not started (the tests start it as they need)."""
    return RemoteInferenceEngine(
        cfg, hw_features=HW, ordered_action_keys=NAMES, task="t", fps=30, model_id="m", transport=link, **kw
    )


def engine(link: MemoryLink, **kw) -> RemoteInferenceEngine:
    e = unstarted(link, RemoteInferenceConfig(rtc=RTCConfig(enabled=False), **{"buffer_time_s": 0.1, **kw}))
    e.start(worker=False)
    e.resume()
    e.notify_observation(OBS)
    return e


# ---------------------------------------------------------------- the link itself
def test_memory_link_records_what_the_robot_publishes_and_collects_once():
    link = MemoryLink(respond=ramp)
    e = engine(link)
    assert link.opened and link.bound == "mem-1" and e.session_id == link.session_id() != ""
    e.step()
    header, obs = link.requests[0]
    assert (
        header.msg_type is MsgType.OBS
        and header.seq_id == 1
        and obs.state["observation.state"].tolist() == [1.0, 1.0, 1.0]
    )
    assert link.receive() != [] and link.receive() == []  # each arrival is collected exactly once
    assert link.telemetry and link.telemetry[-1].client_uuid == e.client_uuid
    e.stop()
    assert link.closed


def test_memory_link_tokens_and_reset_queries():
    link = MemoryLink(MemoryReplica("a"))
    link.open(lambda: None)
    assert [(c.replica, c.alive) for c in link.server_changes()] == [("a", True)]
    link.bind("a")
    link.add_replica(MemoryReplica("b"))
    link.remove_replica("a")
    assert [(c.replica, c.alive) for c in link.server_changes()] == [("b", True), ("a", False)]
    assert link.server_lost() and not link.server_lost()  # reported once
    q = link.operator_reset()
    assert link.reset_queries() == [q] and not q.answered.is_set()


# ---------------------------------------------------------------- the engine through it
def test_streams_and_executes_only_server_actions_with_provenance():
    link = MemoryLink(respond=ramp)
    e = engine(link)
    assert e.get_action() is None  # nothing before the first chunk
    e.step()  # send
    e.step()  # merge
    assert e.state is LinkState.STREAMING and e.counters["chunks"] == 1
    a = e.get_action()
    assert a.tolist() == pytest.approx([1.0, 1.0, 1.0])
    p = provenance.latest()
    assert (p.session_id, p.seq_id, p.replica) == (e.session_id, 1, "mem-1") and p.source_age_s >= 0


@pytest.mark.parametrize("fault", ["nan", "wrong_shape", "foreign_session", "bad_echo", "garbage", "no_header"])
def test_unsafe_replies_are_never_executed(fault):
    link = MemoryLink()
    e = engine(link)
    e.step()
    req = link.requests[-1][0]
    good = ramp(req, None)
    if fault == "nan":
        bad = good.copy()
        bad[3, 1] = np.nan
        link.reply(req, bad)
    elif fault == "wrong_shape":
        link.reply(req, good[:, :2])
    elif fault == "foreign_session":
        link.reply(req, good, session_id="someone-else")
    elif fault == "bad_echo":
        link.reply(req, good, mono_echo=req.client_mono_ns + 1)
    elif fault == "garbage":
        link.deliver(
            b"\xc1\xff not msgpack",
            Header(SCHEMA_VERSION, MsgType.CHUNK, req.seq_id, req.episode_id, 0, req.session_epoch).pack(),
        )
    else:
        link.deliver(b"", None)
    e.step()
    assert e.counters["chunks"] == 0 and e.get_action() is None
    if fault == "foreign_session":  # the server no longer holds our session: a lost link, re-handshake at once
        assert e.counters["foreign_session"] == 1 and e.counters["bad_chunk"] == 0
    else:
        assert e.counters["bad_chunk"] + e.counters["bad_header"] == 1


def test_operator_episode_reset_is_answered_once_with_the_new_episode():
    link = MemoryLink(respond=ramp)
    e = engine(link)
    e.step()
    e.step()
    ep = e.episode_id
    q = link.operator_reset()
    e.step()
    assert q.answered.is_set() and q.ack.ok and q.ack.episode_id == ep + 1 == e.episode_id
    assert e.queue.qsize() == 0 and e.get_action() is None  # the old episode's actions are gone
    assert link.server_resets[-1].episode_id == ep + 1


def test_a_telemetry_query_is_answered_on_the_next_pass_with_the_report_of_that_moment():
    link = MemoryLink(respond=ramp)
    e = engine(link, telemetry_period_s=60.0)  # the pacer alone would send nothing more for a minute
    e.step()
    e.step()
    published = len(link.telemetry)
    q = link.ask_telemetry()
    assert not q.answered.is_set()  # deposited only: the worker answers
    e.step()
    assert q.answered.is_set() and len(link.telemetry) == published  # answered, not published
    now = e.telemetry()
    assert q.telemetry.client_uuid == e.client_uuid and q.telemetry.state == now.state == "STREAMING"
    assert q.telemetry.requests == now.requests >= 1 and q.telemetry.session_id == now.session_id != ""
    e.step()
    assert link.telemetry_queries() == []  # answered once


def test_server_token_loss_reconnects_to_another_replica():
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=0.001, reconnect_max_backoff_s=0.001)
    e.step()
    e.step()
    first = e.session_id
    link.add_replica(MemoryReplica("b"))
    link.remove_replica("a")
    e.step()
    assert e.state is LinkState.RECONNECTING
    for _ in range(200):  # the robot keeps executing its buffer meanwhile
        e.step()
        e.get_action()
        if e.state is LinkState.STREAMING and e.replica == "b":
            break
    assert e.replica == "b" and e.session_id != first and e.state is LinkState.STREAMING


def test_model_change_on_reconnect_is_dead_and_never_executes():
    link = MemoryLink(MemoryReplica("a", fingerprint="fp-A"), respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=0.001, reconnect_max_backoff_s=0.001)
    e.step()
    e.step()
    link.add_replica(MemoryReplica("b", fingerprint="fp-B"))
    link.remove_replica("a")
    for _ in range(200):
        if not e.step():
            break
    assert e.failed and e.state is LinkState.DEAD and "different model" in e.states.dead_reason


def test_unknown_session_event_reconnects_at_once():
    link = MemoryLink(respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=5.0, reconnect_max_backoff_s=5.0)
    e.step()
    e.step()
    epoch = e.session_epoch
    link.event("unknown_session", epoch=epoch)
    e.step()  # lose the link, and (no backoff for this case) re-handshake in the same pass
    assert e.session_epoch == epoch + 1 and e.state is LinkState.CONNECTING


def test_contract_refusal_at_start_fails_before_the_robot_moves():
    link = MemoryLink(MemoryReplica("a", refuse="action_mismatch"))
    e = unstarted(link, RemoteInferenceConfig(rtc=RTCConfig(enabled=False)))
    with pytest.raises(RuntimeError, match="action_mismatch"):
        e.start(worker=False)
    assert link.closed


# ---------------------------------------------------------------- states and event-driven failover
def test_healthy_streaming_with_a_full_queue_is_never_degraded():
    link = MemoryLink(respond=ramp)
    e = engine(link, degraded_after_s=0.01, buffer_time_s=0.05)
    e.step()
    e.step()
    states = set()
    for _ in range(40):  # the robot executes; the next request goes out only when the queue runs low
        e.get_action()
        e.step()
        e.step()
        states.add(e.state)
    assert states == {LinkState.STREAMING}, states
    assert e.counters["requests"] >= 4


def test_a_late_request_is_degraded_then_stalled_when_the_queue_runs_dry():
    link = MemoryLink(respond=ramp)
    e = engine(link, degraded_after_s=0.05, buffer_time_s=0.2)
    e.step()
    e.step()
    link.respond = None  # the server goes silent
    while e.counters["requests"] < 2:
        e.get_action()
        e.step()
    assert e.state is LinkState.STREAMING  # just sent: not late yet
    seen = []
    for _ in range(1_000_000):  # bounded: the request turns late after 50 ms of real time
        if e.queue.fresh_count(1e18, 1e18) == 0:
            break
        e.step()
        seen.append(e.state)
        if e.state is LinkState.DEGRADED:
            e.get_action()
    e.get_action()
    e.step()
    assert LinkState.DEGRADED in seen and e.state is LinkState.STALLED


def test_a_new_server_token_ends_the_backoff_at_once():
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=30.0, reconnect_max_backoff_s=30.0)
    e.step()
    link.remove_replica("a")
    e.step()
    assert e.state is LinkState.RECONNECTING
    e.step()
    assert e.replica == "a"  # nothing changed: the 30 s backoff holds
    link.add_replica(MemoryReplica("b"))
    e.step()
    assert e.replica == "b" and e.state is LinkState.CONNECTING  # no wait for the backoff


def drained(link: MemoryLink) -> tuple[RemoteInferenceEngine, str]:
    """An engine streaming on one of the link's replicas, which has just told it that it drains."""
    e = engine(link, reconnect_initial_backoff_s=30.0, reconnect_max_backoff_s=30.0)
    e.step()
    first = e.replica
    link.replicas[first].draining = True
    link.event("draining", epoch=e.session_epoch)
    return e, first


def test_drain_moves_to_another_replica_at_once():
    link = MemoryLink(MemoryReplica("a"), MemoryReplica("b"), respond=ramp)
    e, first = drained(link)
    e.step()
    assert e.replica != first and e.state is LinkState.CONNECTING
    assert link.handshakes == ["", first]  # the drain's handshake may skip discovery, avoiding the draining replica


def test_a_step_without_handshake_leaves_the_move_to_the_next_step():
    """`step(handshake=False)`: what a caller stepping many robots on one thread uses, so the one blocking part
    (the handshake's queries) can run on a thread of its own."""
    link = MemoryLink(MemoryReplica("a"), MemoryReplica("b"), respond=ramp)
    e, first = drained(link)
    e.step(handshake=False)
    assert e.reconnect.needed and e.replica == first and link.handshakes == [""]
    e.step()
    assert e.replica != first and not e.reconnect.needed


def two_routers(link: MemoryLink, grace: float) -> RemoteInferenceEngine:
    return engine(
        link,
        connect_endpoints=["tcp/127.0.0.1:1", "tcp/127.0.0.1:2"],
        failover_grace_s=grace,
        reconnect_initial_backoff_s=30.0,
        reconnect_max_backoff_s=30.0,
    )


def test_with_several_routers_a_token_back_within_the_grace_keeps_the_session():
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = two_routers(link, grace=30.0)
    e.step()
    e.step()
    session, epoch = e.session_id, e.session_epoch
    rep = link.replicas["a"]
    link.remove_replica("a")  # our router died: the token is gone for now
    e.step()
    assert e.state is LinkState.DEGRADED and e.counters["server_token_lost"] == 1  # left STREAMING at once
    link.add_replica(rep)  # the same replica, seen again through the other router
    for _ in range(50):
        e.get_action()
        e.step()
    assert e.state is LinkState.STREAMING and (e.session_id, e.session_epoch) == (session, epoch)


def test_with_several_routers_another_replica_appearing_ends_the_grace():
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = two_routers(link, grace=30.0)
    e.step()
    link.remove_replica("a")  # kill -9
    e.step()
    assert e.replica == "a"
    link.add_replica(MemoryReplica("b"))  # its replacement
    e.step()
    assert e.replica == "b" and e.state is LinkState.CONNECTING


def test_with_one_router_a_lost_token_ends_the_session_at_once():
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = engine(link, failover_grace_s=30.0)
    e.step()
    link.remove_replica("a")
    e.step()
    assert e.state is LinkState.RECONNECTING


def test_control_loop_executes_and_counts_the_invariants():
    """The kit's control thread around the engine: actions with provenance, nothing unsafe, errors recorded."""
    from lerobot_policy_remote.testing import wait_until
    from lerobot_policy_remote.testing.control_loop import ControlLoop

    link = MemoryLink(respond=ramp)
    e = unstarted(link, RemoteInferenceConfig(rtc=RTCConfig(enabled=False), buffer_time_s=0.1))
    e.start()
    e.resume()
    loop = ControlLoop(e, observe=lambda: OBS, fps=60)
    try:
        wait_until(lambda: len(loop.executed) >= 20, 20, message="twenty executed actions")
    finally:
        loop.stop()
        e.stop()
    assert not loop.errors and loop.unsafe == 0
    assert all(x.provenance is not None and x.provenance.session_id == link.session_id() for x in loop.executed)
    assert loop.sessions == {link.session_id()}
    with pytest.raises(ValueError):
        ControlLoop(e)


def test_robot_whose_only_server_went_away_logs_that_it_is_gone(caplog):
    """No namespace/endpoint advice once the robot had a session; it says its server is gone."""
    link = MemoryLink(MemoryReplica("a"), respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=0.001, reconnect_max_backoff_s=0.001)
    e.step()
    e.step()
    with caplog.at_level(logging.WARNING, logger="lerobot_policy_remote.engine.remote"):
        link.remove_replica("a")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("Reconnect failed" in r.getMessage() for r in caplog.records):
            e.step()
            e.get_action()
    failed = [r.getMessage() for r in caplog.records if "Reconnect failed" in r.getMessage()]
    assert failed, [r.getMessage() for r in caplog.records]
    assert all("namespace" not in m and "replica a" in m for m in failed), failed
    e.stop()


def test_a_new_session_requests_at_once_and_its_chunk_replaces_the_old_tail():
    """Failover speed: the first request on a new session does not wait for the old buffer to
    drain, and its chunk (from a newer observation) supersedes what is left of the old session's chunk."""
    link = MemoryLink(respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=5.0, reconnect_max_backoff_s=5.0, buffer_time_s=0.1)
    e.step()
    e.step()  # chunk seq=1 merged: 10 actions, far more than buffer_time_s
    first = e.get_action()
    assert first is not None and float(first[0]) == pytest.approx(1.0)
    sent = len(link.requests)
    e.step()
    assert len(link.requests) == sent  # same session, full buffer: nothing to ask for yet
    link.event("unknown_session", epoch=e.session_epoch)
    e.step()  # new session
    assert e.state is LinkState.CONNECTING
    e.step()  # its first request goes out although the buffer still holds the old chunk
    assert len(link.requests) == sent + 1
    seq = link.requests[-1][0].seq_id
    e.step()  # its chunk merges: STREAMING, and the old session's tail is gone
    assert e.state is LinkState.STREAMING
    nxt = e.get_action()
    assert nxt is not None and float(nxt[0]) == pytest.approx(seq)  # row 0 of the new chunk, not row 1 of the old
    e.step()
    assert len(link.requests) == sent + 1  # back to the buffer rule once the session has merged a chunk
    e.stop()


def test_a_draining_event_for_another_session_is_ignored():
    """Only our own replica knows our session id; a draining event naming another session (a rogue
    server in our namespace) never moves the robot, and an honest one still does."""
    link = MemoryLink(MemoryReplica("a"), MemoryReplica("b"), respond=ramp)
    e = engine(link, reconnect_initial_backoff_s=30.0, reconnect_max_backoff_s=30.0)
    e.step()
    first = e.replica
    link.event("draining", epoch=e.session_epoch, session_id="f" * 32)
    e.step()
    assert e.replica == first and e.state is not LinkState.CONNECTING and e.counters["foreign_event"] == 1
    link.event("draining", epoch=e.session_epoch)  # the honest path
    e.step()
    assert e.replica != first


def test_a_robot_reports_right_before_it_blocks_on_a_handshake():
    """The worker sends nothing while the handshake's queries block: it reports first, so its data at the console is
    as old as the handshake, not the handshake plus the wait for it (a drain's herd)."""
    link = MemoryLink(MemoryReplica("a"), MemoryReplica("b"), respond=ramp)
    e, _ = drained(link)
    e.step(handshake=False)  # the notice: RECONNECTING, reported at once (a state change)
    before = len(link.telemetry)
    at_handshake: list[int] = []
    original = link.handshake

    def spy(*args, **kwargs):
        at_handshake.append(len(link.telemetry))
        return original(*args, **kwargs)

    link.handshake = spy  # type: ignore[method-assign]
    e.step()
    assert at_handshake == [before + 1]
    assert link.telemetry[before].state == "RECONNECTING"


@pytest.mark.parametrize(("horizon", "chunk_size", "sent"), [(8, 20, 8), (50, 20, 20)])
def test_a_slow_link_sends_an_rtc_delay_capped_at_the_horizon_and_chunk(horizon, chunk_size, sent):
    """A 2 s round trip is 60 steps at 30 fps: the request carries the server's horizon or the chunk size at most."""
    ticks = iter(range(0, 10**12, 2_000_000_000))  # every reading of the request clock is 2 s after the last
    link = MemoryLink(MemoryReplica("mem-1", rtc=True, chunk_size=chunk_size), respond=ramp)
    cfg = RemoteInferenceConfig(rtc=RTCConfig(enabled=True, execution_horizon=horizon), buffer_time_s=5.0)
    e = unstarted(link, cfg, request_clock_ns=lambda: next(ticks))
    e.start(worker=False)
    e.resume()
    e.notify_observation(OBS)
    try:
        e.step()  # the first request: no round trip measured yet
        e.step()  # its chunk merges (RTT 2 s), and the next request goes
        assert e.latency.delay_steps(1 / 30) == 60 and len(link.requests) == 2
        assert [obs.inference_delay_steps for _, obs in link.requests] == [0, sent]
        assert e.delay_steps() == e.stats().delay_steps == sent
    finally:
        e.stop()


def test_a_quiet_robot_says_when_it_next_needs_a_step():
    """`quiet_until`: None while a request is in flight; once a chunk is merged, the time the queue runs down to
    `buffer_time_s`, never after the telemetry period; a robot stepped only then (or when woken) keeps streaming."""
    link = MemoryLink()  # silent: the test answers by hand
    e = engine(link, buffer_time_s=0.1, telemetry_period_s=5.0, telemetry_max_period_s=5.0)
    e.step()  # the first request goes
    assert e.requests.current is not None and e.quiet_until(time.monotonic()) is None
    header, _ = link.requests[-1]
    link.reply(header, np.zeros((30, 3), np.float32))  # 1 s of actions at 30 fps
    e.step()
    now = time.monotonic()
    due = e.quiet_until(now)
    assert e.state is LinkState.STREAMING and due is not None
    assert now + 0.8 <= due <= now + 0.9 + 1e-3  # 30 fresh actions = 1 s, sent when 0.1 s are left
    for _ in range(27):  # the control loop consumes 0.9 s worth
        assert e.get_action() is not None
    now = time.monotonic()
    assert e.quiet_until(now) <= now + 0.01  # at the buffer: due now
    e.step()
    assert e.requests.current is not None and len(link.requests) == 2  # and the step sends
    e.stop()
