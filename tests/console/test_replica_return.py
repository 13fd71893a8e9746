"""A replica that restarts under its own id (the default `<hostname>-<health_port>`) takes its row back.

The console keys server rows by replica id: the restarted process's token and status turn the `gone` row live
again, with the new status, instead of a new row beside a `gone` one; its restarted counters give no negative rate.
"""

from __future__ import annotations

from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import RECONNECT_GRACE_S, FleetStore

from lerobot_policy_remote.server.manifest import default_replica_id
from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus, SessionInfo

NS = Namespace("m", "main", "task")


def status(replica: str, active: int, draining: bool = False) -> ServerStatus:
    return ServerStatus(
        replica=replica,
        model=ModelInfo(repo_or_path="m", revision="main"),
        service="task",
        max_sessions=4,
        active_sessions=active,
        chunk_size=50,
        trained_fps=30.0,
        inference_ms_p50=20.0,
        warmed_up=True,
        draining=draining,
        sessions=[SessionInfo(session_id=f"s{i}", client_uuid=f"r{i}") for i in range(active)],
    )


def test_a_restarted_replica_replaces_its_gone_row():
    replica = default_replica_id(9100)
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    clock.advance(1)
    store.on_server_alive(replica, True, NS)
    store.on_status(status(replica, 2), NS)
    store.on_metrics(replica, {"requests_total": 500.0})
    clock.advance(1)
    store.on_status(status(replica, 2, draining=True), NS)  # SIGTERM: the old process drains and leaves
    store.on_server_alive(replica, False, NS)
    clock.advance(RECONNECT_GRACE_S + 1)
    rows = [s for s in store.snapshot().servers if s.replica == replica]
    assert [r.health for r in rows] == ["gone"]

    store.on_server_alive(replica, True, NS)  # the restarted process: same host, same health port, same id
    store.on_status(status(replica, 0), NS)
    store.on_metrics(replica, {"requests_total": 3.0})  # its counters start again from zero
    clock.advance(2)
    store.on_metrics(replica, {"requests_total": 7.0})
    rows = [s for s in store.snapshot().servers if s.replica == replica]
    assert len(rows) == 1 and rows[0].health == "ok" and rows[0].active_sessions == 0
    assert rows[0].requests_per_s is None or rows[0].requests_per_s >= 0
