"""The console's Zenoh source through a real router, fed by test-side peers that follow the protocol exactly
(liveliness tokens, telemetry and audit puts, status and drain queryables), plus hostile bytes and a
router that dies and comes back."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import replace

import pytest
from lerobot_fleet.model import RobotState
from lerobot_fleet.sources.replay import ReplaySource
from lerobot_fleet.sources.zenoh_source import ZenohSource
from lerobot_fleet.store import FleetStore
from support.procs import VENV_BIN

from lerobot_policy_remote.wire.codec import decode, encode, encode_json
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import (
    AuditLine,
    DrainAck,
    DrainRequest,
    ModelInfo,
    RobotTelemetry,
    ServerStatus,
    SessionInfo,
)
from lerobot_policy_remote.zenoh_config import ZenohSettings, open_session

MODEL, REV, TASK = "org/tiny act", "main", "stack [red]cubes[/red]"  # free text with spaces and markup
KEYS = ServiceKeys.for_service(MODEL, REV, TASK)
REPLICA = "gpu-t-0"


def wait_for(pred, timeout: float = 15.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class FakeFleetPeer:
    """A protocol-exact stand-in for one server replica and two robots, on one client session."""

    def __init__(self, endpoint: str) -> None:
        self.s = open_session(ZenohSettings(mode="client", connect_endpoints=[endpoint], lease_ms=1000))
        self.drains: list[DrainRequest] = []
        self.draining = False
        live = self.s.liveliness()
        self.tokens = {
            "server": live.declare_token(KEYS.server(REPLICA, "alive")),
            "r-a": live.declare_token(KEYS.robot("r-a", "alive")),
            "r-b": live.declare_token(KEYS.robot("r-b", "alive")),
        }
        self.decls = [
            self.s.declare_queryable(KEYS.server(REPLICA, "status"), self._status),
            self.s.declare_queryable(KEYS.server(REPLICA, "drain"), self._drain),
        ]
        self.tel = {rid: RobotTelemetry(client_uuid=rid, state="STREAMING", replica=REPLICA, session_id=f"s-{rid}", episode_id=1, rtt_p50_ms=30.0, rtt_p95_ms=50.0, requests=10) for rid in ("r-a", "r-b")}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._publish, daemon=True)
        self.thread.start()

    def status(self) -> ServerStatus:
        return ServerStatus(
            replica=REPLICA, model=ModelInfo(repo_or_path=MODEL, revision=REV), service=TASK, max_sessions=4, active_sessions=2,
            chunk_size=20, trained_fps=30.0, inference_ms_p50=12.0, warmed_up=True, draining=self.draining,
            sessions=[SessionInfo(session_id=f"s-{r}", client_uuid=r) for r in ("r-a", "r-b")],
        )

    def _status(self, query) -> None:
        with query:
            query.reply(KEYS.server(REPLICA, "status"), encode(self.status()))

    def _drain(self, query) -> None:
        with query:
            req = decode(DrainRequest, query.payload.to_bytes())
            self.drains.append(req)
            self.draining = True
            query.reply(KEYS.server(REPLICA, "drain"), encode(DrainAck(ok=True, message="draining", sessions=["s-r-a", "s-r-b"])))

    def _publish(self) -> None:
        seq = 0
        while not self.stop.wait(0.2):
            seq += 1
            for rid, tel in list(self.tel.items()):
                self.s.put(KEYS.robot(rid, "telemetry"), encode(replace(tel, seq=seq)))
            self.s.put(KEYS.server(REPLICA, "audit"), encode_json(AuditLine(
                ts="2026-01-01T00:00:00+00:00", session_id="s-r-a", client_uuid="r-a", seq_id=seq, episode_id=1,
                queue_wait_ms=1.0, inference_ms=12.0, replica=REPLICA)))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=3)
        for d in [*self.decls, *self.tokens.values()]:
            try:
                d.undeclare()
            except Exception:
                pass
        self.s.close()


@pytest.fixture
def rig(own_router, tmp_path):
    peer = FakeFleetPeer(own_router.endpoint)
    store = FleetStore()
    source = ZenohSource(ZenohSettings(mode="client", connect_endpoints=[own_router.endpoint], connect_timeout_ms=1000,
                                       retry_period_max_ms=300), status_period_s=0.5, scrape_period_s=0.5,
                         record_path=str(tmp_path / "rec.jsonl"))
    source.start(store)
    yield own_router, peer, store, source
    source.stop()
    peer.close()
    # what was recorded replays into the same picture (read-only)
    replayed = FleetStore()
    ReplaySource(tmp_path / "rec.jsonl", speed=0).start(replayed)
    snap = replayed.snapshot()
    assert snap.robot("r-a").state is RobotState.STREAMING and snap.robot("r-a").service == TASK
    assert snap.server(REPLICA).session_robots == ("r-a", "r-b")


def test_zenoh_source_end_to_end(rig):
    router, peer, store, source = rig
    snap = wait_for(lambda: (s := store.snapshot()) and all(s.robot(r) and s.robot(r).seen_age_s is not None for r in ("r-a", "r-b"))
                    and s.server(REPLICA) and s.server(REPLICA).max_sessions and s, what="fleet")
    assert snap.connection == "connected"
    a = snap.robot("r-a")
    assert a.state is RobotState.STREAMING and a.service == TASK and a.model_id and a.alive is True
    srv = snap.server(REPLICA)
    assert srv.service == TASK and srv.health == "ok" and srv.session_robots == ("r-a", "r-b")
    wait_for(lambda: store.server_detail(REPLICA).audit, what="audit lines")
    assert store.robot_detail("r-a").audit[-1].client_uuid == "r-a"

    # hostile bytes on a telemetry key: a note, no crash, the others keep flowing
    peer.s.put(KEYS.robot("r-x", "telemetry"), b"\xc1\xff not msgpack")
    wait_for(lambda: any("bad telemetry" in n for n in store.snapshot().notes), what="a note about the bad sample")
    assert store.snapshot().robot("r-x") is None

    # a robot's token vanishes while we are connected: kept and marked GONE
    peer.tokens["r-b"].undeclare()
    del peer.tel["r-b"]
    wait_for(lambda: store.snapshot().robot("r-b").state is RobotState.GONE, what="r-b gone")

    # the drain verb, as a script would run it (no namespace given: wildcard)
    out = subprocess.run([str(VENV_BIN / "lerobot-fleet"), "drain", REPLICA, "--json", "--router", router.endpoint, "--reason", "maintenance"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    ack = json.loads(out.stdout)
    assert ack["ok"] and ack["sessions"] == ["s-r-a", "s-r-b"]
    assert peer.drains[-1].reason == "maintenance" and "lerobot-fleet drain" in peer.drains[-1].requested_by
    wait_for(lambda: store.snapshot().server(REPLICA).health == "draining", what="draining in status")

    # the source's own drain (what the console uses): the namespace learnt from the keys
    result = source.drain(REPLICA, "again", "pytest")
    assert result.ok and len(result.sessions) == 2

    # the router dies: disconnected, data age grows, robots are not declared gone
    time.sleep(1.0)  # r-b left well before the outage (deletions just before it are blamed on the link)
    router.kill()
    wait_for(lambda: store.snapshot().connection == "disconnected", what="disconnected")
    age1 = store.snapshot().data_age_s
    time.sleep(1.5)
    snap = store.snapshot()
    assert snap.data_age_s > age1 + 1.0
    assert snap.robot("r-a").state is RobotState.STREAMING
    assert snap.robot("r-b").state is RobotState.GONE  # it left before the outage
    assert not source.drain(REPLICA, "x", "pytest").ok  # no answer while blind; never an exception

    # the router comes back: clients reconnect and redeclare; data flows again
    router.start()
    wait_for(lambda: store.snapshot().connection == "connected", timeout=30, what="reconnected")
    wait_for(lambda: (store.snapshot().data_age_s or 99) < 1.0, timeout=30, what="fresh data")
    time.sleep(3.5)  # past the reconnect grace: r-a was re-announced, r-b was not
    snap = store.snapshot()
    assert snap.robot("r-a").state is RobotState.STREAMING and snap.robot("r-a").alive is True
    assert snap.robot("r-b").state is RobotState.GONE


def test_status_query_sees_every_replica_even_on_the_wildcard_key(zenoh_client):
    """Replicas that reply on the query's (wildcard) key would be collapsed to one by zenoh's default
    consolidation; the console asks with consolidation NONE so each replica still shows."""
    from lerobot_fleet.sources.zenoh_source import query_statuses

    keys = ServiceKeys.for_service("org/consolidation", "main", "task")
    def replier(body: bytes):
        def handle(query) -> None:
            with query:
                query.reply(query.key_expr, body)  # the wildcard key, not the replica's own

        return handle

    decls = []
    for i in range(2):
        status = ServerStatus(replica=f"rep-{i}", model=ModelInfo(repo_or_path="org/consolidation", revision="main"), service="task")
        decls.append(zenoh_client().declare_queryable(keys.server(f"rep-{i}", "status"), replier(encode(status))))
    console = zenoh_client()
    got = wait_for(lambda: (found := {s.replica: ns for s, ns in query_statuses(console, 2.0) if s.model.repo_or_path == "org/consolidation"})
                   and len(found) == 2 and found, what="both replicas")
    assert got["rep-0"] == ("org/consolidation", "main", "task")
