"""Identity, console half: the console believes the key a sample arrived on, not the names inside it.

Real parts: the shared router, the console's real `ZenohSource`, the test kit's replica and robots, and a
liar: a peer that publishes on its own keys (what the router's ACL lets its certificate do) payloads that
name another replica or robot.
"""

from __future__ import annotations

import threading

import pytest
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import assert_never, wait_until
from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.codec import encode, encode_json
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import AuditLine, ModelInfo, RobotTelemetry, ServerStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings

KEYS = ServiceKeys.for_service("org/identity", "main", "console identity")
HONEST, LIAR = "gpu-honest", "gpu-liar"
VICTIM, LIAR_ROBOT = "r-victim", "r-liar"


def _source(endpoint: str) -> ZenohSource:
    return ZenohSource(
        ZenohSettings(mode="client", connect_endpoints=[endpoint], connect_timeout_ms=1000, retry_period_max_ms=300),
        status_period_s=0.3,
        scrape_period_s=0.5,
    )


@pytest.mark.slow
def test_a_lying_publisher_never_overwrites_another_replica_or_robot(router, zenoh_client):
    s = zenoh_client()
    honest = FakeServer(s, KEYS, replica=HONEST, serve_obs=False)
    honest.add_session(VICTIM, "s-victim")
    victim = FakeRobot(s, KEYS, VICTIM, listen=False)
    liar_robot = FakeRobot(s, KEYS, LIAR_ROBOT, listen=False)
    # the liar replica: its own status key answers with a body claiming to be the honest replica, draining
    lie = encode(
        ServerStatus(
            replica=HONEST,
            model=ModelInfo(repo_or_path="org/identity", revision="main"),
            service="console identity",
            draining=True,
            max_sessions=99,
        )
    )

    def lying_status(query) -> None:
        with query:
            query.reply(KEYS.server(LIAR, "status"), lie)

    decls = [
        s.declare_queryable(KEYS.server(LIAR, "status"), lying_status),
        s.liveliness().declare_token(KEYS.server(LIAR, "alive")),
    ]
    liar_audit = s.declare_publisher(KEYS.server(LIAR, "audit"))
    stop = threading.Event()

    def publish() -> None:
        seq = 0
        while not stop.wait(0.1):
            seq += 1
            victim.publish_telemetry(RobotTelemetry(client_uuid=VICTIM, state="STREAMING", replica=HONEST, seq=seq))
            honest.audit(VICTIM, seq_id=seq)
            # the lies: on the liar's own keys, payloads naming the honest replica and the victim robot
            liar_audit.put(
                encode_json(
                    AuditLine(
                        ts="2026-01-01T00:00:00+00:00",
                        session_id="s-victim",
                        client_uuid=VICTIM,
                        seq_id=10_000 + seq,
                        episode_id=0,
                        queue_wait_ms=1.0,
                        inference_ms=1.0,
                        replica=HONEST,
                        outcome="internal_error",
                        error="forged",
                    )
                )
            )
            liar_robot.publish_telemetry(RobotTelemetry(client_uuid=VICTIM, state="DEAD", replica=LIAR, seq=seq))

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    store = FleetStore()
    source = _source(router.endpoint)
    source.start(store)
    try:
        wait_until(
            lambda: (
                store.server_detail(HONEST)
                and len(store.server_detail(HONEST).audit) >= 5
                and (r := store.snapshot().server(HONEST))
                and r.max_sessions == 4
            ),
            timeout=15,
            message="honest data in, lies counted",
        )

        def honest_picture() -> bool:
            snap = store.snapshot()
            detail = store.server_detail(HONEST)
            victim_row = next(r for r in snap.robots if r.robot_id == VICTIM)
            return (
                all(a.outcome == "ok" and a.seq_id < 10_000 for a in detail.audit)
                and snap.server(HONEST).health != "draining"
                and snap.server(HONEST).max_sessions == 4
                and victim_row.state is RobotState.STREAMING
            )

        assert honest_picture()
        assert_never(
            lambda: not honest_picture(), 1.5, message="a lie reaching the honest replica's or the victim's row"
        )
        assert source.mismatched >= 4  # counted
        snap = store.snapshot()
        liar_row = next((r for r in snap.robots if r.robot_id == LIAR_ROBOT), None)
        # the liar's token makes it a row, but none of its telemetry (which names the victim) was believed
        assert liar_row is None or liar_row.seen_age_s is None
        assert any(n.startswith(("dropped audit", "dropped telemetry")) for n in snap.notes), snap.notes
        liar_server = snap.server(LIAR)
        assert liar_server is None or liar_server.max_sessions != 99  # the forged status is nobody's
    finally:
        stop.set()
        t.join(timeout=3)
        source.stop()
        for d in decls:
            d.undeclare()
        liar_audit.undeclare()
        victim.close()
        liar_robot.close()
        honest.close()


@pytest.mark.slow
def test_robots_in_many_namespaces_cannot_grow_the_console_without_bound(router, zenoh_client):
    """Robots publishing telemetry in more namespaces than the cap (each id in one: no per-id bound applies, as when
    anyone may use any id): the first MAX_NAMESPACES are shown, the rest dropped, counted and noted."""
    from lerobot_fleet.data.admission import MAX_NAMESPACES

    s = zenoh_client()
    n = MAX_NAMESPACES + 44
    store = FleetStore()
    source = _source(router.endpoint)
    source.start(store)
    try:
        wait_until(lambda: store.snapshot().connection == "connected", timeout=15, message="connected")
        first = ServiceKeys.for_service("org/sprawl-0", "main", "t").robot("r-sprawl-0", "telemetry")

        def probe() -> bool:  # the source's subscriber is declared at the router once a sample gets through
            s.put(first, encode(RobotTelemetry(client_uuid="r-sprawl-0", state="STREAMING")))
            return source.received >= 1

        wait_until(probe, timeout=15, interval=0.1, message="the source receiving")
        base = source.received
        import zenoh

        for i in range(n):  # BLOCK: a burst of puts must all arrive, whatever the box's load (the default drops)
            s.put(
                ServiceKeys.for_service(f"org/sprawl-{i}", "main", "t").robot(f"r-sprawl-{i}", "telemetry"),
                encode(RobotTelemetry(client_uuid=f"r-sprawl-{i}", state="STREAMING")),
                congestion_control=zenoh.CongestionControl.BLOCK,
            )
        wait_until(lambda: source.received >= base + n, timeout=15, message="every sample decoded")
        wait_until(lambda: source.admission.refused >= n - MAX_NAMESPACES, timeout=5, message="the overflow refused")
        snap = store.snapshot()
        sprawl = [r for r in snap.robots if r.robot_id.startswith("r-sprawl-")]
        assert len(sprawl) <= MAX_NAMESPACES
        assert any("namespace cap reached" in note for note in snap.notes), snap.notes
    finally:
        source.stop()
