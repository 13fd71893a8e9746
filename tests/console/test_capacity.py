"""One capacity truth (`lerobot_fleet.data.capacity`): the request rate, N_max and room the console,
`lerobot-fleet status` and `lerobot-fleet doctor` show, and doctor's warning for a replica a robot would join past
capacity. Pure: a frozen clock and the store, no network (the live comparison of the three is
tests/console/test_capacity_truth.py)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
from lerobot_fleet.data import capacity
from lerobot_fleet.data.model import ServerRow
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore
from lerobot_fleet.verbs.doctor_checks import capacity_checks, free_session_check
from lerobot_fleet.verbs.doctor_report import PASS, WARN

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import AuditLine, ModelInfo, ServerStatus, SessionInfo

NS = Namespace("m", "main", "task")


def _status(**kw) -> ServerStatus:
    base = dict(
        replica="gpu-0",
        model=ModelInfo(repo_or_path="m", revision="main"),
        service="task",
        max_sessions=4,
        active_sessions=2,
        chunk_size=30,
        trained_fps=30.0,
        inference_ms_p50=100.0,
        warmed_up=True,
        sessions=[SessionInfo(session_id=f"s{i}", client_uuid=f"r{i}") for i in range(2)],
    )
    return ServerStatus(**{**base, **kw})


def _audit(store: FleetStore, n: int) -> None:
    store.on_audit(
        AuditLine(ts="t", session_id="s0", client_uuid="r0", seq_id=n, episode_id=0, queue_wait_ms=1, inference_ms=100),
        "gpu-0",
        NS,
    )


def test_a_short_listen_divides_audit_lines_by_what_it_heard():
    """`status` listens 2.5 s: its audit lines over those 2.5 s are the rate, not over the console's 10 s window
    (2 req/s showed as 0.5; the user saw 0.2 where the console, listening longer, showed 1.5-2.0)."""
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    store.on_server_alive("gpu-0", True, NS)
    store.on_status(_status(), NS)  # an older server: no requests_per_s, no /metrics
    for i in range(5):
        clock.advance(0.5)
        _audit(store, i)
    row = store.snapshot().server("gpu-0")
    assert (row.requests_per_s, row.rate_source) == (pytest.approx(2.0), "audit")
    clock.advance(20.0)  # a console that has listened longer: the whole 10 s window
    for i in range(20):
        clock.advance(0.5)
        _audit(store, i)
    assert store.snapshot().server("gpu-0").requests_per_s == pytest.approx(2.0)


def test_the_servers_own_rate_comes_first_and_every_figure_follows_from_it():
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    store.on_server_alive("gpu-0", True, NS)
    store.on_status(_status(requests_per_s=1.9), NS)
    store.on_metrics("gpu-0", {"requests_total": 100.0})
    clock.advance(2.0)
    store.on_metrics("gpu-0", {"requests_total": 100.4})  # 0.2 req/s between two scrapes: not what the server counted
    row = store.snapshot().server("gpu-0")
    assert (row.requests_per_s, row.rate_source) == (1.9, "server")
    # t = 100 ms, r = 1.9 / 2 = 0.95 Hz, H·dt/2 = 0.5 s, no robots reporting (RTT 0): N_max = min(8.4, 5.0) = 5
    assert row.n_max == pytest.approx(5.0)
    assert (row.headroom, row.room_limit) == (2, "cap")  # min(5, cap 4) - 2
    direct = capacity.capacity(_status(requests_per_s=1.9), capacity.request_rate(1.9, 0.2, None, None))
    assert (direct.n_max, direct.room, direct.room_limit) == (row.n_max, row.headroom, row.room_limit)
    inputs = dict(store.server_detail("gpu-0").capacity_inputs)
    assert inputs["req/s (all its robots)"] == "1.90 — the server's count over its last 10 s"
    # a cordoned replica has no room whatever its figures; its health says why
    store.on_status(_status(requests_per_s=1.9, cordoned=True), NS)
    row = store.snapshot().server("gpu-0")
    assert (row.health, row.headroom, row.room_limit, row.cordoned) == ("cordoned", 0, "cordon", True)
    assert capacity.room_text(row.headroom, row.room_limit) == "0 cordon"


def test_request_rate_sources_in_order():
    assert capacity.request_rate(0.0, 3.0, 7, 1.0) == capacity.Rate(0.0, "server")  # an idle server says 0: believed
    assert capacity.request_rate(None, 3.0, 7, 1.0) == capacity.Rate(3.0, "metrics")
    assert capacity.request_rate(None, None, 7, 3.5) == capacity.Rate(2.0, "audit")
    assert capacity.request_rate(None, None, 7, 0.2) == capacity.Rate(7.0, "audit")  # never divided by less than 1 s
    assert capacity.request_rate(None, None, 7, 60.0) == capacity.Rate(0.7, "audit")
    assert capacity.request_rate(None, None, None, 60.0) == capacity.Rate()


def _row(**kw) -> ServerRow:
    base = dict(
        replica="gpu-0",
        active_sessions=2,
        max_sessions=4,
        health="ok",
        n_max=1.8,
        headroom=-1,
        room_limit="N_max",
        inference_ms_p50=520.0,
        requests_per_s=1.9,
    )
    return ServerRow(**{**base, **kw})


def test_doctor_warns_when_a_robot_would_join_a_replica_past_capacity():
    """A replica with 2 of 4 sessions and N_max 1.8 (room -1): doctor used to say "2 of 4 sessions free"; now it
    warns."""
    (warn,) = capacity_checks([_row()])
    assert warn.status == WARN and warn.name == "capacity"
    assert warn.detail.startswith(
        "replica gpu-0 is past capacity: 2 session(s), N_max 1.8 (room -1 N_max; inference p50 520 ms, 1.9 req/s)"
    )
    assert "lerobot-fleet cordon gpu-0" in warn.fix
    (zero,) = capacity_checks([_row(n_max=0.0, headroom=-2)])  # after a restart: one pass does not fit at all
    assert "does not fit in half a chunk" in zero.detail
    # full by its session cap, room left by N_max, a gone replica: no capacity warning
    assert (
        capacity_checks(
            [
                _row(n_max=9.0, headroom=0, room_limit="cap"),
                _row(n_max=9.0, headroom=3, room_limit="cap"),
                _row(health="gone"),
            ]
        )
        == []
    )
    ack = SimpleNamespace(replica="gpu-0", max_sessions=4, active_sessions=2)
    check = free_session_check(ack, _row())
    assert check.status == WARN
    assert check.detail == (
        "replica gpu-0: 2 of 4 sessions free, but room -1 N_max, N_max 1.8, 1.9 req/s: this robot would run it "
        "past capacity"
    )
    ok = free_session_check(ack, _row(n_max=9.0, headroom=2, room_limit="cap"))
    assert ok.status == PASS and ok.detail == "replica gpu-0: 2 of 4 sessions free, room +2 cap, N_max 9.0, 1.9 req/s"


def test_status_text_prints_the_consoles_room():
    from lerobot_fleet.data.model import FleetSnapshot
    from lerobot_fleet.verbs.commands import snapshot_text

    snap = FleetSnapshot(
        router="r",
        connection="connected",
        data_age_s=0.1,
        robots=(),
        servers=(replace(_row(), model_id="m", service="t"),),
    )
    (line,) = [x for x in snapshot_text(snap).splitlines() if "gpu-0" in x]
    assert line.split()[:7] == ["gpu-0", "ok", "2/4", "0.00", "1.9", "1.8", "-1"] and "N_max" in line
