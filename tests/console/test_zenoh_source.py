"""The console's Zenoh source through a real router, fed by test-side peers that follow the protocol exactly
(liveliness tokens, telemetry and audit puts, status and drain queryables), plus hostile bytes and a
router that dies and comes back."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sources.replay import ReplaySource
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import LINK_LOSS_MARGIN_S, RECONNECT_GRACE_S, FleetStore

from lerobot_policy_remote.testing import VENV_BIN, assert_never, wait_until
from lerobot_policy_remote.testing.fake_robot import FakeRobot
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import ModelInfo, RobotTelemetry, ServerStatus
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

MODEL, REV, TASK = "org/tiny act", "main", "stack [red]cubes[/red]"  # free text with spaces and markup
KEYS = ServiceKeys.for_service(MODEL, REV, TASK)
REPLICA = "gpu-t-0"
ROBOTS = ("r-a", "r-b")


class FakeFleetPeer:
    """The kit's replica and two of its robots on one client session, publishing telemetry and audit every 0.2 s."""

    def __init__(self, endpoint: str) -> None:
        self.s = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint], lease_ms=1000))
        self.server = FakeServer(self.s, KEYS, replica=REPLICA, serve_obs=False)
        self.robots = {rid: FakeRobot(self.s, KEYS, rid, listen=False) for rid in ROBOTS}
        for rid in ROBOTS:
            self.server.add_session(rid, f"s-{rid}")
        self.publishing = set(ROBOTS)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._publish, daemon=True)
        self.thread.start()

    def _publish(self) -> None:
        seq = 0
        while not self.stop.wait(0.2):  # the engine's telemetry period, scaled down
            seq += 1
            for rid in list(self.publishing):
                self.robots[rid].publish_telemetry(
                    RobotTelemetry(
                        client_uuid=rid,
                        state="STREAMING",
                        replica=REPLICA,
                        session_id=f"s-{rid}",
                        episode_id=1,
                        rtt_p50_ms=30.0,
                        rtt_p95_ms=50.0,
                        requests=10,
                        seq=seq,
                    )
                )
            self.server.audit("r-a", seq_id=seq, episode_id=1)

    def leave(self, rid: str) -> None:
        """`rid` vanishes as a crashed robot does: token gone, telemetry stops."""
        self.publishing.discard(rid)
        self.robots[rid].drop_token()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=3)
        for robot in self.robots.values():
            robot.close()
        self.server.close()
        self.s.close()


@pytest.fixture
def rig(own_router, tmp_path):
    peer = FakeFleetPeer(own_router.endpoint)
    store = FleetStore()
    source = ZenohSource(
        ZenohSettings(
            mode="client", connect_endpoints=[own_router.endpoint], connect_timeout_ms=1000, retry_period_max_ms=300
        ),
        status_period_s=0.5,
        scrape_period_s=0.5,
        record_path=str(tmp_path / "rec.jsonl"),
    )
    source.start(store)
    yield own_router, peer, store, source
    source.stop()
    peer.close()


