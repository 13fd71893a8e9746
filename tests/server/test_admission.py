"""Seats (server/admission.py) from fakes: who gets a seat, a full replica's idle seat, and a session's teardown."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from lerobot_policy_remote.server.admission import Seats
from lerobot_policy_remote.server.cordon import Cordon
from lerobot_policy_remote.server.lifecycle import Lifecycle
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.metrics import ServerMetrics
from lerobot_policy_remote.server.sessions import Registry
from lerobot_policy_remote.server.stub import StubBackend
from lerobot_policy_remote.testing.fake_robot import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.wire.codes import Refusal
from lerobot_policy_remote.wire.messages import FeatureSpec, SessionOpen


class Pub:
    def __init__(self, key: str, express: bool) -> None:
        self.key, self.express, self.undeclared = key, express, False

    def undeclare(self) -> None:
        self.undeclared = True


class FakeZenoh:
    """Declares recording publishers; no transports (no shared memory)."""

    def __init__(self) -> None:
        self.pubs: list[Pub] = []
        self.info = SimpleNamespace(transports=lambda: [], zid=lambda: "zid")

    def declare_publisher(self, key: str, **kw: Any) -> Pub:
        self.pubs.append(Pub(key, kw["express"]))
        return self.pubs[-1]


def _seats(max_sessions: int = 2, reclaim_idle_s: float = 10.0) -> tuple[Seats, Registry, ServerMetrics]:
    manifest = Manifest(
        model=ModelSpec(repo_or_path="stub"),
        default_task="t",
        max_sessions=max_sessions,
        health_port=0,
        warmup_inferences=0,
        reclaim_idle_s=reclaim_idle_s,
    )
    backend = StubBackend(0.0, SIM_ARM_ACTION_NAMES, max_sessions=max_sessions)
    registry, metrics = Registry(), ServerMetrics("rep")
    seats = Seats(
        manifest=manifest,
        caps=backend.caps,
        backend=backend,
        registry=registry,
        lifecycle=Lifecycle(),
        cordon=Cordon("rep", progress=lambda s: None),
        metrics=metrics,
        keys=manifest.keys(),
        replica="rep",
    )
    seats.z = FakeZenoh()
    return seats, registry, metrics


def _open(cid: str, **kw: Any) -> SessionOpen:
    return SessionOpen(
        client_uuid=cid,
        action_names=list(SIM_ARM_ACTION_NAMES),
        features=[FeatureSpec("observation.state", "state", [6])],
        fps=30.0,
        **kw,
    )


def test_a_seat_declares_an_express_and_a_queued_publisher_and_closing_releases_both() -> None:
    seats, registry, metrics = _seats()
    ack = seats.open(_open("arm-1"))
    assert ack.ok and ack.session_id and ack.replica == "rep"
    s = registry.get("arm-1")
    assert s is not None and (s.pub.express, s.pub_batched.express) == (True, False)
    assert s.pub.key == s.pub_batched.key and s.pub.key.endswith("/robot/arm-1/action")
    assert metrics.value("sessions_opened_total") == 1.0 and metrics.value("active_sessions") == 1.0
    seats.close(s, "liveliness_lost")
    assert s.closed and s.pub.undeclared and s.pub_batched.undeclared and registry.get("arm-1") is None
    assert metrics.value("sessions_closed_total", reason="liveliness_lost") == 1.0
    seats.close(s, "again")  # a session already gone is not released twice
    assert metrics.value("sessions_closed_total", reason="again") == 0.0


def test_a_full_replica_refuses_unless_a_seat_sat_idle_past_the_reclaim_time() -> None:
    seats, registry, metrics = _seats(max_sessions=2, reclaim_idle_s=10.0)
    assert seats.open(_open("arm-1")).ok and seats.open(_open("arm-2")).ok
    full = seats.open(_open("arm-3"))
    assert not full.ok and full.code == Refusal.SERVER_FULL and registry.count() == 2
    assert metrics.value("sessions_rejected_total", code=Refusal.SERVER_FULL) == 1.0
    registry.get("arm-1").last_obs = time.monotonic() - 11.0  # a ghost: nothing sent for longer than reclaim_idle_s
    assert not seats.open(_open("arm-3", dry_run=True)).ok  # a dry run never takes a seat
    assert seats.open(_open("arm-3")).ok
    assert registry.get("arm-1") is None and registry.get("arm-3") is not None
    assert metrics.value("sessions_closed_total", reason="idle_reclaimed") == 1.0


def test_a_reopen_replaces_the_old_session_and_releases_it() -> None:
    seats, registry, _ = _seats()
    assert seats.open(_open("arm-1")).ok
    old = registry.get("arm-1")
    assert seats.open(_open("arm-1")).ok
    new = registry.get("arm-1")
    assert new is not old and old.closed and old.pub.undeclared and not new.closed and registry.count() == 1
