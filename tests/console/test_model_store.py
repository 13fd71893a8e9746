"""Unit tests of the pure model and the thread-safe store (frozen clock, no UI, no network)."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from lerobot_fleet.console.filters import robot_matches
from lerobot_fleet.data.capacity import n_max
from lerobot_fleet.data.fmt import fmt_age, sparkline
from lerobot_fleet.data.model import RobotState
from lerobot_fleet.data.sorting import sort_robots
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import RECONNECT_GRACE_S, FleetStore

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import AuditLine, ModelInfo, RobotTelemetry, ServerStatus, SessionInfo

NS = Namespace("m", "main", "task")


def test_n_max_matches_the_spec_examples():
    # ACT @ 20 ms, 1 Hz, 50-step chunks at 30 fps, 10 ms RTT: ~40 clients (utilisation bound)
    assert n_max(0.020, 1.0, 50, 1 / 30, 0.010) == pytest.approx(40.0)
    # Pi0 @ 150 ms: ~5 clients
    assert n_max(0.150, 1.0, 50, 1 / 30, 0.010) == pytest.approx(0.8 / 0.15)
    # latency bound wins when the horizon is short: (10 * 0.02 / 2 - 0.05) / 0.01 = 5
    assert n_max(0.010, 0.1, 10, 0.02, 0.05) == pytest.approx(5.0)
    assert n_max(0.010, 1.0, 2, 0.02, 0.5) == 0.0  # RTT above the horizon: no client fits
    assert n_max(0.0, 1.0, 10, 0.02, 0.0) is None


def test_formatting_helpers():
    assert [fmt_age(x) for x in (None, 0.2, 3.7, 12, 59, 61, 700)] == ["—", "<1s", "3s", "10s", "50s", "1m", "10m+"]
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5]) == "▁▁" and sparkline([]) == ""
    assert RobotState.parse("streaming") is RobotState.STREAMING
    assert RobotState.parse("[bold]weird") is RobotState.UNKNOWN


def _tel(rid: str, state: str = "STREAMING", **kw) -> RobotTelemetry:
    return RobotTelemetry(client_uuid=rid, state=state, **kw)


def test_sort_is_total_and_filter_inverts():
    store = FleetStore(clock=ManualClock())
    for rid, st in (("b", "STREAMING"), ("a", "STREAMING"), ("c", "DEAD")):
        store.on_telemetry(_tel(rid, st, replica="gpu-0"), NS)
    rows = list(store.snapshot().robots)
    assert [r.robot_id for r in sort_robots(rows, "state")] == ["c", "a", "b"]
    assert [r.robot_id for r in sort_robots(rows, "robot")] == ["a", "b", "c"]
    assert [r.robot_id for r in rows if robot_matches(r, "!dead")] == ["b", "a"]


def test_gone_only_when_the_console_link_was_up():
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    clock.advance(1)
    for rid in ("r1", "r2"):
        store.on_robot_alive(rid, True, NS)
        store.on_telemetry(_tel(rid), NS)
    clock.advance(1)
    store.on_robot_alive("r1", False, NS)  # r1 really left
    clock.advance(2)
    store.set_connection("disconnected")  # router gone: r2's token is reported deleted too
    store.on_robot_alive("r2", False, NS)
    clock.advance(10)
    snap = store.snapshot()
    assert snap.robot("r1").state is RobotState.GONE
    assert snap.robot("r2").state is RobotState.STREAMING
    assert snap.data_age_s == pytest.approx(13.0)  # last telemetry 13 s ago
    # Reconnect: r2 is re-announced by liveliness history; r1 is still gone after the grace period.
    store.set_connection("connected")
    clock.advance(0.1)
    store.on_robot_alive("r2", True, NS)
    clock.advance(RECONNECT_GRACE_S + 0.5)
    snap = store.snapshot()
    assert snap.robot("r1").state is RobotState.GONE and snap.robot("r2").state is RobotState.STREAMING


def test_server_rate_capacity_and_audit_tail():
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    sessions = [SessionInfo(session_id=f"s{i}", client_uuid=f"r{i}") for i in range(4)]
    status = ServerStatus(
        replica="gpu-0",
        model=ModelInfo(repo_or_path="m", revision="main"),
        service="task",
        max_sessions=8,
        active_sessions=4,
        chunk_size=50,
        trained_fps=30.0,
        inference_ms_p50=20.0,
        warmed_up=True,
        sessions=sessions,
    )
    store.on_server_alive("gpu-0", True, NS)
    store.on_status(status, NS)
    store.on_metrics("gpu-0", {"requests_total": 100.0, "errors_total": 1.0})
    clock.advance(2.0)
    store.on_metrics("gpu-0", {"requests_total": 108.0, "errors_total": 1.0})
    for i in range(80):
        store.on_audit(
            AuditLine(
                ts="t", session_id="s0", client_uuid="r0", seq_id=i, episode_id=0, queue_wait_ms=1, inference_ms=20
            ),
            "gpu-0",
            NS,
        )
    row = store.snapshot().server("gpu-0")
    assert row.requests_per_s == pytest.approx(4.0)
    assert row.health == "ok" and row.errors == 1.0
    # r = 4 req/s / 4 sessions = 1 Hz; t = 20 ms -> utilisation bound 40
    # room = min(N_max 40, session cap 8) - 4 active: the cap limits it (it used to say +36)
    assert row.n_max == pytest.approx(40.0) and row.headroom == 4 and row.room_limit == "cap"
    detail = store.server_detail("gpu-0")
    assert len(detail.audit) == 50 and detail.audit[-1].seq_id == 79  # bounded tail, newest last
    assert dict(detail.capacity_inputs)["N_max"] == "40.0"
    # A batching server: one 123 ms pass serves 8 robots -> 65 chunks/s of model time; t = 1/65 s, not 123 ms
    batched = replace(status, inference_ms_p50=123.0, max_batch=8, batch_size_mean=8.0, chunks_per_s=8 / 0.123)
    store.on_status(batched, NS)
    row = store.snapshot().server("gpu-0")
    assert row.n_max == pytest.approx(0.8 / (1.0 * 0.123 / 8), rel=1e-3)  # 52, where one-per-pass t would say 6.5
    assert "mean batch 8.0" in dict(store.server_detail("gpu-0").capacity_inputs)["t (model time per chunk)"]
    store.on_status(replace(batched, chunk_size=4), NS)  # H*dt/2 = 67 ms < one 123 ms pass: nobody fits
    assert store.snapshot().server("gpu-0").n_max == 0.0
    store.on_status(status, NS)
    clock.advance(10)
    assert store.snapshot().server("gpu-0").health == "stale"  # status stopped answering
    store.on_metrics("gpu-0", None, "connection refused")
    assert store.server_detail("gpu-0").notes == ("metrics: connection refused",)


def test_store_under_concurrent_writers():
    """Four writers race the reader: every snapshot is a consistent picture (one row per robot, only robots
    that were written, values as written), and none of the 200 robots is lost."""
    store = FleetStore()
    stop = threading.Event()
    errors: list[BaseException] = []
    rounds = [0] * 4
    expected = {f"r{n}-{j}" for n in range(4) for j in range(50)}

    def writer(n: int) -> None:
        i = 0
        try:
            while not stop.is_set():
                store.on_telemetry(_tel(f"r{n}-{i % 50}", rtt_p50_ms=float(i % 7 + 1), seq=i), NS)
                store.on_robot_alive(f"r{n}-{i % 50}", i % 3 != 0, NS)
                i += 1
                rounds[n] = i
        except BaseException as exc:  # pragma: no cover - the assertion reports it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(200):
            snap = store.snapshot()
            ids = [r.robot_id for r in snap.robots]
            assert len(ids) == len(set(ids)) and set(ids) <= expected, ids
            assert all(r.rtt_p50_ms in {float(k) for k in range(1, 8)} for r in snap.robots)
            store.robot_detail("r0-1")
        wait_until(lambda: min(rounds) >= 50, timeout=30, message="every writer through all of its 50 robots")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert {r.robot_id for r in store.snapshot().robots} == expected
