"""The per-model figures (data/model_compare.py) on fixtures, the rollout's read age, and one row per moved robot."""

from __future__ import annotations

import pytest
from lerobot_fleet.data.model_compare import ModelFigures, ModelWindow, compare_models, figure_texts
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import RobotTelemetry
from lerobot_policy_remote.wire.rollout import RolloutStatus

OLD = Namespace("acme/act", "v1", "pick")
NEW = Namespace("acme/act", "v2", "pick")
OTHER = Namespace("acme/pi0", "main", "fold")
FP_OLD, FP_NEW = "a" * 64, "b" * 64


def _tele(robot: str, ns: Namespace, fp: str = "", state: str = "STREAMING", **kw: float) -> RobotTelemetry:
    return RobotTelemetry(
        client_uuid=robot,
        state=state,
        model_id=ns.model_id,
        service=ns.service,
        revision=ns.revision,
        fingerprint=fp,
        **kw,  # type: ignore[arg-type]
    )


def _store() -> tuple[FleetStore, ManualClock]:
    clock = ManualClock(100.0)
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    return store, clock


def _send(store: FleetStore, robot: str, ns: Namespace, fp: str = "", **kw: object) -> None:
    store.on_robot_alive(robot, True, ns)
    store.on_telemetry(_tele(robot, ns, fp, **kw), ns)  # type: ignore[arg-type]


def _by_revision(models: tuple[ModelFigures, ...]) -> dict[str, ModelFigures]:
    return {m.revision: m for m in models}


def test_one_figures_row_per_model_with_the_documented_aggregates():
    store, _ = _store()
    for i, (p50, p95, age) in enumerate([(10.0, 20.0, 0.5), (30.0, 40.0, 0.7), (50.0, 900.0, 0.9)]):
        _send(store, f"old-{i}", OLD, FP_OLD, rtt_p50_ms=p50, rtt_p95_ms=p95, staleness_s=age)
    _send(store, "old-3", OLD, FP_OLD, state="RECONNECTING", staleness_s=5.0)
    _send(store, "new-0", NEW, FP_NEW, rtt_p50_ms=12.0, rtt_p95_ms=15.0, staleness_s=0.4)
    _send(store, "new-1", NEW, FP_NEW, state="DEGRADED", rtt_p50_ms=80.0, rtt_p95_ms=200.0, staleness_s=1.6)
    models = _by_revision(compare_models(store.capture(), service="pick"))
    old, new = models["v1"], models["v2"]
    assert (old.model_id, old.fingerprint, old.service) == ("acme/act", FP_OLD, "pick")
    assert (old.robots, old.streaming) == (4, 3)
    assert old.rtt_p50_ms == 30.0  # the median of the robots' p50s (the reconnecting one reports none)
    assert old.rtt_p95_ms == 900.0  # the nearest-rank p95 of the robots' p95s: the worst robot's tail shows
    assert old.degraded_rate == pytest.approx(0.25)  # RECONNECTING counts as not streaming well
    assert old.chunk_age_s == 0.7  # median staleness of the robots executing chunks (not the reconnecting one)
    assert (new.robots, new.streaming, new.degraded_rate) == (2, 1, 0.5)
    assert new.rtt_p50_ms == pytest.approx(46.0) and new.chunk_age_s == pytest.approx(1.0)
    assert figure_texts(new) == ("2", "1", "46/200", "50", "0.00", "1.00", "0")


def test_services_filter_and_the_order_most_robots_first():
    store, _ = _store()
    _send(store, "new-0", NEW, FP_NEW)
    for i in range(2):
        _send(store, f"old-{i}", OLD, FP_OLD)
    _send(store, "towel", OTHER, "c" * 64)
    every = compare_models(store.capture())
    assert [(m.service, m.revision) for m in every] == [("fold", "main"), ("pick", "v1"), ("pick", "v2")]
    assert [m.revision for m in compare_models(store.capture(), service="pick")] == ["v1", "v2"]
    assert compare_models(store.capture(), service="nothing") == ()


def test_robots_without_a_fingerprint_are_grouped_by_namespace():
    store, _ = _store()
    _send(store, "older-1", OLD)
    _send(store, "older-2", OLD)
    _send(store, "pinned", OLD, FP_OLD)
    models = compare_models(store.capture())
    assert sorted((m.fingerprint, m.robots) for m in models) == [("", 2), (FP_OLD, 1)]
    assert all(m.revision == "v1" and m.model_id == "acme/act" for m in models)


