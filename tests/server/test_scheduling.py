"""Fairness, newest-wins and liveliness GC with a fixed-time stub model over the real router."""

from __future__ import annotations

import time
import uuid

import numpy as np
from conftest import saturate

from lerobot_policy_remote.server.scheduler import RoundRobin
from lerobot_policy_remote.server.sessions import Mail, Mailbox, Registry, Session
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.testing.waiting import wait_until
from lerobot_policy_remote.wire.data import ActionChunkMsg


def _session(cid: str) -> Session:
    return Session(cid, cid, None, None, 1)


def test_round_robin_ring_is_fair_and_never_starves():
    reg, rr = Registry(), RoundRobin()
    sessions = [_session(f"c{i}") for i in range(4)]
    for s in sessions:
        reg.add(s)
    served: list[str] = []
    for _ in range(40):
        for s in sessions:  # every session always has work (saturated)
            s.mailbox.deposit(Mail(b"x", None, 0.0))
        [pick] = rr.select(reg.ready_in_ring_order())
        pick.mailbox.take()
        reg.served(pick)
        served.append(pick.client_uuid)
    counts = {c: served.count(c) for c in set(served)}
    assert counts == {f"c{i}": 10 for i in range(4)}
    reg.remove("c1")  # removal keeps the ring consistent
    assert [s.client_uuid for s in reg.ready_in_ring_order()] and "c1" not in {
        s.client_uuid for s in reg.ready_in_ring_order()
    }


def test_mailbox_newest_wins_and_counts_superseded():
    mb = Mailbox()
    assert not mb.deposit(Mail(b"1", None, 0.0))
    assert mb.deposit(Mail(b"2", None, 0.0)) and mb.deposit(Mail(b"3", None, 0.0))
    mail, sup = mb.take()
    assert mail.payload == b"3" and sup == 2 and mb.superseded_total == 2
    assert mb.take() == (None, 0)


def test_fairness_each_busy_session_gets_one_nth(server_factory, robots):
    """N saturating robots (always one request in flight): counts differ by at most one cycle."""
    n, t_inf = 4, 0.03
    server = server_factory("stub", backend=StubBackend(t_inf, SIM_ARM_ACTION_NAMES))
    fleet = robots(server, n)
    for r in fleet:
        assert r.open(server.replica).ok
    counts = saturate(server, fleet, 2.5, lambda i: 2)  # a new observation arrives before the previous chunk is back
    total = sum(counts)
    assert total >= 20, counts
    assert max(counts) - min(counts) <= 2, counts  # within one inference of 1/N (plus the one in flight at stop)


def test_newest_wins_stub_reports_superseded(server_factory, robots):
    server = server_factory("stub", backend=StubBackend(0.2, SIM_ARM_ACTION_NAMES))
    [r] = robots(server, 1)
    assert r.open(server.replica).ok
    first = r.send(np.zeros(6))
    wait_until(
        lambda: server.worker.in_flight == 1, 10, interval=0.005, message="the worker to start inferring `first`"
    )
    for v in range(1, 6):
        r.send(np.full(6, float(v)))
    _, c1 = r.wait_for(lambda h, b: isinstance(b, ActionChunkMsg) and h.seq_id == first, 10)
    h2, c2 = r.wait_for(lambda h, b: isinstance(b, ActionChunkMsg), 10)
    assert h2.seq_id == r.seq  # the newest observation won
    np.testing.assert_allclose(c2.chunk_robot[0], np.full(6, 5.0))
    assert c2.superseded_seqs == 4


def test_session_collected_after_grace_not_when_paused(server_factory, robots):
    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES), session_grace_s=1.0)
    paused, leaving = robots(server, 2)
    assert paused.open(server.replica).ok and leaving.open(server.replica).ok
    leaving.drop_token()
    time.sleep(0.5)
    assert server.registry.get(leaving.uuid) is not None  # still within the grace period
    deadline = time.monotonic() + 10
    while server.registry.get(leaving.uuid) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.registry.get(leaving.uuid) is None
    time.sleep(1.5)  # the paused robot sent nothing for longer than the grace period, but is alive
    assert server.registry.get(paused.uuid) is not None
    assert paused.request(np.ones(6), timeout=10).chunk_robot.shape == (10, 6)


def test_server_full_and_reopen_replaces(server_factory, robots):
    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=2))
    a, b, c = robots(server, 3)
    assert a.open(server.replica).ok and b.open(server.replica).ok
    ack = c.open(server.replica)
    assert not ack.ok and ack.code == "server_full" and ack.message == "server full: 2/2 sessions active"
    again = a.open(server.replica)  # same client re-opens: replaces, never "full"
    assert again.ok and server.registry.count() == 2