@pytest.mark.slow
def test_zenoh_source_end_to_end(rig, tmp_path):
    router, peer, store, source = rig
    snap = wait_until(
        lambda: (
            (s := store.snapshot())
            and all(s.robot(r) and s.robot(r).seen_age_s is not None for r in ROBOTS)
            and s.server(REPLICA)
            and s.server(REPLICA).max_sessions
            and s
        ),
        timeout=15,
        message="fleet",
    )
    assert snap.connection == "connected"
    a = snap.robot("r-a")
    assert a.state is RobotState.STREAMING and a.service == TASK and a.model_id and a.alive is True
    srv = snap.server(REPLICA)
    assert srv.service == TASK and srv.health == "ok" and srv.session_robots == ("r-a", "r-b")
    wait_until(lambda: store.server_detail(REPLICA).audit, timeout=15, message="audit lines")
    assert store.robot_detail("r-a").audit[-1].client_uuid == "r-a"

    # hostile bytes on a telemetry key: a note, no crash, the others keep flowing
    peer.s.put(KEYS.robot("r-x", "telemetry"), b"\xc1\xff not msgpack")
    wait_until(
        lambda: any("bad telemetry" in n for n in store.snapshot().notes),
        timeout=15,
        message="a note about the bad sample",
    )
    assert store.snapshot().robot("r-x") is None

    # a robot's token vanishes while we are connected: kept and marked GONE
    peer.leave("r-b")
    wait_until(lambda: store.snapshot().robot("r-b").state is RobotState.GONE, timeout=15, message="r-b gone")

    # the drain verb, as a script would run it (no namespace given: wildcard)
    out = subprocess.run(
        [
            str(VENV_BIN / "lerobot-fleet"),
            "drain",
            REPLICA,
            "--json",
            "--router",
            router.endpoint,
            "--reason",
            "maintenance",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    ack = json.loads(out.stdout)
    assert ack["ok"] and ack["sessions"] == ["s-r-a", "s-r-b"]
    assert (
        peer.server.drains[-1].reason == "maintenance" and "lerobot-fleet drain" in peer.server.drains[-1].requested_by
    )
    wait_until(lambda: store.snapshot().server(REPLICA).health == "draining", timeout=15, message="draining in status")

    # the source's own drain (what the console uses): the namespace learnt from the keys
    result = source.drain(REPLICA, "again", "pytest")
    assert result.ok and len(result.sessions) == 2
    assert [d.reason for d in peer.server.drains] == ["maintenance", "again"]

    # the router dies: disconnected, data age grows, robots are not declared gone
    # r-b must have left well before the outage (deletions just before one are blamed on the link)
    assert_never(
        lambda: store.snapshot().robot("r-b").state is not RobotState.GONE,
        LINK_LOSS_MARGIN_S + 0.5,
        message="r-b coming back before the outage",
    )
    router.kill()
    wait_until(lambda: store.snapshot().connection == "disconnected", timeout=15, message="disconnected")
    age1 = store.snapshot().data_age_s
    assert_never(
        lambda: store.snapshot().robot("r-a").state is not RobotState.STREAMING,
        1.5,
        message="r-a declared gone (or anything but STREAMING) while the console is blind",
    )
    snap = store.snapshot()
    assert snap.data_age_s > age1 + 1.0
    assert snap.robot("r-b").state is RobotState.GONE  # it left before the outage
    assert not source.drain(REPLICA, "x", "pytest").ok  # no answer while blind; never an exception

    # the router comes back: clients reconnect and redeclare; data flows again
    router.start()
    wait_until(lambda: store.snapshot().connection == "connected", timeout=30, message="reconnected")
    wait_until(lambda: (store.snapshot().data_age_s or 99) < 1.0, timeout=30, message="fresh data")
    wait_until(lambda: store.snapshot().robot("r-a").alive is True, timeout=30, message="r-a re-announced")
    # r-b was not re-announced: GONE again once the reconnect grace has passed, while r-a stays
    wait_until(
        lambda: store.snapshot().robot("r-b").state is RobotState.GONE,
        timeout=RECONNECT_GRACE_S + 15,
        message="r-b gone after the reconnect grace",
    )
    snap = store.snapshot()
    assert snap.robot("r-a").state is RobotState.STREAMING and snap.robot("r-a").alive is True

    # what was recorded replays into the same picture (read-only)
    source.stop()
    replayed = FleetStore()
    ReplaySource(tmp_path / "rec.jsonl", speed=0).start(replayed)
    snap = replayed.snapshot()
    assert snap.robot("r-a").state is RobotState.STREAMING and snap.robot("r-a").service == TASK
    assert snap.server(REPLICA).session_robots == ROBOTS


def test_status_replies_are_believed_only_for_the_replica_their_key_names(zenoh_client):
    """A status reply counts only when the key it came on names the replica its body claims (the router's ACL
    lets only that replica answer there): one on the query's wildcard key, or on another replica's key, is dropped."""
    from lerobot_fleet.data.sources.zenoh_source import query_statuses

    keys = ServiceKeys.for_service("org/consolidation", "main", "task")

    def replier(body: bytes, on_wildcard: bool = False):
        def handle(query) -> None:
            with query:
                query.reply(query.key_expr if on_wildcard else keys.server("rep-0", "status"), body)

        return handle

    def status(replica: str) -> bytes:
        return encode(
            ServerStatus(
                replica=replica, model=ModelInfo(repo_or_path="org/consolidation", revision="main"), service="task"
            )
        )

    decls = [
        zenoh_client().declare_queryable(keys.server("rep-0", "status"), replier(status("rep-0"))),  # honest
        zenoh_client().declare_queryable(keys.server("rep-1", "status"), replier(status("rep-1"), on_wildcard=True)),
        zenoh_client().declare_queryable(
            keys.server("rep-2", "status"), replier(status("rep-9"))
        ),  # claims another replica
    ]
    console = zenoh_client()
    got = wait_until(
        lambda: (
            (
                found := {
                    s.replica: ns
                    for s, ns in query_statuses(console, 2.0)
                    if s.model.repo_or_path == "org/consolidation"
                }
            )
            and found
        ),
        timeout=15,
        message="the honest replica",
    )
    assert_never(
        lambda: (
            set({s.replica for s, _ in query_statuses(console, 1.0) if s.model.repo_or_path == "org/consolidation"})
            - {"rep-0"}
        ),
        1.0,
        message="a reply whose key does not vouch for its replica",
    )
    assert set(got) == {"rep-0"} and got["rep-0"] == ("org/consolidation", "main", "task")
    assert decls


def test_a_console_that_connects_shows_a_quiet_robot_at_once(router, zenoh_client):
    """A robot whose next telemetry report is a minute away is on the table within a second of the console
    connecting: the console asks every robot for its telemetry when it connects, and the robot's engine answers."""
    import lerobot.rollout  # noqa: F401
    from lerobot.policies.rtc.configuration_rtc import RTCConfig

    from lerobot_policy_remote.engine.config import RemoteInferenceConfig
    from lerobot_policy_remote.engine.remote import RemoteInferenceEngine

    names = [f"j{i}.pos" for i in range(6)]
    model = "fake-model-quiet-robot"
    server = FakeServer(zenoh_client(), ServiceKeys.for_service(model, "main", "task"))
    cfg = RemoteInferenceConfig(
        connect_endpoint=router.endpoint,
        client_uuid="quiet-arm",
        rtc=RTCConfig(enabled=False),
        telemetry_period_s=60.0,
        max_action_age_s=60.0,  # nor does staleness make it report (at 2/3 of this bound)
    )
    hw = {"observation.state": {"dtype": "float32", "shape": (6,), "names": names}}
    e = RemoteInferenceEngine(cfg, hw_features=hw, ordered_action_keys=names, task="task", fps=30, model_id=model)
    e.start()
    e.resume()
    store = FleetStore()
    source = ZenohSource(ZenohSettings(mode="client", connect_endpoints=[router.endpoint], connect_timeout_ms=1000))
    try:
        e.notify_observation({n: 0.0 for n in names})
        wait_until(lambda: e.counters["chunks"] >= 1, timeout=10, message="the robot's first chunk")
        seq = e.telemetry_seq
        source.start(store)
        row = wait_until(
            lambda: (r := store.snapshot().robot("quiet-arm")) and r.seen_age_s is not None and r,
            timeout=3,
            message="the quiet robot's row",
        )
        assert row.state is RobotState.STREAMING and row.replica == server.replica
        assert e.telemetry_seq == seq  # no report was published meanwhile: the row came from the answer
    finally:
        source.stop()
        e.stop()
        server.close()