def test_gone_stale_and_silent_robots_do_not_count():
    store, clock = _store()
    _send(store, "stale", OLD, FP_OLD)
    clock.advance(6.0)  # past ROBOT_STALE_S: its figures are old
    _send(store, "live", OLD, FP_OLD)
    _send(store, "gone", OLD, FP_OLD)
    store.on_robot_alive("gone", False, OLD)
    store.on_robot_alive("silent", True, OLD)  # a token, no telemetry yet
    (model,) = compare_models(store.capture())
    assert model.robots == 1


def test_fallback_rate_and_errors_are_increases_over_the_window():
    store, clock = _store()
    window = ModelWindow(window_s=30.0)
    for t, (fallbacks, errors) in enumerate([(0, 1), (5, 1), (2, 3), (4, 3)]):  # a restart between 2nd and 3rd
        if t:
            clock.advance(1.0)
        _send(store, "arm", OLD, FP_OLD, fallback_count=fallbacks, errors=errors, seq=t)
        _send(store, "calm", OLD, FP_OLD, fallback_count=7, errors=0, seq=t)
        window.observe(store.capture())
    (model,) = window.figures(store.capture())
    # arm: +5, then a restart counted from zero (+2), then +2 = 9 ticks; calm: none. Over 2 robots x 3 s.
    assert model.fallback_rate == pytest.approx(9 / 6)
    assert model.errors == 2  # 1 -> 1 -> 3 -> 3
    clock.advance(40.0)  # the window forgets what is older than 30 s
    _send(store, "arm", OLD, FP_OLD, fallback_count=4, errors=3, seq=9)
    window.observe(store.capture())
    (model,) = window.figures(store.capture())
    assert (model.fallback_rate, model.errors) == (0.0, 0)


def test_the_window_keeps_a_round_trip_trend_per_model():
    store, clock = _store()
    window = ModelWindow(points=3)
    for i, rtt in enumerate([10.0, 20.0, 30.0, 40.0]):
        _send(store, "arm", OLD, FP_OLD, rtt_p50_ms=rtt, seq=i)
        models, trends = window.advance(store.capture())
        clock.advance(1.0)
    assert trends == {models[0].key: (20.0, 30.0, 40.0)}


def test_rollout_reads_are_old_after_3_s_or_a_failed_read():
    store, clock = _store()
    assert store.rollout().is_old and store.rollout().status is None
    status = RolloutStatus(rollout_id="r1", phase="canary")
    store.set_rollout(status)
    assert not store.rollout().is_old and store.rollout().status is status
    clock.advance(3.5)
    assert store.rollout().is_old and store.rollout().age_s == pytest.approx(3.5)
    store.set_rollout(status)
    store.set_rollout(None, "no fleet router answered")
    read = store.rollout()
    assert read.is_old and read.status is status and read.error == "no fleet router answered"


@pytest.mark.parametrize("order", ["new token first", "old token gone first"])
def test_a_robot_moved_to_another_model_is_one_row(order: str):
    store, _ = _store()
    _send(store, "arm-1", OLD, FP_OLD)
    if order == "new token first":
        store.on_robot_alive("arm-1", True, NEW)
        store.on_robot_alive("arm-1", False, OLD)
    else:
        store.on_robot_alive("arm-1", False, OLD)
        store.on_robot_alive("arm-1", True, NEW)
    store.on_telemetry(_tele("arm-1", NEW, FP_NEW), NEW)
    store.on_telemetry(_tele("arm-1", OLD, FP_OLD), OLD)  # its last report from before the move, delivered late
    rows = [r for r in store.snapshot().robots if r.robot_id == "arm-1"]
    assert [(r.ns, r.state.name) for r in rows] == [(NEW, "STREAMING")]
    assert any("arm-1: moved to acme/act@v2" in e.text for e in store.events())


def test_the_same_id_in_two_services_stays_two_robots():
    store, clock = _store()
    _send(store, "arm-1", OLD, FP_OLD)
    _send(store, "arm-1", OTHER, "c" * 64)
    clock.advance(1.0)  # a token that vanishes while the console is linked is a robot gone
    store.on_robot_alive("arm-1", False, OTHER)
    rows = sorted((r.ns.service, r.state.name) for r in store.snapshot().robots)
    assert rows == [("fold", "GONE"), ("pick", "STREAMING")]