def test_two_replicas_are_both_discovered_and_observations_reach_only_their_own(server_factory, robots):
    from lerobot_policy_remote.engine.handshake import discover

    task = f"replicated {uuid.uuid4().hex[:6]}"
    a = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES), default_task=task, replica_id="rep-a")
    b = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES), default_task=task, replica_id="rep-b")
    [r] = robots(a, 1)
    # The robot's own discovery (one wildcard status query) must see every replica, each on its own key.
    assert sorted(s.replica for s in discover(r.z, a.keys)) == ["rep-a", "rep-b"]
    assert sorted(s.replica for s in r.statuses()) == ["rep-a", "rep-b"]
    assert r.open("rep-a").ok
    for v in range(3):
        assert r.request(np.full(6, float(v)), timeout=10).session_id
    [on_a] = a.status().sessions
    assert on_a.client_uuid == r.uuid and on_a.requests == 3
    # rep-b never saw this robot's observations (it would have counted them as from an unknown robot).
    assert b.status().sessions == []
    assert b.metrics.value("dropped_unknown_client_total") == 0
    assert r.inbox.empty()  # and no unknown_session event came back


def test_a_full_replica_gives_an_idle_seat_to_a_robot_asking(server_factory, robots):
    """A robot that moved away while its token stayed alive leaves a ghost session: when full, the seat of a
    session idle for `reclaim_idle_s` goes to the robot asking; an active session keeps its seat."""
    server = server_factory(
        "stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=2), reclaim_idle_s=2.0
    )
    ghost, active, waiting = robots(server, 3)
    assert ghost.open(server.replica).ok and active.open(server.replica).ok
    # nobody idle long enough yet (2 s: three round trips on a loaded box took over 0.6)
    assert waiting.open(server.replica).code == "server_full"
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # `active` keeps sending, `ghost` sends nothing
        assert active.request(np.ones(6), timeout=10).session_id
    ack = waiting.open(server.replica)
    assert ack.ok, ack
    assert server.registry.get(ghost.uuid) is None and server.registry.get(active.uuid) is not None
    assert server.metrics.value("sessions_closed_total", reason="idle_reclaimed") == 1
    ghost.send(np.ones(6))  # the ghost's robot, back: told its session is gone, so it re-handshakes
    _, msg = ghost.wait_for(lambda h, m: getattr(m, "event", "") == "unknown_session", timeout=10)
    assert msg.event == "unknown_session"


def test_a_dry_run_never_takes_an_idle_robots_seat(server_factory, robots):
    """`lerobot-fleet doctor`'s dry run opens nothing, so it closes nothing either: a full replica says so and its idle
    robot keeps its session (the seat goes to a robot that really asks)."""
    server = server_factory(
        "stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=1), reclaim_idle_s=0.2
    )
    holder, doctor, waiting = robots(server, 3)
    assert holder.open(server.replica).ok
    time.sleep(0.4)  # the holder idles past reclaim_idle_s
    assert doctor.open(server.replica, dry_run=True).code == "server_full"
    assert server.registry.get(holder.uuid) is not None
    assert waiting.open(server.replica).ok and server.registry.get(holder.uuid) is None


def test_reclaim_idle_s_zero_never_frees_a_seat(server_factory, robots):
    server = server_factory(
        "stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=1), reclaim_idle_s=0.0
    )
    holder, waiting = robots(server, 2)
    assert holder.open(server.replica).ok
    time.sleep(0.3)  # bounded wait for what must not happen: the holder idles, and still keeps its seat
    assert waiting.open(server.replica).code == "server_full"
    assert server.registry.get(holder.uuid) is not None


def test_a_drain_notice_reaches_every_robot(server_factory, zenoh_client):
    """Every session's robot hears the drain. (In `lerobot-fleet simulate`'s loaded 1,000-robot fleet, notices sent
    express one by one overflowed the TX queue and most robots waited out the token grace instead; they now go batched.
    A quiet loopback does not overflow either way, so this checks delivery, not that cause.)"""
    import threading

    from lerobot_policy_remote.testing.fake_robot import FakeRobot
    from lerobot_policy_remote.wire.codec import decode
    from lerobot_policy_remote.wire.messages import EventMsg

    n = 80  # above a TX queue's worth of express messages; 200 loaded the box for the suite's other worker
    server = server_factory("stub", backend=StubBackend(0.001, SIM_ARM_ACTION_NAMES, max_sessions=n))
    z = zenoh_client()
    heard: set[str] = set()
    lock = threading.Lock()

    def on_event(sample) -> None:
        try:
            ev = decode(EventMsg, sample.payload.to_bytes())
        except Exception:
            return
        if ev.event == "draining":
            with lock:
                heard.add(str(sample.key_expr))

    sub = z.declare_subscriber(server.keys.robot("*", "action"), on_event)  # declared first: it reaches the router
    try:
        fleet = [FakeRobot(z, server.keys, f"herd-{i:03d}-{uuid.uuid4().hex[:4]}", listen=False) for i in range(n)]
        for r in fleet:
            assert r.open(server.replica).ok
        ack = server.drain("test")
        assert ack.ok and len(ack.sessions) == n
        wait_until(lambda: len(heard) == n, timeout=10, message=f"all {n} robots heard the drain")
    finally:
        sub.undeclare()
